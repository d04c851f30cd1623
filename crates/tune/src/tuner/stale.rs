//! Staleness: whether a stored entry still fits this environment and this op,
//! and [`StaleReason`] when it does not.
//!
//! Owns the checks only (pure functions of the entry, the identity and the
//! op); it never changes the tuner, never logs and never reads files.

use super::load::LoadedEntry;
use crate::key::BucketKey;
use crate::op::Op;
use crate::runner::TuneInputs;
use ranktune_cache::{CacheData, Entry, Identity};
use std::fmt;

/// Why a stored entry was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StaleReason {
    /// Measured by another ranktune version.
    LibVersion {
        /// Version that measured it.
        stored: String,
        /// This version.
        current: String,
    },
    /// Measured on another device / CPU identity.
    Device {
        /// The stored identity, described.
        stored: String,
        /// This identity, described.
        current: String,
    },
    /// The runner's parameters changed.
    Fingerprint {
        /// Runner name.
        runner: String,
    },
    /// The candidate set (runners, fingerprints, tactics) changed.
    Checksum,
    /// The entry names a runner or tactic the op no longer has, or a bucket
    /// that does not fit.
    Unknown(String),
    /// Its tactic is on the blocklist (it crashed, timed out, ran out of
    /// memory or failed validation here since): tuned again.
    Blocked(String),
}

impl fmt::Display for StaleReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StaleReason::LibVersion { stored, current } => {
                write!(f, "measured by ranktune {stored}, this is {current}")
            }
            StaleReason::Device { stored, current } => {
                write!(f, "measured on {stored}, this is {current}")
            }
            StaleReason::Fingerprint { runner } => {
                write!(f, "runner {runner:?} has other parameters now (fingerprint changed)")
            }
            StaleReason::Checksum => f.write_str("the candidate set changed (checksum differs)"),
            StaleReason::Unknown(s) => f.write_str(s),
            StaleReason::Blocked(s) => write!(f, "its tactic is a known-bad one: {s}"),
        }
    }
}

/// Why `entry` (of `data`) was measured in another environment than
/// `env_digest` / `current`, or `None` when it was measured in this one.
pub(super) fn env_problem(
    data: &CacheData,
    entry: &Entry,
    env_digest: &str,
    current: &Identity,
) -> Option<StaleReason> {
    if entry.env == env_digest {
        return None;
    }
    Some(match data.metadata.environments.get(&entry.env) {
        Some(id) if id.lib_version != current.lib_version => StaleReason::LibVersion {
            stored: id.lib_version.clone(),
            current: current.lib_version.clone(),
        },
        Some(id) => StaleReason::Device { stored: id.describe(), current: current.describe() },
        None => StaleReason::Device {
            stored: format!("an unknown environment ({})", entry.env),
            current: current.describe(),
        },
    })
}

/// Checks a loaded entry against the op: `(key, runner, tactic)` or why stale.
pub(super) fn validate<I: TuneInputs>(
    op: &Op<I>,
    le: &LoadedEntry,
) -> Result<(BucketKey, u32, u32), StaleReason> {
    if let Some(p) = &le.env_problem {
        return Err(p.clone());
    }
    let Some(r) = op.runner_names().iter().position(|n| *n == le.key.runner) else {
        return Err(StaleReason::Unknown(format!("the op has no runner {:?} now", le.key.runner)));
    };
    if op.fingerprint(r) != le.key.fingerprint {
        return Err(StaleReason::Fingerprint { runner: le.key.runner.clone() });
    }
    if le.entry.checksum != op.checksum() {
        return Err(StaleReason::Checksum);
    }
    let Some(t) = op.tactics(r).iter().position(|t| *t == le.entry.tactic) else {
        return Err(StaleReason::Unknown(format!(
            "runner {:?} has no tactic {} now",
            le.key.runner, le.entry.tactic
        )));
    };
    let Some(sizes) = ranktune_cache::bucket_sizes(&le.key.bucket) else {
        return Err(StaleReason::Unknown(
            "the bucket holds a dim that is not a size (a negative or float dim)".into(),
        ));
    };
    let Some(key) = BucketKey::from_nested(&sizes) else {
        return Err(StaleReason::Unknown("the bucket exceeds the key limits".into()));
    };
    Ok((key, r as u32, t as u32))
}
