//! Collecting one rank's collective calls while its file streams by:
//! [`Collector`] keeps, per call, only what matching needs, and chooses at
//! the end which events are the rank's calls (kernels, else
//! `record_param_comms`, else the outermost collective spans).
//!
//! It sees one rank only; matching across ranks is `matching`'s.

use super::{Call, CallSource, CollectiveCalls, Ns, Prev, MAX_CALLS, NONE, NO_SEQ, PREV};
use crate::json;
use crate::reader::Event;
use std::collections::{HashMap, VecDeque};

/// Recent non-collective spans kept per thread to find the span before a
/// collective.
const RING: usize = 256;
/// Rounding slack when comparing ends and starts, ns.
const TOL: Ns = 1000;

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
            (kernels, CallSource::Kernels)
        } else if !params.is_empty() {
            (params, CallSource::ParamComms)
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
            (kept, CallSource::Spans)
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
