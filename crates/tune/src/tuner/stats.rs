//! Statistics: per-op counters and their totals, summed over the counters
//! the miss path keeps under the lock and those each thread's hits bump.
//!
//! Owns the statistics types and their reading; never writes a counter.

use super::Tuner;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Per-op statistics.
///
/// Every keyable lookup is counted once, as a hit or a miss: `hits +
/// misses` is the number of lookups. In tuning mode every miss is tuned
/// (`tuned == misses` for lookups that fit the op's config), and a bucket
/// this rank had cached but that a collective strategy tuned again (a rank
/// had no entry, or the ranks' cached choices differed) is a miss, not a
/// hit. `fallbacks` counts calls answered with the fallback (outside tuning
/// mode, or when every candidate failed).
///
/// Serialized (in this field order) as the counters of `ranktune tune`'s
/// rank and job reports, embedded in them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpStats {
    /// Buckets measured.
    pub tuned: u64,
    /// Lookups answered from a stored decision (for collective strategies:
    /// one every rank had, with the same choice).
    pub hits: u64,
    /// Lookups without a usable stored decision: none stored, or (collective
    /// strategies) not the same on every rank, so the bucket was tuned again.
    pub misses: u64,
    /// Calls answered with the fallback.
    pub fallbacks: u64,
    /// Candidates that failed while measuring.
    pub failed_tactics: u64,
    /// Time spent measuring.
    pub tuning_seconds: f64,
    /// Isolated worker processes started (0 without isolation; then left
    /// out of the serialized form).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub worker_starts: u64,
    /// The time those workers took to start, seconds (part of `tuning_seconds`).
    #[serde(default, skip_serializing_if = "is_zero_f")]
    pub worker_start_seconds: f64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_f(v: &f64) -> bool {
    *v == 0.0
}

impl OpStats {
    /// Adds `s`'s counters to these (e.g. to sum the ranks of a job).
    pub fn add(&mut self, s: &OpStats) {
        self.tuned += s.tuned;
        self.hits += s.hits;
        self.misses += s.misses;
        self.fallbacks += s.fallbacks;
        self.failed_tactics += s.failed_tactics;
        self.tuning_seconds += s.tuning_seconds;
        self.worker_starts += s.worker_starts;
        self.worker_start_seconds += s.worker_start_seconds;
    }
}

/// Statistics of a tuner: totals and per op.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TunerStats {
    /// Sum over ops.
    pub total: OpStats,
    /// By op name.
    pub per_op: BTreeMap<String, OpStats>,
}

impl Tuner {
    /// Statistics so far (hits of all threads included).
    pub fn stats(&self) -> TunerStats {
        let inner = self.lock();
        let mut out = TunerStats::default();
        for (i, op) in inner.ops.iter().enumerate() {
            let mut s = op.stats.clone();
            for c in &inner.counters {
                s.hits += c.hits.get(i).map_or(0, |a| a.load(Ordering::Relaxed));
                s.fallbacks += c.fallbacks.get(i).map_or(0, |a| a.load(Ordering::Relaxed));
            }
            out.total.add(&s);
            out.per_op.entry(op.name.clone()).or_default().add(&s);
        }
        out
    }

    /// Total time spent measuring.
    pub fn tuning_time(&self) -> Duration {
        Duration::from_secs_f64(self.stats().total.tuning_seconds)
    }
}
