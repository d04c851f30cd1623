//! The summary's JSON document, typed: what `ranktune trace summary --json`
//! prints and what Python's `ranktune.trace.summary` returns, built once
//! here from a [`Summary`] and the [`Resolved`] inputs it was made of, and
//! only serialized by the command and the Python binding (schema in
//! docs/trace-analysis.md).
//!
//! Owns: the document's shape, its field names and the rounding of its
//! figures (µs to three decimals). It never computes a figure (that is
//! `summary` and `collectives`) and never prints or writes anything.

use super::collectives::Mismatch;
use super::inputs::Resolved;
use super::summary::{Method, RankSummary, SpanStat, Summary};
use serde::{Serialize, Serializer};
use serde_json::Value;

/// The schema name written into every document.
pub const SUMMARY_SCHEMA: &str = "ranktune.trace.summary/1";

/// The whole `--json` document. Serialize it with
/// [`SummaryDocument::to_json`]: the keys of every object then come in
/// alphabetical order, as `trace summary --json` has always printed them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryDocument {
    /// Always [`SUMMARY_SCHEMA`].
    pub schema: &'static str,
    /// The one-line verdict.
    pub verdict: String,
    /// The slow rank, if one stands out.
    pub straggler: Option<StragglerEntry>,
    /// The fastest and slowest mean step (with two ranks or more with steps).
    pub step_spread: Option<StepSpread>,
    /// Per rank, in rank order.
    pub ranks: Vec<RankEntry>,
    /// Collectives matched across ranks, and who made whom wait.
    pub collectives: CollectivesEntry,
    /// The inputs' warnings (with [`Summary::document`]), then the
    /// summary's.
    pub warnings: Vec<String>,
    /// What the inputs were, when the document was built from them
    /// ([`Summary::document`]); [`Summary::to_json`] has none.
    #[serde(flatten)]
    pub inputs: Option<InputsEntry>,
}

/// What the summarized inputs were.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputsEntry {
    /// Files of other runs that were left out, by path.
    pub left_out: Vec<String>,
    /// The run summarized (`None`: none recorded, or several mixed with
    /// `all_runs`).
    pub run_id: Option<String>,
}

/// One rank's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankEntry {
    /// The rank.
    pub rank: u32,
    /// The file.
    pub file: String,
    /// Events read.
    pub events: u64,
    /// Number of steps.
    pub steps: usize,
    /// Mean step time, µs.
    pub step_mean_us: Option<f64>,
    /// Median step time, µs.
    pub step_median_us: Option<f64>,
    /// 90th percentile step time, µs.
    pub step_p90_us: Option<f64>,
    /// Every step's duration, µs.
    pub step_times_us: Vec<f64>,
    /// Every step's time in collectives, µs.
    pub step_collective_us: Vec<f64>,
    /// Thread-busy time, µs.
    pub busy_us: f64,
    /// Time in collectives, µs.
    pub collective_us: f64,
    /// Time outside collectives in the window, µs.
    pub outside_collective_us: f64,
    /// Top spans by total time.
    pub top_spans_total: Vec<SpanEntry>,
    /// Top spans by self time.
    pub top_spans_self: Vec<SpanEntry>,
}

/// Time in spans of one name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpanEntry {
    /// The span name.
    pub name: String,
    /// Number of spans.
    pub count: u64,
    /// Sum of durations, µs.
    pub total_us: f64,
    /// Self time, µs.
    pub self_us: f64,
    /// Whether the name is a collective.
    pub collective: bool,
}

/// The fastest and the slowest rank by mean step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSpread {
    /// The fastest rank.
    pub fastest_rank: u32,
    /// Its mean step, µs.
    pub fastest_mean_us: f64,
    /// The slowest rank.
    pub slowest_rank: u32,
    /// Its mean step, µs.
    pub slowest_mean_us: f64,
    /// How much slower, percent (`None` when the fastest mean is 0).
    pub spread_pct: Option<f64>,
}

/// The slow rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StragglerEntry {
    /// The rank.
    pub rank: u32,
    /// One human-readable sentence.
    pub reason: String,
    /// How it was found.
    pub method: Method,
    /// Its figure, µs.
    pub value_us: f64,
    /// The median figure of the other ranks, µs.
    pub others_median_us: f64,
    /// How much more, percent.
    pub excess_pct: f64,
    /// The span where most extra time goes.
    pub span: Option<SpanExtra>,
    /// The collective where it caused the most wait.
    pub collective: Option<CulpritEntry>,
}

/// A span and its extra time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpanExtra {
    /// The span name.
    pub name: String,
    /// Extra time, µs.
    pub extra_us: f64,
}

/// Where the straggler caused the most wait.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CulpritEntry {
    /// The collective.
    pub name: String,
    /// Its process group, when recorded.
    pub group: Option<String>,
    /// How often it arrived last there.
    pub count: u64,
    /// Wait caused there, µs.
    pub wait_caused_us: f64,
}

/// The per-collective analysis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectivesEntry {
    /// Collectives matched on every rank of their group.
    pub matched: u64,
    /// Positions where ranks diverge.
    pub mismatched: u64,
    /// Per rank, in rank order.
    pub per_rank: Vec<BlameEntry>,
    /// The matched collectives with the largest skew.
    pub worst: Vec<SkewEntry>,
    /// The first divergence of each group that has one.
    pub mismatches: Vec<Mismatch>,
}

/// One rank's blame.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlameEntry {
    /// The rank.
    pub rank: u32,
    /// Matched collectives where it arrived last.
    pub last_count: u64,
    /// Wait it caused, µs.
    pub wait_caused_us: f64,
    /// Wait it suffered, µs.
    pub wait_suffered_us: f64,
}

/// One matched collective with a large skew.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkewEntry {
    /// Collective name.
    pub name: String,
    /// Process group, when recorded.
    pub group: Option<String>,
    /// `Seq`, or the position in the group.
    pub seq: u64,
    /// Last minus first arrival, µs.
    pub skew_us: f64,
    /// The rank that arrived last.
    pub last_rank: u32,
}

impl Serialize for Method {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// µs rounded to three decimals, as every figure of the document is.
fn r3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

impl SpanEntry {
    fn of(s: &SpanStat) -> Self {
        SpanEntry {
            name: s.name.clone(),
            count: s.count,
            total_us: r3(s.total_us),
            self_us: r3(s.self_us),
            collective: s.collective,
        }
    }
}

impl RankEntry {
    fn of(r: &RankSummary, top: usize) -> Self {
        RankEntry {
            rank: r.rank,
            file: r.file.clone(),
            events: r.events,
            steps: r.steps.len(),
            step_mean_us: r.step_mean_us.map(r3),
            step_median_us: r.step_median_us.map(r3),
            step_p90_us: r.step_p90_us.map(r3),
            step_times_us: r.steps.iter().map(|s| r3(s.dur_us)).collect(),
            step_collective_us: r.steps.iter().map(|s| r3(s.collective_us)).collect(),
            busy_us: r3(r.busy_us),
            collective_us: r3(r.collective_us),
            outside_collective_us: r3(r.outside_collective_us()),
            top_spans_total: r.top_total(top).iter().map(SpanEntry::of).collect(),
            top_spans_self: r.top_self(top).iter().map(SpanEntry::of).collect(),
        }
    }
}

impl StepSpread {
    /// The spread of the ranks' mean steps; `None` with fewer than two.
    fn of(ranks: &[RankSummary]) -> Option<Self> {
        let means: Vec<(u32, f64)> =
            ranks.iter().filter_map(|r| r.step_mean_us.map(|m| (r.rank, m))).collect();
        if means.len() < 2 {
            return None;
        }
        let lo = means.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
        let hi = means.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
        Some(StepSpread {
            fastest_rank: lo.0,
            fastest_mean_us: r3(lo.1),
            slowest_rank: hi.0,
            slowest_mean_us: r3(hi.1),
            spread_pct: (lo.1 > 0.0).then(|| r3((hi.1 - lo.1) / lo.1 * 100.0)),
        })
    }
}

impl StragglerEntry {
    fn of(s: &super::summary::Straggler) -> Self {
        StragglerEntry {
            rank: s.rank,
            reason: s.reason.clone(),
            method: s.method,
            value_us: r3(s.value_us),
            others_median_us: r3(s.others_us),
            excess_pct: r3(s.excess * 100.0),
            span: s.span.as_ref().map(|(n, d)| SpanExtra { name: n.clone(), extra_us: r3(*d) }),
            collective: s.collective.as_ref().map(|k| CulpritEntry {
                name: k.name.clone(),
                group: k.group.clone(),
                count: k.count,
                wait_caused_us: r3(k.caused_us),
            }),
        }
    }
}

impl CollectivesEntry {
    fn of(c: &super::collectives::Collectives) -> Self {
        CollectivesEntry {
            matched: c.matched,
            mismatched: c.mismatched,
            per_rank: c
                .per_rank
                .iter()
                .map(|b| BlameEntry {
                    rank: b.rank,
                    last_count: b.last_count,
                    wait_caused_us: r3(b.wait_caused_us),
                    wait_suffered_us: r3(b.wait_suffered_us),
                })
                .collect(),
            worst: c
                .worst
                .iter()
                .map(|w| SkewEntry {
                    name: w.name.clone(),
                    group: w.group.clone(),
                    seq: w.seq,
                    skew_us: r3(w.skew_us),
                    last_rank: w.last_rank,
                })
                .collect(),
            mismatches: c.mismatches.clone(),
        }
    }
}

impl InputsEntry {
    fn of(r: &Resolved) -> Self {
        InputsEntry {
            left_out: r.left_out.iter().map(|f| f.path.display().to_string()).collect(),
            run_id: r.run_id().map(str::to_string),
        }
    }
}

impl SummaryDocument {
    /// The document of `summary` alone, without what its inputs were.
    fn of(summary: &Summary) -> Self {
        SummaryDocument {
            schema: SUMMARY_SCHEMA,
            verdict: summary.verdict.clone(),
            straggler: summary.straggler.as_ref().map(StragglerEntry::of),
            step_spread: StepSpread::of(&summary.ranks),
            ranks: summary.ranks.iter().map(|r| RankEntry::of(r, summary.top)).collect(),
            collectives: CollectivesEntry::of(&summary.collectives),
            warnings: summary.warnings.clone(),
            inputs: None,
        }
    }

    /// The document as a JSON value, the keys of every object in
    /// alphabetical order; print it with `serde_json::to_string_pretty`.
    pub fn to_json(&self) -> Value {
        // Every field serializes (strings, numbers, options, lists): a
        // failure here would be a bug in this module, and null says so.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Summary {
    /// The `--json` document of this summary of `inputs`: their warnings
    /// before the summary's, the files of other runs left out, and the run
    /// summarized.
    pub fn document(&self, inputs: &Resolved) -> SummaryDocument {
        let mut doc = SummaryDocument::of(self);
        doc.warnings = inputs.warnings.iter().chain(&self.warnings).cloned().collect();
        doc.inputs = Some(InputsEntry::of(inputs));
        doc
    }

    /// The document of the summary alone (no input warnings, no
    /// `left_out`, no `run_id`) as JSON; see [`Summary::document`].
    pub fn to_json(&self) -> Value {
        SummaryDocument::of(self).to_json()
    }
}
