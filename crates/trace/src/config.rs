//! Trace settings: the [`TraceConfig`] struct and reading it from the
//! environment. Parsing only; nothing here starts recording.

use super::window::IterWindow;
use super::TraceError;
use std::path::PathBuf;

/// How a [`super::TraceSession`] records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceConfig {
    /// Path template; each rank's file comes from [`super::rank_path`].
    pub path: PathBuf,
    /// Iterations to keep (both ends included); `None` keeps everything.
    pub window: Option<IterWindow>,
    /// The event buffer's bound, in plain events: `max_events × 24` bytes
    /// of event storage. Events with args or run-time names take more of
    /// it; once it is spent, later events are counted as dropped
    /// (`otherData.dropped_events` in the file).
    pub max_events: usize,
    /// `distributedInfo.backend` in the file.
    pub backend: String,
    /// Export on SIGINT/SIGTERM, then terminate as the signal intends.
    pub handle_signals: bool,
    /// Export from a panic hook (before unwinding, and even with `panic = "abort"`).
    pub handle_panics: bool,
    /// The run's id, written as `otherData.run_id` so analysis never mixes
    /// files of different runs. `None`: found when the session starts (see
    /// [`super::TraceSession::start`]).
    pub run_id: Option<String>,
    /// The clock base every rank of the run writes as `baseTimeNanoseconds`
    /// (nanoseconds since the Unix epoch, no later than this process's
    /// start). `None`: [`BASE_VAR`] when the session starts, else this
    /// process's own start.
    pub base_ns: Option<u64>,
}

/// Variables read by [`TraceConfig::from_env`] (first wins, second is the
/// TensorRT-LLM alias).
pub const PATH_VARS: [&str; 2] = ["RANKTUNE_TRACE", "TLLM_TORCH_PROFILE_TRACE"];
/// Iteration window variables (first wins).
pub const WINDOW_VARS: [&str; 2] = ["RANKTUNE_PROFILE_ITERS", "TLLM_PROFILE_START_STOP"];
/// Buffer bound variable.
pub const MAX_EVENTS_VAR: &str = "RANKTUNE_TRACE_MAX_EVENTS";
/// `0`/`false`/`no`/`off` turns the signal handlers off.
pub const SIGNALS_VAR: &str = "RANKTUNE_TRACE_SIGNALS";
/// The run's shared clock base (nanoseconds since the Unix epoch); set by
/// `ranktune tune --ranks N` for its ranks.
pub const BASE_VAR: &str = ranktune_core::job::TRACE_BASE_VAR;

impl TraceConfig {
    /// Default bound on kept events (about 80 MB).
    pub const DEFAULT_MAX_EVENTS: usize = 1_000_000;

    /// Records everything to `path` with the defaults.
    pub fn new(path: impl Into<PathBuf>) -> TraceConfig {
        TraceConfig {
            path: path.into(),
            window: None,
            max_events: Self::DEFAULT_MAX_EVENTS,
            backend: "ranktune".to_string(),
            handle_signals: true,
            handle_panics: true,
            run_id: None,
            base_ns: None,
        }
    }

    /// Reads `RANKTUNE_TRACE` (alias `TLLM_TORCH_PROFILE_TRACE`),
    /// `RANKTUNE_PROFILE_ITERS` (alias `TLLM_PROFILE_START_STOP`),
    /// `RANKTUNE_TRACE_MAX_EVENTS`, `RANKTUNE_TRACE_SIGNALS` and
    /// `RANKTUNE_TRACE_BASE_NS`.
    /// `Ok(None)` when no trace path is set.
    pub fn from_env() -> Result<Option<TraceConfig>, TraceError> {
        let all =
            PATH_VARS.iter().chain(&WINDOW_VARS).chain([&MAX_EVENTS_VAR, &SIGNALS_VAR, &BASE_VAR]);
        for var in all {
            if let Err(std::env::VarError::NotUnicode(_)) = std::env::var(var) {
                return Err(TraceError::EnvNotUnicode { var: var.to_string() });
            }
        }
        Self::from_env_with(|name| std::env::var(name).ok())
    }

    /// For a CLI: `path` (e.g. `--trace PATH`) wins over `RANKTUNE_TRACE`;
    /// the other settings still come from the environment. `Ok(None)` when
    /// neither gives a path.
    pub fn from_env_or(path: Option<PathBuf>) -> Result<Option<TraceConfig>, TraceError> {
        let all =
            PATH_VARS.iter().chain(&WINDOW_VARS).chain([&MAX_EVENTS_VAR, &SIGNALS_VAR, &BASE_VAR]);
        for var in all {
            if let Err(std::env::VarError::NotUnicode(_)) = std::env::var(var) {
                return Err(TraceError::EnvNotUnicode { var: var.to_string() });
            }
        }
        Self::from_env_or_with(path, |name| std::env::var(name).ok())
    }

    /// Like [`TraceConfig::from_env_or`], reading variables through `env`.
    pub fn from_env_or_with(
        path: Option<PathBuf>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<TraceConfig>, TraceError> {
        match path {
            None => Self::from_env_with(env),
            Some(path) => {
                // Read the other settings as if the path variable were set.
                let from_env = Self::from_env_with(|name| {
                    if PATH_VARS.contains(&name) {
                        Some("-".to_string())
                    } else {
                        env(name)
                    }
                })?;
                Ok(from_env.map(|cfg| TraceConfig { path: path.clone(), ..cfg }))
            }
        }
    }

    /// The shared clock base in [`BASE_VAR`], reading variables through
    /// `env`: `Ok(None)` when unset or blank, an error when it is not a
    /// number of nanoseconds.
    pub fn base_from_env_with(
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<u64>, TraceError> {
        use ranktune_core::setting::{from_env, whole};
        let example = "1764460800000000000";
        Ok(from_env(env, BASE_VAR, |t, s| whole(t, s, 1..=u64::MAX, "nanoseconds", example))?)
    }

    /// Like [`TraceConfig::from_env`], reading variables through `env`.
    pub fn from_env_with(
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<TraceConfig>, TraceError> {
        let first = |vars: &[&'static str]| {
            vars.iter().find_map(|v| env(v).filter(|s| !s.trim().is_empty()).map(|s| (*v, s)))
        };
        let window = first(&WINDOW_VARS);
        let Some((_, path)) = first(&PATH_VARS) else {
            if let Some((var, _)) = window {
                tracing::warn!(
                    "{var} is set but no trace path is; set RANKTUNE_TRACE to record a trace"
                );
            }
            return Ok(None);
        };
        let mut cfg = TraceConfig::new(path.trim());
        if let Some((var, value)) = window {
            cfg.window = Some(IterWindow::parse_from(var, &value)?);
        }
        let events = ranktune_core::setting::from_env(&env, MAX_EVENTS_VAR, |t, s| {
            ranktune_core::setting::whole(t, s, 1..=usize::MAX as u64, "events", "1000000")
        })?;
        if let Some(n) = events {
            cfg.max_events = usize::try_from(n).unwrap_or(usize::MAX);
        }
        cfg.base_ns = Self::base_from_env_with(&env)?;
        if let Some(value) = env(SIGNALS_VAR) {
            cfg.handle_signals =
                !matches!(value.trim().to_ascii_lowercase().as_str(), "0" | "false" | "no" | "off");
        }
        Ok(Some(cfg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<Option<TraceConfig>, TraceError> {
        let map: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        TraceConfig::from_env_with(|n| map.get(n).cloned())
    }

    #[test]
    fn nothing_set_means_no_trace() {
        assert_eq!(cfg(&[]).unwrap(), None);
        assert_eq!(cfg(&[("RANKTUNE_PROFILE_ITERS", "1-2")]).unwrap(), None);
        assert_eq!(cfg(&[("RANKTUNE_TRACE", " ")]).unwrap(), None);
    }

    #[test]
    fn ranktune_names_win_over_aliases() {
        let c = cfg(&[
            ("RANKTUNE_TRACE", "a.json"),
            ("TLLM_TORCH_PROFILE_TRACE", "b.json"),
            ("TLLM_PROFILE_START_STOP", "7"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.path, PathBuf::from("a.json"));
        assert_eq!(c.window.unwrap().to_string(), "7");
        let c = cfg(&[("TLLM_TORCH_PROFILE_TRACE", "b.json")]).unwrap().unwrap();
        assert_eq!(c, TraceConfig::new("b.json"));
    }

    #[test]
    fn cli_path_wins_and_env_settings_still_apply() {
        let map: HashMap<String, String> = [
            ("RANKTUNE_TRACE", "env.json"),
            ("RANKTUNE_PROFILE_ITERS", "3-4"),
            ("RANKTUNE_TRACE_MAX_EVENTS", "77"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = TraceConfig::from_env_or_with(Some("cli.json".into()), |n| map.get(n).cloned())
            .unwrap()
            .unwrap();
        assert_eq!(c.path, PathBuf::from("cli.json"));
        assert_eq!((c.window.unwrap().to_string(), c.max_events), ("3-4".to_string(), 77));
        let c = TraceConfig::from_env_or_with(None, |n| map.get(n).cloned()).unwrap().unwrap();
        assert_eq!(c.path, PathBuf::from("env.json"));
        let none = TraceConfig::from_env_or_with(None, |_| None).unwrap();
        assert_eq!(none, None);
        let c = TraceConfig::from_env_or_with(Some("x/".into()), |_| None).unwrap().unwrap();
        assert_eq!(c, TraceConfig::new("x/"));
    }

    #[test]
    fn settings_and_errors() {
        let c = cfg(&[
            ("RANKTUNE_TRACE", "t/"),
            ("RANKTUNE_TRACE_MAX_EVENTS", "500"),
            ("RANKTUNE_TRACE_SIGNALS", "off"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((c.max_events, c.handle_signals), (500, false));
        let e = cfg(&[("RANKTUNE_TRACE", "t"), ("TLLM_PROFILE_START_STOP", "5-")]).unwrap_err();
        assert!(e.to_string().starts_with("TLLM_PROFILE_START_STOP="), "{e}");
        for bad in ["0", "-3", "lots"] {
            let e =
                cfg(&[("RANKTUNE_TRACE", "t"), ("RANKTUNE_TRACE_MAX_EVENTS", bad)]).unwrap_err();
            assert!(e.to_string().contains("RANKTUNE_TRACE_MAX_EVENTS"), "{e}");
            let e = cfg(&[("RANKTUNE_TRACE", "t"), ("RANKTUNE_TRACE_BASE_NS", bad)]).unwrap_err();
            assert!(e.to_string().contains("RANKTUNE_TRACE_BASE_NS"), "{e}");
        }
        let c =
            cfg(&[("RANKTUNE_TRACE", "t"), ("RANKTUNE_TRACE_BASE_NS", " 1764460800000000000 ")])
                .unwrap()
                .unwrap();
        assert_eq!(c.base_ns, Some(1_764_460_800_000_000_000));
    }
}
