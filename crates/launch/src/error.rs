//! How a launch fails: the error of [`Launcher::run`](super::Launcher::run),
//! the failed ranks it names, and their messages, which read exactly as
//! `ranktune tune --ranks N` has always printed them.
//!
//! Types and messages only; nothing here starts or waits for a process.

use super::protocol::ResultError;
use std::ffi::OsString;
use std::process::ExitStatus;

/// Why a launch failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// A launch of no rank.
    #[error("a launch needs at least one rank")]
    NoRanks,
    /// A rank's process could not be started; the ranks already started
    /// were stopped.
    #[error("starting rank {rank} ({})", .program.to_string_lossy())]
    Spawn {
        /// The rank.
        rank: u32,
        /// The program that could not be started.
        program: OsString,
        /// The system's reason.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for a rank's process failed.
    #[error("waiting for rank {rank}")]
    Wait {
        /// The rank.
        rank: u32,
        /// The system's reason.
        #[source]
        source: std::io::Error,
    },
    /// One or more ranks failed (all ranks ran to their end).
    #[error("{} of {world_size} ranks failed:\n  {}", .failures.len(), join_failures(.failures))]
    RanksFailed {
        /// The number of ranks launched.
        world_size: u32,
        /// The failed ranks, in rank order.
        failures: Vec<RankFailure>,
    },
    /// The launch was stopped by a signal (SIGINT/SIGTERM) that the launcher
    /// forwarded to every rank; each rank that stopped cleanly exited with
    /// the signal's status after saving its work.
    #[error("stopped by signal {signal}{}", unclean_suffix(.unclean))]
    Interrupted {
        /// The signal.
        signal: i32,
        /// The number of ranks launched.
        world_size: u32,
        /// The ranks that did not stop cleanly (killed after the grace
        /// period, or failed), in rank order.
        unclean: Vec<RankFailure>,
    },
}

impl LaunchError {
    /// The signal that stopped the launch, if one did.
    pub fn interrupted_by(&self) -> Option<i32> {
        match self {
            LaunchError::Interrupted { signal, .. } => Some(*signal),
            _ => None,
        }
    }
}

fn unclean_suffix(unclean: &[RankFailure]) -> String {
    if unclean.is_empty() {
        String::new()
    } else {
        format!("; {} ranks did not stop cleanly:\n  {}", unclean.len(), join_failures(unclean))
    }
}

/// One failed rank.
#[derive(Debug)]
pub struct RankFailure {
    /// The rank.
    pub rank: u32,
    /// What went wrong.
    pub kind: RankFailureKind,
}

/// How a rank failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RankFailureKind {
    /// It exited unsuccessfully or was killed.
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// Its last stderr text lines (at most [`STDERR_TAIL_LINES`](super::STDERR_TAIL_LINES)).
        stderr_tail: Vec<String>,
    },
    /// It exited successfully but its stdout held no readable result.
    NoResult(ResultError),
}

impl std::fmt::Display for RankFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            RankFailureKind::Exited { status, stderr_tail } => {
                write!(
                    f,
                    "rank {} failed ({}); last lines of its stderr:\n    ",
                    self.rank,
                    describe_status(status)
                )?;
                if stderr_tail.is_empty() {
                    f.write_str("(none)")
                } else {
                    f.write_str(&stderr_tail.join("\n    "))
                }
            }
            RankFailureKind::NoResult(_) => {
                write!(f, "rank {} exited successfully but printed no report", self.rank)
            }
        }
    }
}

/// The failures, one per line (the lines after the first indented).
fn join_failures(failures: &[RankFailure]) -> String {
    failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  ")
}

/// `exit status 3`, `killed by signal 6`.
pub fn describe_status(status: &ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("killed by signal {sig}");
        }
    }
    status.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn failures_read_like_the_command_always_wrote_them() {
        let failed = |code: i32, tail: &[&str]| RankFailure {
            rank: 2,
            kind: RankFailureKind::Exited {
                status: exit_status(code),
                stderr_tail: tail.iter().map(|s| s.to_string()).collect(),
            },
        };
        assert_eq!(
            failed(3, &["a", "b"]).to_string(),
            "rank 2 failed (exit status 3); last lines of its stderr:\n    a\n    b"
        );
        assert_eq!(
            failed(1, &[]).to_string(),
            "rank 2 failed (exit status 1); last lines of its stderr:\n    (none)"
        );
        let none = RankFailure { rank: 0, kind: RankFailureKind::NoResult(ResultError::Missing) };
        assert_eq!(none.to_string(), "rank 0 exited successfully but printed no report");
        let err = LaunchError::RanksFailed { world_size: 4, failures: vec![none, failed(1, &[])] };
        assert_eq!(
            err.to_string(),
            "2 of 4 ranks failed:\n  rank 0 exited successfully but printed no report\n  \
             rank 2 failed (exit status 1); last lines of its stderr:\n    (none)"
        );
    }

    #[cfg(unix)]
    fn exit_status(code: i32) -> ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        ExitStatus::from_raw(code << 8)
    }

    #[cfg(unix)]
    #[test]
    fn signals_are_named() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(describe_status(&ExitStatus::from_raw(6)), "killed by signal 6");
    }
}
