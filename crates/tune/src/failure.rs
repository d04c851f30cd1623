//! How a candidate failed: the kinds of failure and one failed candidate of
//! a bucket, as the tuner records them.
//!
//! Owns the classification only. It never decides what a failure leads to
//! (the tuner fails the candidate; a blocklist may remember the hard ones)
//! and never measures or runs anything.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The kind of a candidate's failure.
///
/// [`Error`](Self::Error) and [`Panic`](Self::Panic) happen inside the
/// tuning process (or an isolated worker) and leave it healthy; the
/// *hard* kinds — [`Crash`](Self::Crash), [`Timeout`](Self::Timeout),
/// [`Memory`](Self::Memory) — are only seen with isolation on, where they
/// cost the worker process instead of the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureKind {
    /// The runner returned an error.
    Error,
    /// The runner panicked (caught).
    Panic,
    /// The isolated worker died: by a signal (SIGSEGV, SIGABRT, …) or by
    /// exiting while it ran the candidate.
    Crash,
    /// The candidate ran past its time limit; the worker was killed.
    Timeout,
    /// The candidate ran out of the worker's memory limit.
    Memory,
    /// The candidate ran but its output was wrong (a validate hook).
    Validation,
}

impl FailureKind {
    /// Every kind, in declaration order.
    pub const ALL: [FailureKind; 6] = [
        FailureKind::Error,
        FailureKind::Panic,
        FailureKind::Crash,
        FailureKind::Timeout,
        FailureKind::Memory,
        FailureKind::Validation,
    ];

    /// The lowercase name (`"crash"`, `"timeout"`, …), as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Error => "error",
            FailureKind::Panic => "panic",
            FailureKind::Crash => "crash",
            FailureKind::Timeout => "timeout",
            FailureKind::Memory => "memory",
            FailureKind::Validation => "validation",
        }
    }

    /// Whether the failure took the worker process down with it (crash,
    /// timeout, memory): the failures isolation exists for.
    pub fn is_hard(self) -> bool {
        matches!(self, FailureKind::Crash | FailureKind::Timeout | FailureKind::Memory)
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One failed candidate of a bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateFailure {
    /// The candidate's position in the bucket's candidate list (the
    /// valid `(runner, tactic)` pairs in canonical order).
    pub position: usize,
    /// What happened.
    pub kind: FailureKind,
    /// The reason, for people: `"crashed: SIGSEGV (signal 11)"`,
    /// `"timed out after 2.0 s (limit 2.0 s)"`, `"ran out of memory: limit 512 MiB"`.
    pub message: String,
}

impl fmt::Display for CandidateFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "candidate {}: {} ({})", self.position, self.message, self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde() {
        for k in FailureKind::ALL {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<FailureKind>(&json).unwrap(), k);
        }
    }

    #[test]
    fn only_crash_timeout_and_memory_are_hard() {
        let hard: Vec<_> = FailureKind::ALL.into_iter().filter(|k| k.is_hard()).collect();
        assert_eq!(hard, [FailureKind::Crash, FailureKind::Timeout, FailureKind::Memory]);
    }
}
