//! `--isolate`, `--candidate-timeout` and `--candidate-memory` (and their
//! environment variables): whether `tune` measures in worker processes, and
//! under which limits.
//!
//! Owns reading and checking those settings; the workers themselves are
//! `ranktune_tune::isolation`'s.

use super::TuneArgs;
use anyhow::bail;
use ranktune_tune::isolation::settings::{self as parse, limits_need_isolation, Mode};
use ranktune_tune::isolation::settings::{ISOLATE_ENV, MEMORY_ENV, TIMEOUT_ENV};
use ranktune_tune::isolation::{Isolation, Limits};
use std::time::Duration;

/// The isolation settings `args` and the environment ask for: whether it
/// is on, the fixed time limit and the memory limit (MiB) if given.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Settings {
    pub(super) on: bool,
    pub(super) timeout: Option<Duration>,
    pub(super) memory_mib: Option<u64>,
}

/// Reads and checks the settings: flags first, then the environment, by
/// the rules and words Python's `autotune` uses (`isolation::settings`).
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
            Some(v) => match Mode::parse(&v, ISOLATE_ENV)? {
                Mode::Off => false,
                Mode::Fork => true,
                // Python's mode for a process that must not fork (a CUDA
                // context): one variable serves a job's Python and its
                // `ranktune tune`, whose CPU kernels lose nothing in a fork.
                Mode::Spawn => {
                    tracing::info!(
                        "{ISOLATE_ENV}=spawn: `ranktune tune` measures its built-in CPU \
                         kernels in forked workers (spawn is Python's mode for processes \
                         that hold a CUDA context)"
                    );
                    true
                }
            },
        };
    let timeout = match (&args.candidate_timeout, env(TIMEOUT_ENV)?) {
        (Some(v), _) => Some(parse::timeout(v, "--candidate-timeout")?),
        (None, Some(v)) => Some(parse::timeout(&v, TIMEOUT_ENV)?),
        (None, None) => None,
    };
    let memory_mib = match (&args.candidate_memory, env(MEMORY_ENV)?) {
        (Some(v), _) => Some(parse::memory_mib(v, "--candidate-memory")?),
        (None, Some(v)) => Some(parse::memory_mib(&v, MEMORY_ENV)?),
        (None, None) => None,
    };
    limits_need_isolation(
        on,
        args.candidate_timeout.is_some() || args.candidate_memory.is_some(),
        "--candidate-timeout and --candidate-memory",
        &format!("--isolate (or {ISOLATE_ENV}=1)"),
    )
    .map_err(anyhow::Error::msg)?;
    Ok(Settings { on, timeout, memory_mib })
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
    parse::local_ranks_from(|v| std::env::var(v).ok())
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
