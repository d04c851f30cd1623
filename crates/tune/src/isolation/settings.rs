//! Isolation settings read from text: the command's `--isolate`,
//! `--candidate-timeout` and `--candidate-memory` and their variables, and
//! Python's `isolate=`, `candidate_timeout=` and `candidate_memory=`
//! (through the bindings) — one set of rules and one wording, so the
//! variables mean the same thing to a job's Python and to its `ranktune
//! tune`.
//!
//! Owns parsing and the error sentences only; which source wins (a flag
//! over its variable) and what the settings become ([`Limits`](super::Limits),
//! [`Isolation`](super::Isolation)) are the callers'.

use ranktune_core::setting;
pub use ranktune_core::setting::SettingError;
use std::time::Duration;

/// The variable that turns isolation on (`1`, `fork`; `spawn`: fresh
/// processes, Python's mode for processes holding a CUDA context) or off
/// (`0`, `off`).
pub const ISOLATE_ENV: &str = "RANKTUNE_ISOLATE";
/// The variable of a fixed per-candidate time limit, in seconds.
pub const TIMEOUT_ENV: &str = "RANKTUNE_CANDIDATE_TIMEOUT";
/// The variable of the memory limit, in MiB a worker may grow by.
pub const MEMORY_ENV: &str = "RANKTUNE_CANDIDATE_MEMORY";

/// The launchers' variables for the number of ranks on this machine
/// (torchrun, Open MPI, MPICH, Slurm), read in this order.
pub const LOCAL_SIZE_VARS: [&str; 4] =
    ["LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"];

/// The longest fixed time limit taken: a week.
const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);
/// The largest memory limit taken, in MiB (1 PiB).
const MAX_MIB: u64 = 1 << 30;

/// Where candidates are measured.
///
/// ```
/// use ranktune_tune::isolation::settings::Mode;
/// assert_eq!(Mode::parse("1", "RANKTUNE_ISOLATE").unwrap(), Mode::Fork);
/// assert_eq!(Mode::parse(" Spawn ", "isolate=").unwrap(), Mode::Spawn);
/// let e = Mode::parse("maybe", "RANKTUNE_ISOLATE").unwrap_err().to_string();
/// assert!(e.starts_with("RANKTUNE_ISOLATE=\"maybe\" is not an isolation mode; give off (or 0)"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In the tuning process.
    Off,
    /// In a worker forked from the tuning process.
    Fork,
    /// In a fresh process (Python's `python -m ranktune._worker`).
    Spawn,
}

impl Mode {
    /// Reads `off`/`0`/`false`/`no`, `fork`/`1`/`true`/`yes`/`on` or
    /// `spawn`, in any case; `source` names the flag, variable or argument
    /// for the error, which says what to give.
    pub fn parse(text: &str, source: &str) -> Result<Mode, SettingError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "0" | "false" | "no" | "off" => Ok(Mode::Off),
            "1" | "true" | "yes" | "on" | "fork" => Ok(Mode::Fork),
            "spawn" => Ok(Mode::Spawn),
            _ => Err(SettingError::new(
                source,
                text,
                "is not an isolation mode; give off (or 0), fork (or 1) to measure in forked \
                 workers, or spawn to measure in fresh processes (Python's mode where a fork \
                 cannot serve; `ranktune tune` forks for it)",
            )),
        }
    }

    /// The mode's name, as [`Mode::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Fork => "fork",
            Mode::Spawn => "spawn",
        }
    }
}

/// A fixed per-candidate time limit: a number of seconds above 0, at most
/// a week (`2`, `0.5`).
///
/// ```
/// use ranktune_tune::isolation::settings::timeout;
/// use std::time::Duration;
/// assert_eq!(timeout("2.5", "--candidate-timeout").unwrap(), Duration::from_millis(2500));
/// assert!(timeout("soon", "--candidate-timeout").unwrap_err().to_string()
///     .starts_with("--candidate-timeout \"soon\" is not a number of seconds"));
/// ```
pub fn timeout(text: &str, source: &str) -> Result<Duration, SettingError> {
    let bounds = setting::Seconds { zero: false, max: MAX_TIMEOUT, example: "30" };
    setting::seconds(text, source, bounds)
}

/// A memory limit: a whole number of MiB from 1 up (`4096`).
///
/// ```
/// use ranktune_tune::isolation::settings::memory_mib;
/// assert_eq!(memory_mib("512", "RANKTUNE_CANDIDATE_MEMORY").unwrap(), 512);
/// assert!(memory_mib("lots", "candidate_memory=").is_err());
/// ```
pub fn memory_mib(text: &str, source: &str) -> Result<u64, SettingError> {
    setting::whole(text, source, 1..=MAX_MIB, "MiB", "4096")
}

/// How many ranks run on this machine as the launcher says (the first of
/// [`LOCAL_SIZE_VARS`] that holds a number above 0), read through `env`;
/// 1 when none does.
pub fn local_ranks_from(env: impl Fn(&str) -> Option<String>) -> u32 {
    LOCAL_SIZE_VARS
        .iter()
        .find_map(|v| env(v)?.trim().parse::<u32>().ok().filter(|&n| n > 0))
        .unwrap_or(1)
}

/// Limits given where nothing is isolated: an error naming both limits
/// and how to turn isolation on, or leave them out. `on`: isolation is on;
/// `given`: a limit was given as a flag or argument (a variable alone is a
/// job-wide setting, and is not refused). `limits` names the two (`--candidate-timeout
/// and --candidate-memory`, `candidate_timeout= and candidate_memory=`),
/// `turn_on` how to turn isolation on.
///
/// ```
/// use ranktune_tune::isolation::settings::limits_need_isolation;
/// assert!(limits_need_isolation(true, true, "a", "b").is_ok());
/// let e = limits_need_isolation(false, true, "--t and --m", "--isolate").unwrap_err();
/// assert_eq!(e, "--t and --m limit isolated workers; add --isolate, or leave them out");
/// ```
pub fn limits_need_isolation(
    on: bool,
    given: bool,
    limits: &str,
    turn_on: &str,
) -> Result<(), String> {
    if on || !given {
        return Ok(());
    }
    Err(format!("{limits} limit isolated workers; add {turn_on}, or leave them out"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_every_spelling_and_errors_say_what_to_give() {
        for (t, m) in
            [("0", Mode::Off), ("OFF", Mode::Off), ("yes", Mode::Fork), ("fork", Mode::Fork)]
        {
            assert_eq!(Mode::parse(t, ISOLATE_ENV), Ok(m), "{t}");
            assert_eq!(Mode::parse(m.name(), "x"), Ok(m));
        }
        let e = Mode::parse("maybe", "isolate=").unwrap_err().to_string();
        assert!(e.starts_with("isolate=\"maybe\" is not an isolation mode"), "{e}");
    }

    #[test]
    fn limits_parse_or_say_what_to_give() {
        assert_eq!(timeout("2.5", "--candidate-timeout").unwrap(), Duration::from_millis(2500));
        for bad in ["", "x", "-1", "0", "inf", "NaN", "1e30"] {
            let e = timeout(bad, "--candidate-timeout").unwrap_err().to_string();
            assert!(e.starts_with("--candidate-timeout"), "{e}");
            assert!(e.contains("e.g."), "{e}");
        }
        assert_eq!(memory_mib("512", "--candidate-memory").unwrap(), 512);
        for bad in ["0", "-5", "1.5", "lots", "99999999999"] {
            let e = memory_mib(bad, MEMORY_ENV).unwrap_err().to_string();
            assert!(e.starts_with("RANKTUNE_CANDIDATE_MEMORY=\""), "{e}");
        }
    }

    #[test]
    fn local_ranks_take_the_first_launcher_variable_that_holds_a_count() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |n: &str| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string())
        };
        assert_eq!(local_ranks_from(env(&[])), 1);
        assert_eq!(
            local_ranks_from(env(&[("LOCAL_WORLD_SIZE", "x"), ("MPI_LOCALNRANKS", "4")])),
            4
        );
        assert_eq!(
            local_ranks_from(env(&[("LOCAL_WORLD_SIZE", "0"), ("SLURM_NTASKS_PER_NODE", "2")])),
            2
        );
    }
}
