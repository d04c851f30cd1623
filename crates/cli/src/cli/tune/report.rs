//! The reports of `ranktune tune`: one row per bucket, one report per rank
//! (what a child rank sends its launcher), and the whole job's report (what
//! `--json` prints), with the rows built from the tuner's records and the
//! cache's entries.
//!
//! Data only: printing is `table`, tuning is `rank`. The JSON shape of these
//! types is the `--json` output and the child protocol's result document, so
//! a field is never renamed or dropped.

use super::labels::tactic_label;
use ranktune_cache::Entry;
use ranktune_tune::{ChoiceSource, OpStats, TuneRecord};
use serde::{Deserialize, Serialize};

/// One bucket's result in a report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub(super) rank: u32,
    pub(super) op: String,
    /// Shapes of the bucket (per input).
    pub(super) bucket: Vec<Vec<u64>>,
    pub(super) runner: String,
    pub(super) tactic: serde_json::Value,
    /// `tuned` (measured now), `cache` (hit) or `fallback`.
    pub(super) source: String,
    pub(super) best_us: Option<f64>,
    /// The fallback's median; with `best_us` (the winner's median, the
    /// statistic decisions use) it gives `speedup`.
    pub(super) fallback_us: Option<f64>,
    /// How many samples the fallback's median is of: below
    /// [`ROUGH_BELOW`] the ratio is rough (a clearly slower candidate is
    /// dropped after a sample or two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) fallback_samples: Option<u32>,
    pub(super) speedup: Option<f64>,
    pub(super) candidates: usize,
    pub(super) failures: Vec<String>,
    /// Where a tuned entry went: `shared` (tuned together) or `rank_<N>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) section: Option<String>,
    /// Candidates this rank measured itself (tuned rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) measured_here: Option<usize>,
    /// Why a collective strategy tuned this bucket independently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) note: Option<String>,
    /// Known-bad tactics (the cache's blocklist) not measured: `runner
    /// tactic (kind)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) skipped: Vec<String>,
    /// Candidates put on the blocklist by this bucket: `runner tactic (kind)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) blocked: Vec<String>,
    /// Retried known-bad tactics that worked and left the blocklist.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) unblocked: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One rank's report (what a child prints).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RankReport {
    pub(super) rank: u32,
    pub(super) world_size: u32,
    /// The tuner's counters (`tuned`, `hits`, `misses`, `fallbacks`,
    /// `failed_tactics`, `tuning_seconds`), fields of the report itself.
    #[serde(flatten)]
    pub(super) counts: OpStats,
    pub(super) entries_saved: usize,
    /// The strategy (`independent`, `broadcast`, `merge`, `parallel`).
    #[serde(default)]
    pub(super) strategy: String,
    /// Buckets tuned together with the other ranks.
    #[serde(default)]
    pub(super) shared: u64,
    /// Buckets every rank had cached with the same choice (agreed, not measured).
    #[serde(default)]
    pub(super) agreed_hits: u64,
    /// Buckets a collective strategy had to tune independently.
    #[serde(default)]
    pub(super) strategy_fallbacks: u64,
    /// Durable saves this rank made (`--save-every`'s, the final one
    /// included) and the seconds they took: what durable progress cost.
    #[serde(default)]
    pub(super) saves: u32,
    #[serde(default)]
    pub(super) save_seconds: f64,
    pub(super) rows: Vec<Row>,
}

/// The whole job's report (`--json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobReport {
    pub(super) cache: String,
    pub(super) world_size: u32,
    /// How the ranks shared tuning.
    pub(super) strategy: String,
    /// The ranks' counters, summed (fields of the report itself).
    #[serde(flatten)]
    pub(super) counts: OpStats,
    pub(super) wall_seconds: f64,
    /// With `--model`: the model and its layers' shapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) model: Option<super::model::ModelShapes>,
    pub(super) ranks: Vec<RankReport>,
}

impl JobReport {
    /// The job's report from its ranks' reports (in rank order).
    pub(super) fn new(cache: String, ranks: Vec<RankReport>, wall_seconds: f64) -> Self {
        JobReport {
            cache,
            world_size: ranks.first().map_or(1, |r| r.world_size),
            strategy: ranks.first().map_or_else(String::new, |r| r.strategy.clone()),
            counts: ranks.iter().fold(OpStats::default(), |mut sum, r| {
                sum.add(&r.counts);
                sum
            }),
            wall_seconds,
            model: None,
            ranks,
        }
    }
}

/// A "vs fallback" ratio from a fallback median of fewer samples than this
/// is marked rough.
pub(super) const ROUGH_BELOW: u32 = 3;

/// Whether `row`'s speed-up rests on a fallback timed too few times to be
/// more than rough.
pub(super) fn speedup_is_rough(row: &Row) -> bool {
    row.speedup.is_some() && row.fallback_samples.is_some_and(|n| n < ROUGH_BELOW)
}

/// How many times faster the best candidate is than the fallback: the
/// ratio of their medians (the statistic the decision uses).
fn speedup(best: Option<f64>, fallback: Option<f64>) -> Option<f64> {
    match (best, fallback) {
        (Some(b), Some(f)) if b > 0.0 => Some(f / b),
        _ => None,
    }
}

/// The row of a bucket tuned now (or given its fallback).
pub(super) fn row_from_record(
    rank: u32,
    op: &str,
    bucket: &[Vec<u64>],
    runner: &str,
    tactic: serde_json::Value,
    source: ChoiceSource,
    rec: Option<&TuneRecord>,
) -> Row {
    let best_us = rec.and_then(|r| r.best_us);
    let fallback_us = rec.and_then(|r| r.fallback_us);
    let fallback_samples = rec.and_then(|r| r.fallback_samples);
    Row {
        rank,
        op: op.to_string(),
        bucket: bucket.to_vec(),
        runner: runner.to_string(),
        tactic,
        source: if source == ChoiceSource::Tuned { "tuned" } else { "fallback" }.to_string(),
        best_us,
        fallback_us,
        fallback_samples,
        speedup: speedup(best_us, fallback_us),
        candidates: rec.map_or(0, |r| r.measured),
        section: rec.map(|r| r.section.name()),
        measured_here: rec.map(|r| r.measured_here),
        note: rec.and_then(|r| r.fallback.clone()),
        skipped: rec
            .map(|r| {
                r.skipped
                    .iter()
                    .map(|s| format!("{} {} ({})", s.runner, tactic_label(&s.tactic), s.kind))
                    .collect()
            })
            .unwrap_or_default(),
        blocked: rec
            .map(|r| {
                r.blocked
                    .iter()
                    .map(|(run, t, kind)| format!("{run} {} ({kind})", tactic_label(t)))
                    .collect()
            })
            .unwrap_or_default(),
        unblocked: rec.map_or(0, |r| r.unblocked),
        failures: rec
            .map(|r| {
                r.failures
                    .iter()
                    .map(|(run, t, e)| format!("{run} {}: {e}", tactic_label(t)))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The row of a bucket found in the cache.
pub(super) fn row_from_entry(
    rank: u32,
    op: &str,
    bucket: &[Vec<u64>],
    runner: &str,
    tactic: serde_json::Value,
    entry: Option<&Entry>,
) -> Row {
    let best_us = entry.map(|e| e.time_us);
    let fallback_stats = entry.and_then(|e| {
        e.candidates
            .iter()
            .find(|c| {
                c.runner_index == 0 && Some(&c.tactic) == e.candidates.first().map(|f| &f.tactic)
            })
            .and_then(|c| c.stats.as_ref())
    });
    let fallback_us = fallback_stats.map(|s| s.median_us);
    let fallback_samples = fallback_stats.map(|s| s.samples);
    Row {
        rank,
        op: op.to_string(),
        bucket: bucket.to_vec(),
        runner: runner.to_string(),
        tactic,
        source: "cache".to_string(),
        best_us,
        fallback_us,
        fallback_samples,
        speedup: speedup(best_us, fallback_us),
        candidates: entry.map_or(0, |e| e.candidates.len()),
        section: None,
        measured_here: None,
        note: None,
        skipped: Vec::new(),
        blocked: Vec::new(),
        unblocked: 0,
        failures: entry
            .map(|e| {
                e.candidates
                    .iter()
                    .filter_map(|c| {
                        c.error
                            .as_ref()
                            .map(|m| format!("{} {}: {m}", c.runner, tactic_label(&c.tactic)))
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_counters_keep_their_place_in_the_documents() {
        let rank = r#"{"rank":1,"world_size":2,"tuned":3,"hits":4,"misses":5,"fallbacks":6,"failed_tactics":7,"tuning_seconds":0.25,"entries_saved":3,"strategy":"merge","shared":2,"agreed_hits":1,"strategy_fallbacks":0,"saves":2,"save_seconds":0.125,"rows":[]}"#;
        let report: RankReport = serde_json::from_str(rank).unwrap();
        assert_eq!(report.counts.misses, 5);
        assert_eq!(serde_json::to_string(&report).unwrap(), rank);
        let job = JobReport::new("c.json".into(), vec![report.clone(), report], 1.5);
        let text = serde_json::to_string(&job).unwrap();
        assert!(
            text.starts_with(
                r#"{"cache":"c.json","world_size":2,"strategy":"merge","tuned":6,"hits":8,"misses":10,"fallbacks":12,"failed_tactics":14,"tuning_seconds":0.5,"wall_seconds":1.5,"ranks":[{"rank":1,"#
            ),
            "{text}"
        );
    }
}
