//! Per-collective blame: which rank made the others wait, at which
//! collective, after which span.
//!
//! Two halves. [`Collector`] (`collect`) is fed every span of one rank while
//! the summary streams the file and keeps, per collective call, only what
//! matching needs (name, process group, sequence number, arrival, and the
//! span names with the most time on the same thread since the previous
//! collective). [`analyze`] (`matching`) then matches the calls across ranks
//! per process group — by `Seq` where every call of the group has one, else
//! by order — reports the first position where ranks diverge, and
//! attributes wait to the rank that arrived last. This module holds the
//! types both halves share and the results.
//!
//! Which events are calls, per rank: NCCL kernels (their start on the GPU is
//! when the rank arrived; metadata comes from the `record_param_comms` with
//! the same `External id`), else `record_param_comms`, else the outermost
//! collective spans per thread (`nccl:*`, `gloo:*`, `c10d::*`, ranktune's own
//! collective spans).
//!
//! Bounded: at most [`MAX_CALLS`] calls per rank (about 64 bytes each) and
//! a ring of recent spans per thread. It never reads files itself and never
//! judges the straggler (that is `summary`).

mod collect;
mod matching;

pub(crate) use collect::Collector;
pub use matching::analyze;

/// Most collective calls kept per rank.
pub const MAX_CALLS: usize = 1 << 20;
/// How many worst collectives are listed.
pub const WORST: usize = 10;
const NONE: u32 = u32::MAX;
const NO_SEQ: u64 = u64::MAX;

type Ns = i64;
/// How many span names before a collective are kept per call.
const PREV: usize = 3;
type Prev = [(u32, Ns); PREV];

/// Where a rank's collective calls came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallSource {
    /// NCCL kernels (arrival = kernel start on the GPU).
    Kernels,
    /// `record_param_comms` CPU events.
    ParamComms,
    /// Outermost collective spans per thread.
    Spans,
}

/// One collective call of one rank.
#[derive(Debug, Clone, Copy)]
struct Call {
    start: Ns,
    name: u32,
    group: u32,
    members: u32,
    seq: u64,
    prev: Prev,
}

/// One rank's collective calls, in start order (what the summary matches
/// across ranks into [`Collectives`]).
#[derive(Debug, Clone)]
pub struct CollectiveCalls {
    base_ns: i128,
    strings: Vec<String>,
    calls: Vec<Call>,
    source: CallSource,
    dropped: u64,
}

impl Default for CollectiveCalls {
    fn default() -> Self {
        CollectiveCalls {
            base_ns: 0,
            strings: Vec::new(),
            calls: Vec::new(),
            source: CallSource::Spans,
            dropped: 0,
        }
    }
}

impl CollectiveCalls {
    /// Number of calls.
    pub fn len(&self) -> usize {
        self.calls.len()
    }
    /// Whether the rank has no collective calls.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }
    /// Where the calls came from.
    pub fn source(&self) -> CallSource {
        self.source
    }
    /// Calls beyond [`MAX_CALLS`] that were not kept.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
    fn str(&self, id: u32) -> Option<&str> {
        self.strings.get(id as usize).map(String::as_str)
    }
}

/// Per-rank blame.
#[derive(Debug, Clone, PartialEq)]
pub struct RankBlame {
    /// The rank.
    pub rank: u32,
    /// Matched collectives where it arrived last.
    pub last_count: u64,
    /// Sum, over collectives where it arrived last, of its arrival minus
    /// the second-to-last arrival, µs.
    pub wait_caused_us: f64,
    /// Sum, over its matched collectives, of the last arrival minus its
    /// own, µs.
    pub wait_suffered_us: f64,
}

/// One matched collective, for the worst list.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveSkew {
    /// Collective name (`Collective name`, else the span or kernel name).
    pub name: String,
    /// Process group name, when the trace records one.
    pub group: Option<String>,
    /// `Seq` when the group has sequence numbers, else the position in the
    /// group (0-based).
    pub seq: u64,
    /// Last arrival minus first arrival, µs.
    pub skew_us: f64,
    /// The rank that arrived last.
    pub last_rank: u32,
    /// Last arrival minus second-to-last arrival (the wait it caused), µs.
    pub caused_us: f64,
}

/// The first position where the ranks of a group diverge (in the summary's
/// JSON document as it is).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Mismatch {
    /// Process group name, when recorded.
    pub group: Option<String>,
    /// `Seq` (with `by_seq`) or position in the group (0-based).
    pub position: u64,
    /// Whether `position` is a sequence number.
    pub by_seq: bool,
    /// What differs, naming ranks and collectives.
    pub detail: String,
}

/// Where a rank's caused wait concentrates.
#[derive(Debug, Clone, PartialEq)]
pub struct Culprit {
    /// The rank.
    pub rank: u32,
    /// The collective (name) where it caused the most wait.
    pub name: String,
    /// Its process group, when recorded.
    pub group: Option<String>,
    /// How often it arrived last there, and the wait caused there, µs.
    pub count: u64,
    /// Wait caused at that collective, µs.
    pub caused_us: f64,
    /// The span name, among those that ran between the previous collective
    /// and this one on this rank, with the most extra time over the same
    /// span before the same collective on the other ranks (their median),
    /// and that extra time per time it arrived last there, µs. Named only
    /// when it explains at least a quarter of the wait caused there.
    pub span: Option<(String, f64)>,
}

/// The per-collective analysis of a job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collectives {
    /// Collectives matched on every rank of their group.
    pub matched: u64,
    /// Positions where some rank lacks the collective or has a different
    /// one, and (without `Seq`) every later position of that group.
    pub mismatched: u64,
    /// One per rank of the summary, in rank order.
    pub per_rank: Vec<RankBlame>,
    /// The matched collectives with the largest skew (at most ten).
    pub worst: Vec<CollectiveSkew>,
    /// The first divergence of each group that has one.
    pub mismatches: Vec<Mismatch>,
    /// Per rank that caused any wait: where most of it happened.
    pub culprits: Vec<Culprit>,
}

impl Collectives {
    /// The rank that arrived last most often (lowest rank on ties).
    pub fn most_often_last(&self) -> Option<&RankBlame> {
        self.per_rank
            .iter()
            .filter(|r| r.last_count > 0)
            .max_by(|a, b| a.last_count.cmp(&b.last_count).then(b.rank.cmp(&a.rank)))
    }
    /// The rank that caused the most wait (lowest rank on ties).
    pub fn most_wait_caused(&self) -> Option<&RankBlame> {
        self.per_rank
            .iter()
            .filter(|r| r.wait_caused_us > 0.0)
            .max_by(|a, b| a.wait_caused_us.total_cmp(&b.wait_caused_us).then(b.rank.cmp(&a.rank)))
    }
    /// Total wait caused over all ranks, µs.
    pub fn total_caused_us(&self) -> f64 {
        self.per_rank.iter().map(|r| r.wait_caused_us).sum()
    }
}
