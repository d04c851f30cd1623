//! Trace analysis: reading per-rank Chrome/Kineto traces as a stream,
//! merging the ranks onto one timeline, and summarizing them (step times,
//! top spans, the slow rank).
//!
//! ```
//! use ranktune_trace_analyze::{merge, resolve, summarize, MergeOptions, SummaryOptions};
//!
//! // Two ranks of two steps each; rank 1's second step is slow.
//! let dir = tempfile::tempdir()?;
//! for (rank, slow) in [(0, 500), (1, 900)] {
//!     let trace = format!(
//!         r#"{{"distributedInfo": {{"rank": {rank}, "world_size": 2}}, "traceEvents": [
//! {{"ph":"X","name":"ProfilerStep#0","pid":1,"tid":1,"ts":0,"dur":500}},
//! {{"ph":"X","name":"gemm","pid":1,"tid":1,"ts":10,"dur":400}},
//! {{"ph":"X","name":"ProfilerStep#1","pid":1,"tid":1,"ts":500,"dur":{slow}}}
//! ]}}"#
//!     );
//!     std::fs::write(dir.path().join(format!("trace_{rank}.json")), trace)?;
//! }
//!
//! let found = resolve(&[dir.path().display().to_string()], &[])?;
//! assert_eq!(found.inputs.len(), 2);
//!
//! let out = dir.path().join("merged.json");
//! let report = merge(&found.inputs, &out, &MergeOptions::default())?;
//! assert_eq!((report.ranks.len(), report.events), (2, 6));
//! assert!(out.exists());
//!
//! let summary = summarize(&found.inputs, &SummaryOptions::default())?;
//! assert_eq!(summary.ranks.len(), 2);
//! assert_eq!(summary.straggler.as_ref().map(|s| s.rank), Some(1));
//! println!("{}", summary.to_text()); // the verdict, a table of ranks, top spans
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Owns: the streaming reader ([`TraceReader`], over a private byte
//! scanner), input discovery and rank detection ([`resolve`]), the streaming
//! merge ([`merge`], to Chrome JSON or Perfetto's protobuf format), the
//! summary and straggler verdict ([`summarize`]), the matching of
//! collectives across ranks and who made whom wait ([`Collectives`]), the
//! summary's JSON document ([`SummaryDocument`]) and its HTML report
//! ([`Summary::to_html`]). It must never load a whole trace into memory,
//! never evaluate anything read from a file, and never panic on bad input:
//! bad events are skipped and reported as warnings naming the file. It never
//! records traces (that is `ranktune-trace`).
//!
//! Modules (all private; what users need is re-exported here) depend one
//! way, and all may use `error`:
//!
//! ```text
//! html ─▶ summary ─▶ inputs ─▶ reader ─▶ json
//!           │
//!           └──▶ collectives ─▶ reader, json
//!         merge ───▶ inputs, timefmt, naming, perfetto
//!                    perfetto ─▶ reader, json, timefmt, naming
//! document ─▶ summary, inputs, collectives
//! ```
//!
//! `merge` and `summary` also use `reader` and `json` directly.

mod collectives;
mod document;
mod error;
mod html;
mod inputs;
mod json;
mod merge;
mod naming;
mod perfetto;
mod reader;
mod summary;
mod timefmt;

pub use collectives::{
    CallSource, CollectiveCalls, CollectiveSkew, Collectives, Culprit, Mismatch, RankBlame,
    MAX_CALLS,
};
pub use document::{
    BlameEntry, CollectivesEntry, CulpritEntry, InputsEntry, RankEntry, SkewEntry, SpanEntry,
    SpanExtra, StepSpread, StragglerEntry, SummaryDocument, SUMMARY_SCHEMA,
};
pub use error::AnalyzeError;
pub use inputs::{
    parse_rank_arg, rank_from_name, resolve, resolve_with, RankEvidence, RankedInput,
    ResolveOptions, Resolved,
};
pub use merge::{
    merge, merge_to, Align, MergeOptions, MergeReport, OutputFormat, RankMerge,
    GROUP as MERGE_GROUP,
};
pub use perfetto::decode as decode_pftrace;
/// Perfetto's protobuf messages as `trace merge -o x.pftrace` writes them
/// (hand-declared with the official field numbers), and [`decode_pftrace`]
/// to read such a file back.
pub use perfetto::proto as perfetto_proto;
pub use reader::{Event, Form, ReadStats, SkipReason, TraceReader, MAX_ITEM};
pub use summary::{
    judge, judge_with, summarize, Method, RankSummary, SpanStat, Step, Straggler, Summary,
    SummaryOptions, MAX_COLLECTIVE_INTERVALS, STRAGGLER_THRESHOLD,
};
