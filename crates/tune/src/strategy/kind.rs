//! The [`Strategy`] names and how they are read from text and the environment.
//!
//! Owns parsing and naming only; never talks to other ranks.

use super::error::StrategyError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Environment variable that picks the default strategy (`RANKTUNE_STRATEGY=merge`).
pub const STRATEGY_ENV: &str = "RANKTUNE_STRATEGY";

/// Environment variable that sets the collective timeout in seconds
/// (`RANKTUNE_STRATEGY_TIMEOUT=60`, fractions allowed).
pub const TIMEOUT_ENV: &str = "RANKTUNE_STRATEGY_TIMEOUT";

/// Default bound on every wait of a collective strategy. It must cover the
/// time one rank spends measuring one bucket (the broadcast strategy's other
/// ranks wait that long for rank 0), so it is generous.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// How the ranks of a job share the tuning of an op.
///
/// ```
/// use ranktune_tune::strategy::Strategy;
/// let s: Strategy = "Parallel".parse().unwrap();
/// assert_eq!(s, Strategy::Parallel);
/// assert_eq!(s.to_string(), "parallel");
/// assert!("fastest".parse::<Strategy>().unwrap_err().to_string().contains("independent, broadcast, merge or parallel"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Each rank tunes for itself; entries go to its own `rank_<N>` section.
    #[default]
    Independent,
    /// Rank 0 measures; every rank adopts rank 0's measurements and winner.
    Broadcast,
    /// Every rank measures every candidate; the slowest rank's timing of each
    /// candidate counts; every rank adopts the same winner.
    Merge,
    /// The candidates are split round-robin over the ranks; each measures its
    /// share; every rank adopts the same winner.
    Parallel,
}

impl Strategy {
    /// Every strategy, in documentation order.
    pub const ALL: [Strategy; 4] =
        [Strategy::Independent, Strategy::Broadcast, Strategy::Merge, Strategy::Parallel];

    /// The lowercase name (`independent`, `broadcast`, `merge`, `parallel`).
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Independent => "independent",
            Strategy::Broadcast => "broadcast",
            Strategy::Merge => "merge",
            Strategy::Parallel => "parallel",
        }
    }

    /// True for the strategies that talk to other ranks (all but independent).
    /// Their results are identical on every rank and stored in the `shared` section.
    pub fn is_collective(self) -> bool {
        self != Strategy::Independent
    }

    /// The strategy named by `RANKTUNE_STRATEGY`, `None` when it is unset or blank.
    pub fn from_env() -> Result<Option<Strategy>, StrategyError> {
        Self::from_env_with(|n| std::env::var_os(n).map(|v| v.to_string_lossy().into_owned()))
    }

    /// Like [`from_env`](Self::from_env), reading variables through `env`.
    pub fn from_env_with(
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Strategy>, StrategyError> {
        match env(STRATEGY_ENV) {
            Some(v) if !v.trim().is_empty() => {
                v.parse().map(Some).map_err(|_| StrategyError::Env {
                    var: STRATEGY_ENV,
                    value: v,
                    reason: "unknown strategy; use independent, broadcast, merge or parallel"
                        .into(),
                })
            }
            _ => Ok(None),
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = StrategyError;

    /// Case-insensitive; surrounding blanks are ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let want = s.trim().to_ascii_lowercase();
        Strategy::ALL
            .into_iter()
            .find(|k| k.name() == want)
            .ok_or_else(|| StrategyError::Parse { value: s.to_string() })
    }
}

/// The collective timeout from `RANKTUNE_STRATEGY_TIMEOUT` (seconds), or
/// [`DEFAULT_TIMEOUT`] when unset or blank.
pub fn timeout_from_env() -> Result<Duration, StrategyError> {
    timeout_from_env_with(|n| std::env::var_os(n).map(|v| v.to_string_lossy().into_owned()))
}

/// Like [`timeout_from_env`], reading variables through `env`.
pub fn timeout_from_env_with(
    env: impl Fn(&str) -> Option<String>,
) -> Result<Duration, StrategyError> {
    let t = ranktune_core::setting::from_env(env, TIMEOUT_ENV, timeout_from_text)?;
    Ok(t.unwrap_or(DEFAULT_TIMEOUT))
}

/// The collective timeout in `text` (from `source`: the variable, or a
/// Python argument): seconds above 0, at most 10,000,000.
pub fn timeout_from_text(
    text: &str,
    source: &str,
) -> Result<Duration, ranktune_core::setting::SettingError> {
    use ranktune_core::setting::{seconds, Seconds};
    let bounds = Seconds { zero: false, max: Duration::from_secs(10_000_000), example: "60" };
    seconds(text, source, bounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_parse_case_insensitively() {
        for s in Strategy::ALL {
            assert_eq!(s.to_string().parse::<Strategy>().unwrap(), s);
            assert_eq!(format!(" {} ", s.name().to_uppercase()).parse::<Strategy>().unwrap(), s);
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.name()));
        }
        assert!(!Strategy::Independent.is_collective());
        assert!(Strategy::Parallel.is_collective());
        assert_eq!(Strategy::default(), Strategy::Independent);
    }

    #[test]
    fn bad_names_are_clear_errors() {
        let err = "mrege".parse::<Strategy>().unwrap_err().to_string();
        assert!(err.contains("\"mrege\"") && err.contains("merge or parallel"), "{err}");
        let err = Strategy::from_env_with(|_| Some("all".into())).unwrap_err().to_string();
        assert!(err.starts_with("RANKTUNE_STRATEGY=\"all\""), "{err}");
    }

    #[test]
    fn env_values() {
        assert_eq!(Strategy::from_env_with(|_| None).unwrap(), None);
        assert_eq!(Strategy::from_env_with(|_| Some("  ".into())).unwrap(), None);
        assert_eq!(
            Strategy::from_env_with(|_| Some("merge".into())).unwrap(),
            Some(Strategy::Merge)
        );
        assert_eq!(timeout_from_env_with(|_| None).unwrap(), DEFAULT_TIMEOUT);
        assert_eq!(
            timeout_from_env_with(|_| Some("2.5".into())).unwrap(),
            Duration::from_millis(2500)
        );
        for bad in ["0", "-1", "soon", "NaN", "inf"] {
            let err = timeout_from_env_with(|_| Some(bad.into())).unwrap_err().to_string();
            assert!(err.contains("RANKTUNE_STRATEGY_TIMEOUT") && err.contains("seconds"), "{err}");
        }
    }
}
