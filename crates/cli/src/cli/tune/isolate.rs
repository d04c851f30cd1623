//! `--isolate`, `--candidate-timeout` and `--candidate-memory` (and their
//! environment variables): whether `tune` measures in worker processes, and
//! under which limits.
//!
//! Owns reading and checking those settings; the workers themselves are
//! `ranktune_tune::isolation`'s.

use super::TuneArgs;
use anyhow::bail;
use ranktune_tune::{Isolation, Limits};
use std::time::Duration;

/// The environment variable that turns isolation on (`1`, `fork`; `spawn`,
/// Python's mode, forks here too) or off (`0`, `off`): the same values
/// Python's `autotune` reads.
pub(super) const ISOLATE_ENV: &str = "RANKTUNE_ISOLATE";
/// The environment variable of `--candidate-timeout`.
pub(super) const TIMEOUT_ENV: &str = "RANKTUNE_CANDIDATE_TIMEOUT";
/// The environment variable of `--candidate-memory`.
pub(super) const MEMORY_ENV: &str = "RANKTUNE_CANDIDATE_MEMORY";

/// The isolation settings `args` and the environment ask for: whether it
/// is on, the fixed time limit and the memory limit (MiB) if given.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Settings {
    pub(super) on: bool,
    pub(super) timeout: Option<Duration>,
    pub(super) memory_mib: Option<u64>,
}

/// Reads and checks the settings: flags first, then the environment.
pub(super) fn settings(args: &TuneArgs) -> anyhow::Result<Settings> {
    let env = |name: &str| -> anyhow::Result<Option<String>> {
        match std::env::var(name) {
            Ok(v) if v.trim().is_empty() => Ok(None),
            Ok(v) => Ok(Some(v)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                bail!("{name} is not valid UTF-8; unset it or give a plain value")
            }
        }
    };
    let on = args.isolate
        || match env(ISOLATE_ENV)? {
            None => false,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" | "fork" => true,
                "0" | "false" | "no" | "off" => false,
                // Python's mode for a process that must not fork (a CUDA
                // context): one variable serves a job's Python and its
                // `ranktune tune`, whose CPU kernels lose nothing in a fork.
                "spawn" => {
                    tracing::info!(
                        "{ISOLATE_ENV}=spawn: `ranktune tune` measures its built-in CPU \
                         kernels in forked workers (spawn is Python's mode for processes \
                         that hold a CUDA context)"
                    );
                    true
                }
                _ => bail!(
                    "{ISOLATE_ENV}={v:?} is not an isolation mode; give off (or 0), fork (or 1) \
                     to measure in forked workers, or spawn (Python's fresh processes; the \
                     command forks)"
                ),
            },
        };
    let timeout = match (&args.candidate_timeout, env(TIMEOUT_ENV)?) {
        (Some(v), _) => Some(seconds(v, "--candidate-timeout")?),
        (None, Some(v)) => Some(seconds(&v, TIMEOUT_ENV)?),
        (None, None) => None,
    };
    let memory_mib = match (&args.candidate_memory, env(MEMORY_ENV)?) {
        (Some(v), _) => Some(mib(v, "--candidate-memory")?),
        (None, Some(v)) => Some(mib(&v, MEMORY_ENV)?),
        (None, None) => None,
    };
    if !on && (args.candidate_timeout.is_some() || args.candidate_memory.is_some()) {
        bail!(
            "--candidate-timeout and --candidate-memory limit isolated workers; add --isolate \
             (or {ISOLATE_ENV}=1), or leave them out"
        );
    }
    Ok(Settings { on, timeout, memory_mib })
}

/// A time limit in seconds (`2`, `0.5`), from `what` (a flag or a variable).
fn seconds(text: &str, what: &str) -> anyhow::Result<Duration> {
    let v: f64 = match text.trim().parse() {
        Ok(v) => v,
        Err(_) => bail!("{what} {text:?} is not a number of seconds; give e.g. 30 or 2.5"),
    };
    match Duration::try_from_secs_f64(v) {
        Ok(d) if v > 0.0 && d <= Duration::from_secs(7 * 24 * 3600) => Ok(d),
        _ => bail!(
            "{what} {text:?} is not a usable time limit; give a number of seconds above 0 \
             (at most a week), e.g. 30"
        ),
    }
}

/// A memory limit in MiB, from `what`.
fn mib(text: &str, what: &str) -> anyhow::Result<u64> {
    match text.trim().parse::<u64>() {
        Ok(v) if (1..=1 << 30).contains(&v) => Ok(v),
        Ok(_) => bail!(
            "{what} {text:?} is out of range; give a whole number of MiB from 1 up, e.g. 4096"
        ),
        Err(_) => bail!("{what} {text:?} is not a whole number of MiB; give e.g. 4096 (4 GiB)"),
    }
}

/// The tuner's isolation for one of `local_ranks` ranks on this machine.
pub(super) fn isolation(s: &Settings, local_ranks: u32) -> Isolation {
    if !s.on {
        return Isolation::Off;
    }
    let mut limits = Limits::for_local_ranks(local_ranks);
    limits.timeout = s.timeout;
    if let Some(m) = s.memory_mib {
        limits.memory = Some(m << 20);
    }
    Isolation::Fork(limits)
}

/// How many ranks run on this machine: all of them for `--ranks` (a child
/// knows the job's size), else the launcher's local size where it says
/// (torchrun, Open MPI, MPICH, Slurm), else 1.
pub(super) fn local_ranks(child: bool, world_size: u32) -> u32 {
    if child {
        return world_size.max(1);
    }
    ["LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse::<u32>().ok().filter(|&n| n > 0))
        .unwrap_or(1)
}

/// The flags that give a child rank the same settings.
pub(super) fn child_flags(s: &Settings) -> Vec<String> {
    let mut a = Vec::new();
    if s.on {
        a.push("--isolate".to_string());
        if let Some(t) = s.timeout {
            a.push("--candidate-timeout".into());
            a.push(t.as_secs_f64().to_string());
        }
        if let Some(m) = s.memory_mib {
            a.push("--candidate-memory".into());
            a.push(m.to_string());
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_or_say_what_to_give() {
        assert_eq!(seconds("2.5", "--candidate-timeout").unwrap(), Duration::from_millis(2500));
        for bad in ["", "x", "-1", "0", "inf", "NaN", "1e30"] {
            let e = seconds(bad, "--candidate-timeout").unwrap_err().to_string();
            assert!(e.starts_with("--candidate-timeout"), "{e}");
            assert!(e.contains("e.g."), "{e}");
        }
        assert_eq!(mib("512", "--candidate-memory").unwrap(), 512);
        for bad in ["0", "-5", "1.5", "lots", "99999999999"] {
            let e = mib(bad, "RANKTUNE_CANDIDATE_MEMORY").unwrap_err().to_string();
            assert!(e.starts_with("RANKTUNE_CANDIDATE_MEMORY"), "{e}");
        }
    }

    #[test]
    fn child_flags_carry_the_settings() {
        let s =
            Settings { on: true, timeout: Some(Duration::from_millis(1500)), memory_mib: Some(64) };
        assert_eq!(
            child_flags(&s),
            ["--isolate", "--candidate-timeout", "1.5", "--candidate-memory", "64"]
        );
        assert!(child_flags(&Settings::default()).is_empty());
    }
}
