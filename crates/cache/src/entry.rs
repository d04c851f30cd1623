//! The data model of the tuning cache: keys, entries, candidates, identity.
//!
//! This module owns the *shape* of a tuning decision. It must never do I/O:
//! stores serialize these types, the tuner creates them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which part of the cache an entry belongs to.
///
/// Results of collective strategies are identical on every rank and live once
/// in `Shared`; independent tuning results live in their rank's section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// The `shared` section.
    Shared,
    /// The `rank_<N>` section.
    Rank(u32),
}

impl Section {
    /// The section's name in the file: `shared` or `rank_<N>`.
    pub fn name(&self) -> String {
        match self {
            Section::Shared => "shared".to_string(),
            Section::Rank(r) => format!("rank_{r}"),
        }
    }

    /// Parses a section name (`shared`, `rank_3`): exactly the names
    /// [`Section::name`] writes, so a rank has one spelling (`rank_01` and
    /// `rank_4294967296` are not sections this build can use).
    pub fn parse(name: &str) -> Option<Section> {
        if name == "shared" {
            return Some(Section::Shared);
        }
        let digits = name.strip_prefix("rank_")?;
        if digits.is_empty()
            || !digits.bytes().all(|b| b.is_ascii_digit())
            || (digits.len() > 1 && digits.starts_with('0'))
        {
            return None;
        }
        digits.parse().ok().map(Section::Rank)
    }

    /// The rank, or `None` for the shared section.
    pub fn rank(&self) -> Option<u32> {
        match self {
            Section::Shared => None,
            Section::Rank(r) => Some(*r),
        }
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// What a tuning decision is about.
///
/// Two runners of the same type with different parameters have different
/// fingerprints, so they never share entries (a reference bug: keys that
/// leave out a runner parameter hand one runner another's tactic).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EntryKey {
    /// The operation, e.g. `gemm`.
    pub op: String,
    /// The winning runner's name, e.g. `blocked`.
    pub runner: String,
    /// Stable fingerprint of the runner's parameters (never Rust's `Hash`).
    pub fingerprint: String,
    /// The shape bucket: for each input, its dims after bucketing.
    /// Each dim is a [`Dim`](crate::Dim): a size, a negative integer (`-1`)
    /// or a float, as the file that holds the key wrote it.
    pub bucket: Vec<Vec<crate::Dim>>,
}

impl fmt::Display for EntryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}@{} {:?}", self.op, self.runner, self.fingerprint, self.bucket)
    }
}

/// Timing statistics of one measured candidate, in microseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Fastest sample.
    pub min_us: f64,
    /// Median sample: the statistic decisions use.
    pub median_us: f64,
    /// 90th percentile sample.
    pub p90_us: f64,
    /// Relative spread, (p90 - min) / median.
    pub spread: f64,
    /// Number of timed samples.
    pub samples: u32,
}

/// One (runner, tactic) that was tried for a bucket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Runner name.
    pub runner: String,
    /// Position of the runner in the op's runner list.
    pub runner_index: u32,
    /// The tactic.
    pub tactic: serde_json::Value,
    /// Timings, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<Stats>,
    /// Error text, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A tuning decision: the chosen tactic and the evidence for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Position of the chosen runner in the op's runner list.
    pub runner_index: u32,
    /// The chosen tactic (any serde value).
    pub tactic: serde_json::Value,
    /// The chosen candidate's time (median), microseconds.
    pub time_us: f64,
    /// Every candidate measured, including failures.
    #[serde(default)]
    pub candidates: Vec<Candidate>,
    /// Checksum of the candidate set (runners, fingerprints, tactics).
    pub checksum: String,
    /// Digest of the [`Identity`] that measured it (see the file's metadata).
    pub env: String,
    /// When it was made, seconds since the Unix epoch.
    pub created_unix: u64,
}

/// What makes timings comparable: entries measured under another identity
/// are stale.
///
/// The device is identified by what changes performance (architecture,
/// model, core count or compute capability), not by host name: equal
/// machines share entries.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Identity {
    /// ranktune's version.
    pub lib_version: String,
    /// Device kind: `cpu` or `cuda`.
    pub device_kind: String,
    /// CPU model name or GPU name.
    pub device_name: String,
    /// CPU architecture and features, or CUDA compute capability (`9.0`).
    pub capability: String,
    /// CPU cores available to the process, or SM count.
    pub cores: u32,
}
