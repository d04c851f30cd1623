//! Per-collective blame: which rank made the others wait, at which
//! collective, after which span.
//!
//! Two halves. [`Collector`] is fed every span of one rank while the summary
//! streams the file and keeps, per collective call, only what matching needs
//! (name, process group, sequence number, arrival, and the span names with
//! the most time on the same thread since the previous collective). [`analyze`]
//! then matches the calls across ranks per process group — by `Seq` where
//! every call of the group has one, else by order — reports the first
//! position where ranks diverge, and attributes wait to the rank that
//! arrived last.
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

use super::json;
use super::reader::Event;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Most collective calls kept per rank.
pub const MAX_CALLS: usize = 1 << 20;
/// How many worst collectives are listed.
pub const WORST: usize = 10;
/// Recent non-collective spans kept per thread to find the span before a
/// collective.
const RING: usize = 256;
/// Rounding slack when comparing ends and starts, ns.
const TOL: Ns = 1000;
const NONE: u32 = u32::MAX;
const NO_SEQ: u64 = u64::MAX;

type Ns = i64;
/// How many span names before a collective are kept per call.
const PREV: usize = 3;
type Prev = [(u32, Ns); PREV];
type FxMap<K, V> = ranktune_core::hash::FastMap<K, V>;

/// One collective call as read (ids are the summary's span-name ids or this
/// collector's own strings, see the field docs).
#[derive(Debug, Clone, Copy)]
struct Raw {
    start: Ns,
    end: Ns,
    /// Span name (summary id).
    span_name: u32,
    /// `Collective name` (own string id).
    cname: u32,
    /// `Process Group Name` (own string id).
    group: u32,
    /// `Process Group Ranks` (own string id).
    members: u32,
    seq: u64,
    ext: u64,
    /// The span names with the most time on the same thread since the
    /// previous collective (summary ids, `NONE` when fewer), and that time.
    prev: Prev,
    thread: u32,
}

#[derive(Default)]
struct ThreadRing {
    id: u32,
    /// (start, end, summary name id) of recent non-collective spans.
    spans: VecDeque<(Ns, Ns, u32)>,
    /// Ends of recent collective spans.
    coll_ends: VecDeque<Ns>,
}

/// Collects one rank's collective calls while its file streams by.
#[derive(Default)]
pub(crate) struct Collector {
    threads: FxMap<Vec<u8>, ThreadRing>,
    strings: Vec<String>,
    index: HashMap<String, u32>,
    /// `record_param_comms` calls.
    params: Vec<Raw>,
    /// NCCL kernels.
    kernels: Vec<Raw>,
    /// Other collective spans (CPU side).
    spans: Vec<Raw>,
    dropped: u64,
}

fn arg_text(ev: &Event<'_>, key: &[u8]) -> Option<String> {
    let raw = ev.arg_raw(key)?;
    if raw.first() == Some(&b'"') {
        json::unescape(raw)
    } else {
        std::str::from_utf8(raw).ok().map(str::to_owned)
    }
}

impl Collector {
    fn intern(&mut self, s: Option<String>) -> u32 {
        let Some(s) = s else { return NONE };
        if let Some(&i) = self.index.get(&s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.strings.push(s.clone());
        self.index.insert(s, i);
        i
    }

    /// Feeds one span. `name` is the summary's id of its name, `comm`
    /// whether that name is a collective, `step` whether it is a
    /// `ProfilerStep#` marker; `ev` is the event for `X` spans (args).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn span(
        &mut self,
        ev: Option<&Event<'_>>,
        name_raw: &[u8],
        thread_key: &[u8],
        start: Ns,
        dur: Ns,
        name: u32,
        comm: bool,
        step: bool,
    ) {
        if step {
            return;
        }
        let end = start.saturating_add(dur);
        let next_id = self.threads.len() as u32;
        let t = match self.threads.get_mut(thread_key) {
            Some(t) => t,
            None => self
                .threads
                .entry(thread_key.to_vec())
                .or_insert_with(|| ThreadRing { id: next_id, ..ThreadRing::default() }),
        };
        if !comm {
            if t.spans.len() == RING {
                t.spans.pop_front();
            }
            t.spans.push_back((start, end, name));
            return;
        }
        // The spans before: those that ran entirely between the previous
        // collective on this thread and this one.
        let since = t.coll_ends.iter().filter(|&&e| e <= start.saturating_add(TOL)).max().copied();
        let since = since.unwrap_or(Ns::MIN);
        // Time per span name since the previous collective; keep the
        // PREV names with the most.
        let mut per_name: Vec<(u32, Ns)> = Vec::new();
        for &(s, e, n) in &t.spans {
            if s < since.saturating_sub(TOL) || e > start.saturating_add(TOL) {
                continue;
            }
            let d = e.saturating_sub(s);
            match per_name.iter_mut().find(|p| p.0 == n) {
                Some(p) => p.1 = p.1.saturating_add(d),
                None => per_name.push((n, d)),
            }
        }
        per_name.sort_by_key(|p| std::cmp::Reverse(p.1));
        let mut prev: Prev = [(NONE, 0); PREV];
        for (slot, p) in prev.iter_mut().zip(per_name) {
            *slot = p;
        }
        if t.coll_ends.len() == 16 {
            t.coll_ends.pop_front();
        }
        t.coll_ends.push_back(end);
        let thread = t.id;
        let cat = ev.and_then(|e| e.cat_raw()).unwrap_or(b"");
        let kernel = cat == b"\"kernel\""
            || (name_raw.starts_with(b"\"nccl") && name_raw.windows(6).any(|w| w == b"Kernel"));
        let params = name_raw == b"\"record_param_comms\"";
        if !kernel && !params && cat.starts_with(b"\"gpu_") {
            // Kineto's GPU-side copies of CPU annotations: not calls.
            return;
        }
        let text = |k: &[u8]| ev.and_then(|e| arg_text(e, k));
        let cname = text(b"Collective name");
        let group = text(b"Process Group Name");
        let members = text(b"Process Group Ranks");
        let seq = ev.and_then(|e| e.arg_raw(b"Seq")).and_then(json::parse_u64).unwrap_or(NO_SEQ);
        let ext =
            ev.and_then(|e| e.arg_raw(b"External id")).and_then(json::parse_u64).unwrap_or(NO_SEQ);
        let raw = Raw {
            start,
            end,
            span_name: name,
            cname: self.intern(cname),
            group: self.intern(group),
            members: self.intern(members),
            seq,
            ext,
            prev,
            thread,
        };
        let list = if kernel {
            &mut self.kernels
        } else if params {
            &mut self.params
        } else {
            &mut self.spans
        };
        if list.len() < MAX_CALLS {
            list.push(raw);
        } else {
            self.dropped += 1;
        }
    }

    /// The rank's calls in start order. `names` resolves the summary's
    /// span-name ids; `base_ns` is the file's clock base.
    pub(crate) fn finish(self, names: &dyn Fn(u32) -> String, base_ns: i128) -> CollectiveCalls {
        let Collector { strings, mut params, mut kernels, mut spans, dropped, .. } = self;
        let (mut chosen, source) = if !kernels.is_empty() {
            kernels.sort_by_key(|k| k.start);
            params.sort_by_key(|p| p.start);
            // The CPU call of each kernel: the `record_param_comms` (else the
            // collective span) with the same `External id`.
            let mut by_ext: HashMap<u64, &Raw> = HashMap::new();
            for c in spans.iter().chain(params.iter()).filter(|c| c.ext != NO_SEQ) {
                by_ext.insert(c.ext, c);
            }
            let zip = params.len() == kernels.len();
            for (i, k) in kernels.iter_mut().enumerate() {
                let p = by_ext.get(&k.ext).copied().or(if zip { params.get(i) } else { None });
                if let Some(p) = p {
                    fill(k, p);
                }
            }
            (kernels, Source::Kernels)
        } else if !params.is_empty() {
            (params, Source::ParamComms)
        } else {
            // Outermost collective span per thread: c10d::allreduce_ holds
            // nccl:all_reduce of the same call.
            spans.sort_by_key(|s| (s.thread, s.start, std::cmp::Reverse(s.end)));
            let mut kept: Vec<Raw> = Vec::with_capacity(spans.len());
            for s in spans {
                match kept.last() {
                    Some(k)
                        if k.thread == s.thread
                            && s.start
                                < k.end.saturating_sub(TOL.min(k.end.saturating_sub(k.start))) => {}
                    _ => kept.push(s),
                }
            }
            (kept, Source::Spans)
        };
        chosen.sort_by_key(|c| c.start);
        let mut out = CollectiveCalls {
            base_ns,
            strings,
            calls: Vec::with_capacity(chosen.len()),
            source,
            dropped,
        };
        let mut ids: HashMap<u32, u32> = HashMap::new();
        let mut own = |out: &mut CollectiveCalls, id: u32| -> u32 {
            if id == NONE {
                return NONE;
            }
            *ids.entry(id).or_insert_with(|| {
                out.strings.push(names(id));
                (out.strings.len() - 1) as u32
            })
        };
        for c in chosen {
            let name = if c.cname != NONE { c.cname } else { own(&mut out, c.span_name) };
            let mut prev = c.prev;
            for p in &mut prev {
                p.0 = own(&mut out, p.0);
            }
            out.calls.push(Call {
                start: c.start,
                name,
                group: c.group,
                members: c.members,
                seq: c.seq,
                prev,
            });
        }
        out
    }
}

/// Takes what a kernel lacks from its `record_param_comms`.
fn fill(k: &mut Raw, p: &Raw) {
    if k.cname == NONE {
        k.cname = p.cname;
    }
    if k.group == NONE {
        k.group = p.group;
    }
    if k.members == NONE {
        k.members = p.members;
    }
    if k.seq == NO_SEQ {
        k.seq = p.seq;
    }
    // The CPU thread shows what the rank did before it launched the
    // collective; the kernel stream only shows other kernels.
    if p.prev.iter().any(|x| x.0 != NONE) {
        k.prev = p.prev;
    }
}

/// Where a rank's collective calls came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
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
    source: Source,
    dropped: u64,
}

impl Default for CollectiveCalls {
    fn default() -> Self {
        CollectiveCalls {
            base_ns: 0,
            strings: Vec::new(),
            calls: Vec::new(),
            source: Source::Spans,
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
    pub fn source(&self) -> Source {
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

/// Comparable name: `c10d::allreduce_`, `nccl:all_reduce`, `allreduce` and
/// `ncclDevKernel_AllReduce_Sum_f32_RING_LL(…)` are all `allreduce`.
fn normalize(name: &str) -> String {
    let n = name.to_ascii_lowercase();
    let n = n.split('(').next().unwrap_or("");
    let n = n
        .strip_prefix("nccl:")
        .or_else(|| n.strip_prefix("gloo:"))
        .or_else(|| n.strip_prefix("c10d::"))
        .unwrap_or(n);
    let n = match n.strip_prefix("nccldevkernel_").or_else(|| n.strip_prefix("ncclkernel_")) {
        Some(rest) => rest.split('_').next().unwrap_or(rest),
        None => n,
    };
    n.chars().filter(|c| *c != '_').collect()
}

/// Display name: kernel signatures lose their parameter list.
fn display(name: &str) -> String {
    match name.find('(') {
        Some(i) if name.starts_with("nccl") => name[..i].to_string(),
        _ => name.to_string(),
    }
}

/// `"[0, 1, 2]"` (a string or an array) to ranks.
fn parse_ranks(s: &str) -> Option<Vec<u32>> {
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    if s.trim().is_empty() {
        return None;
    }
    s.split(',').map(|x| x.trim().parse::<u32>().ok()).collect()
}

fn us(ns: Ns) -> f64 {
    ns as f64 / 1000.0
}

struct Member<'a> {
    rank: u32,
    idx: usize,
    calls: Vec<(u64, &'a Call)>,
    offset: Ns,
}

#[derive(Default)]
struct CulpritAcc {
    count: u64,
    caused: Ns,
    /// prev span name → (excess sum ns, count)
    spans: BTreeMap<String, (i128, u64)>,
}

/// Matches collectives across ranks and attributes wait.
/// `ranks` is `(rank, calls)` in rank order.
pub fn analyze(ranks: &[(u32, &CollectiveCalls)]) -> Collectives {
    let mut out = Collectives {
        per_rank: ranks
            .iter()
            .map(|(r, _)| RankBlame {
                rank: *r,
                last_count: 0,
                wait_caused_us: 0.0,
                wait_suffered_us: 0.0,
            })
            .collect(),
        ..Collectives::default()
    };
    let with_calls: Vec<usize> = (0..ranks.len()).filter(|&i| !ranks[i].1.is_empty()).collect();
    if with_calls.is_empty() {
        return out;
    }
    let min_base = with_calls.iter().map(|&i| ranks[i].1.base_ns).min().unwrap_or(0);
    let offset =
        |i: usize| -> Ns { Ns::try_from(ranks[i].1.base_ns - min_base).unwrap_or(Ns::MAX / 4) };
    // Groups by name (None: not recorded), with each rank's calls.
    let mut groups: BTreeMap<Option<String>, Vec<(usize, Vec<&Call>)>> = BTreeMap::new();
    for &i in &with_calls {
        let cc = ranks[i].1;
        let mut per: BTreeMap<Option<String>, Vec<&Call>> = BTreeMap::new();
        for c in &cc.calls {
            per.entry(cc.str(c.group).map(str::to_owned)).or_default().push(c);
        }
        for (g, calls) in per {
            groups.entry(g).or_default().push((i, calls));
        }
    }
    let mut caused = vec![0 as Ns; ranks.len()];
    let mut suffered = vec![0 as Ns; ranks.len()];
    let mut last_count = vec![0u64; ranks.len()];
    let mut worst: Vec<CollectiveSkew> = Vec::new();
    let mut culprits: BTreeMap<(usize, String, Option<String>), CulpritAcc> = BTreeMap::new();
    for (group, present) in &groups {
        // Members: the recorded group ranks we have traces of, else the
        // ranks that have calls in the group.
        let listed = present.iter().find_map(|(i, calls)| {
            calls.iter().find_map(|c| ranks[*i].1.str(c.members)).and_then(parse_ranks)
        });
        let mut member_idx: Vec<usize> = match listed {
            Some(l) => (0..ranks.len()).filter(|&i| l.contains(&ranks[i].0)).collect(),
            None => present.iter().map(|(i, _)| *i).collect(),
        };
        if member_idx.is_empty() {
            member_idx = present.iter().map(|(i, _)| *i).collect();
        }
        let by_seq = present.iter().all(|(_, calls)| calls.iter().all(|c| c.seq != NO_SEQ));
        let mut members: Vec<Member<'_>> = member_idx
            .iter()
            .map(|&i| {
                let calls: Vec<&Call> = present
                    .iter()
                    .find(|(j, _)| *j == i)
                    .map(|(_, c)| c.clone())
                    .unwrap_or_default();
                let mut keyed: Vec<(u64, &Call)> = if by_seq {
                    calls.into_iter().map(|c| (c.seq, c)).collect()
                } else {
                    calls.into_iter().enumerate().map(|(n, c)| (n as u64, c)).collect()
                };
                keyed.sort_by_key(|(k, c)| (*k, c.start));
                Member { rank: ranks[i].0, idx: i, calls: keyed, offset: offset(i) }
            })
            .collect();
        members.sort_by_key(|m| m.rank);
        if members.len() < 2 {
            continue;
        }
        // Positions: with Seq, the window every member captured (profiler
        // windows start and stop at different collectives on each rank);
        // without, 0 .. the longest list.
        let (lo, hi) = if by_seq {
            let lo = members.iter().map(|m| m.calls.first().map_or(u64::MAX, |c| c.0)).max();
            let hi = members.iter().map(|m| m.calls.last().map_or(0, |c| c.0)).min();
            (lo.unwrap_or(0), hi.unwrap_or(0))
        } else {
            (0, members.iter().map(|m| m.calls.len() as u64).max().unwrap_or(0).saturating_sub(1))
        };
        let mut keys: Vec<u64> = members
            .iter()
            .flat_map(|m| m.calls.iter().map(|c| c.0))
            .filter(|k| *k >= lo && *k <= hi)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        if members.iter().any(|m| m.calls.is_empty()) {
            let missing: Vec<String> =
                members.iter().filter(|m| m.calls.is_empty()).map(|m| m.rank.to_string()).collect();
            out.mismatched += members.iter().map(|m| m.calls.len() as u64).max().unwrap_or(0);
            out.mismatches.push(Mismatch {
                group: group.clone(),
                position: 0,
                by_seq,
                detail: format!(
                    "rank{} {} no collectives in this group; the others have {}",
                    if missing.len() == 1 { "" } else { "s" },
                    missing.join(", "),
                    members.iter().map(|m| m.calls.len()).max().unwrap_or(0)
                ),
            });
            continue;
        }
        let mut cursor = vec![0usize; members.len()];
        let mut diverged = false;
        for &key in &keys {
            let mut at: Vec<Option<&Call>> = Vec::with_capacity(members.len());
            for (m, cur) in members.iter().zip(cursor.iter_mut()) {
                while *cur < m.calls.len() && m.calls[*cur].0 < key {
                    *cur += 1;
                }
                if *cur < m.calls.len() && m.calls[*cur].0 == key {
                    at.push(Some(m.calls[*cur].1));
                    *cur += 1;
                } else {
                    at.push(None);
                }
            }
            if diverged {
                out.mismatched += 1;
                continue;
            }
            let name_of = |mi: usize, c: &Call| {
                ranks[members[mi].idx].1.str(c.name).unwrap_or("?").to_string()
            };
            let norms: Vec<Option<String>> = at
                .iter()
                .enumerate()
                .map(|(mi, c)| c.map(|c| normalize(&name_of(mi, c))))
                .collect();
            let first = norms.iter().flatten().next().cloned().unwrap_or_default();
            let same = norms.iter().all(|n| n.as_deref() == Some(first.as_str()));
            if !same {
                diverged = true;
                out.mismatched += 1;
                out.mismatches.push(Mismatch {
                    group: group.clone(),
                    position: key,
                    by_seq,
                    detail: describe(&members, &at, &name_of, by_seq),
                });
                continue;
            }
            out.matched += 1;
            // Arrivals on the shared clock.
            let mut arr: Vec<(Ns, usize)> = at
                .iter()
                .enumerate()
                .filter_map(|(mi, c)| c.map(|c| (c.start.saturating_add(members[mi].offset), mi)))
                .collect();
            arr.sort_by_key(|&(t, mi)| (t, std::cmp::Reverse(members[mi].rank)));
            let (t_last, mi_last) = arr[arr.len() - 1];
            let t_second = arr[arr.len() - 2].0;
            let t_first = arr[0].0;
            let li = members[mi_last].idx;
            let delay = t_last.saturating_sub(t_second);
            caused[li] = caused[li].saturating_add(delay);
            last_count[li] += 1;
            for &(t, mi) in &arr {
                let w = &mut suffered[members[mi].idx];
                *w = w.saturating_add(t_last.saturating_sub(t));
            }
            let Some(last_call) = at[mi_last] else { continue };
            let name = display(&name_of(mi_last, last_call));
            worst.push(CollectiveSkew {
                name: name.clone(),
                group: group.clone(),
                seq: key,
                skew_us: us(t_last.saturating_sub(t_first)),
                last_rank: members[mi_last].rank,
                caused_us: us(delay),
            });
            if worst.len() > 4 * WORST {
                trim(&mut worst);
            }
            if delay > 0 {
                let acc = culprits.entry((li, name, group.clone())).or_default();
                acc.count += 1;
                acc.caused = acc.caused.saturating_add(delay);
                // Of the span names with the most time before it on the last
                // rank, the one with the most extra time over the same name
                // before the same collective on the other ranks (0 where they
                // lack it).
                let mut best: Option<(&str, Ns)> = None;
                for &(pn, pd) in last_call.prev.iter().filter(|p| p.0 != NONE) {
                    let Some(pname) = ranks[li].1.str(pn) else { continue };
                    let mut others: Vec<Ns> = at
                        .iter()
                        .enumerate()
                        .filter(|(mi, _)| *mi != mi_last)
                        .filter_map(|(mi, c)| {
                            let cc = ranks[members[mi].idx].1;
                            c.map(|c| {
                                c.prev
                                    .iter()
                                    .find(|o| o.0 != NONE && cc.str(o.0) == Some(pname))
                                    .map_or(0, |o| o.1)
                            })
                        })
                        .collect();
                    others.sort_unstable();
                    let med = others.get(others.len() / 2).copied().unwrap_or(0);
                    let excess = pd.saturating_sub(med);
                    if best.is_none_or(|b| excess > b.1) {
                        best = Some((pname, excess));
                    }
                }
                if let Some((pname, excess)) = best {
                    let e = acc.spans.entry(pname.to_string()).or_default();
                    e.0 += i128::from(excess);
                    e.1 += 1;
                }
            }
        }
    }
    trim(&mut worst);
    out.worst = worst;
    for (i, r) in out.per_rank.iter_mut().enumerate() {
        r.last_count = last_count[i];
        r.wait_caused_us = us(caused[i]);
        r.wait_suffered_us = us(suffered[i]);
    }
    // Per rank, the collective where it caused the most wait.
    let mut best: BTreeMap<usize, Culprit> = BTreeMap::new();
    for ((li, name, group), acc) in culprits {
        if best.get(&li).is_some_and(|b| b.caused_us >= us(acc.caused)) {
            continue;
        }
        // Named only when it explains at least a quarter of the delay.
        let per_time = us(acc.caused) / acc.count.max(1) as f64;
        let span = acc
            .spans
            .iter()
            .max_by(|a, b| a.1 .0.cmp(&b.1 .0))
            .map(|(n, (sum, count))| (n.clone(), *sum as f64 / 1000.0 / (*count).max(1) as f64))
            .filter(|(_, extra)| *extra >= 0.25 * per_time && *extra > 0.0);
        best.insert(
            li,
            Culprit {
                rank: ranks[li].0,
                name,
                group,
                count: acc.count,
                caused_us: us(acc.caused),
                span,
            },
        );
    }
    out.culprits = best.into_values().collect();
    out
}

fn trim(w: &mut Vec<CollectiveSkew>) {
    w.sort_by(|a, b| {
        b.skew_us.total_cmp(&a.skew_us).then(a.group.cmp(&b.group)).then(a.seq.cmp(&b.seq))
    });
    w.truncate(WORST);
}

/// "rank 2 has `allgather` where ranks 0, 1, 3 have `reduce_scatter`", or
/// "rank 2 has no collective at position 5 (the others: `allgather`)".
fn describe(
    members: &[Member<'_>],
    at: &[Option<&Call>],
    name_of: &dyn Fn(usize, &Call) -> String,
    by_seq: bool,
) -> String {
    // Group ranks by what they have.
    let mut by_what: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (mi, c) in at.iter().enumerate() {
        let what = match c {
            Some(c) => format!("`{}`", display(&name_of(mi, c))),
            None => "nothing".to_string(),
        };
        by_what.entry(what).or_default().push(members[mi].rank);
    }
    // The majority is "the others".
    let mut kinds: Vec<(String, Vec<u32>)> = by_what.into_iter().collect();
    kinds.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    let list = |v: &[u32]| {
        let s: Vec<String> = v.iter().map(u32::to_string).collect();
        format!("rank{} {}", if v.len() == 1 { "" } else { "s" }, s.join(", "))
    };
    let (major, major_ranks) = &kinds[0];
    let minority: Vec<String> = kinds[1..]
        .iter()
        .map(|(what, rs)| {
            let verb = if rs.len() == 1 { "has" } else { "have" };
            format!("{} {verb} {what}", list(rs))
        })
        .collect();
    let counts: Vec<String> =
        members.iter().map(|m| format!("{}: {}", m.rank, m.calls.len())).collect();
    format!(
        "{} where {} {} {major}{} (collectives per rank: {})",
        minority.join("; "),
        list(major_ranks),
        if major_ranks.len() == 1 { "has" } else { "have" },
        if by_seq { "" } else { " (matched by order: no Seq in this group)" },
        counts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalize_across_sources() {
        for n in [
            "c10d::allreduce_",
            "nccl:all_reduce",
            "allreduce",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
            "gloo:all_reduce",
        ] {
            assert_eq!(normalize(n), "allreduce", "{n}");
        }
        assert_ne!(normalize("nccl:all_gather"), normalize("nccl:all_reduce"));
    }

    #[test]
    fn group_ranks_parse_from_text() {
        assert_eq!(parse_ranks("[0, 1, 2, 3]"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_ranks("[]"), None);
        assert_eq!(parse_ranks("[a]"), None);
    }

    fn calls(starts: &[(i64, &str)]) -> CollectiveCalls {
        let mut cc = CollectiveCalls::default();
        for (i, (s, n)) in starts.iter().enumerate() {
            cc.strings.push((*n).to_string());
            cc.calls.push(Call {
                start: *s * 1000,
                name: i as u32,
                group: NONE,
                members: NONE,
                seq: NO_SEQ,
                prev: [(NONE, 0); PREV],
            });
        }
        cc
    }

    /// Rank 1 is 100 µs late to one collective; rank 2 is 5 µs late to two:
    /// rank 2 is last more often, rank 1 caused more wait.
    #[test]
    fn wait_caused_is_time_not_counts() {
        let r0 = calls(&[(0, "a"), (1000, "b"), (2000, "c")]);
        let r1 = calls(&[(100, "a"), (1000, "b"), (2000, "c")]);
        let r2 = calls(&[(0, "a"), (1005, "b"), (2005, "c")]);
        let c = analyze(&[(0, &r0), (1, &r1), (2, &r2)]);
        assert_eq!((c.matched, c.mismatched), (3, 0));
        assert_eq!(c.most_often_last().map(|r| r.rank), Some(2));
        assert_eq!(c.most_wait_caused().map(|r| r.rank), Some(1));
        assert_eq!(c.per_rank[1].wait_caused_us, 100.0);
        assert_eq!(c.per_rank[2].wait_caused_us, 10.0);
        // Rank 0 waited 100 + 5 + 5 µs.
        assert_eq!(c.per_rank[0].wait_suffered_us, 110.0);
        assert_eq!(c.worst[0].last_rank, 1);
        assert_eq!(c.worst[0].skew_us, 100.0);
    }

    #[test]
    fn a_different_collective_is_reported_at_its_position() {
        let r0 = calls(&[(0, "allreduce"), (10, "allgather"), (20, "allreduce")]);
        let r1 = calls(&[(0, "allreduce"), (10, "allreduce")]);
        let c = analyze(&[(0, &r0), (1, &r1)]);
        assert_eq!((c.matched, c.mismatched), (1, 2));
        let m = &c.mismatches[0];
        assert_eq!(m.position, 1);
        assert!(
            m.detail.contains("`allgather`") && m.detail.contains("`allreduce`"),
            "{}",
            m.detail
        );
    }
}
