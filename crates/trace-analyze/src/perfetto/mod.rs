//! Perfetto's native protobuf output of `trace merge` (`.pftrace`): turns
//! one rank's Chrome events into a stream of `TracePacket`s.
//!
//! Layout of the output: each rank is one packet sequence (its own
//! `trusted_packet_sequence_id`, so interned strings never mix ranks, and
//! the merge may interleave chunks of different ranks as long as each
//! rank's chunks keep their order: see [`RankEncoder`]); each
//! of its processes is a process track (the merged pid and the name the JSON
//! merge gives it), each thread a thread track under it (a synthetic tid
//! unique in the whole trace, `pid * 1000 + n`; its name says the original
//! tid). `X` and `B`/`E` become slice begin/end pairs, `i`/`I` instants on
//! the thread (scope `t`) or process track, `C` one counter track per series,
//! `s`/`t`/`f` flow ids on the slice that encloses them, `b`/`e`/`n` async
//! slices on a track per (category, id) under the process. Names, categories
//! and argument names are interned; `args` become debug annotations.
//! Timestamps are nanoseconds on the merged timeline, the same instants as
//! the JSON merge's `ts` (microseconds) times 1000.
//!
//! Slices: Perfetto has no complete (duration) event, and an end event
//! closes the innermost open slice of its track, so ends must come in
//! order. Each thread keeps a small reorder window of pending slices
//! (released in start order, longer first) and a stack of open ones whose
//! end is written when the next released slice starts after it. Slices that
//! arrive later than the window or overlap their parent without nesting go
//! to an "overlapping" track beside the thread, and are counted.
//!
//! Owns: this conversion and its per-rank state, bounded (window per thread,
//! capped intern tables). It never holds more than that, never writes a
//! file (the merge does), and never panics on input.

pub mod proto;

use super::inputs::RankedInput;
use super::json::{self, Flags};
use super::naming;
use super::reader::{Event, TraceReader};
use super::timefmt::{self, UNITS_PER_NS};
use super::AnalyzeError;
use prost::Message;
use proto::{
    AnnotationName, AnnotationValue, CounterDescriptor, DebugAnnotation, InternedData,
    InternedString, NameField, ProcessDescriptor, ThreadDescriptor, TracePacket, TrackDescriptor,
    TrackEvent,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Slices a thread holds back to put them in start order.
const WINDOW: usize = 1024;
/// Most strings interned per kind and rank; later ones are written inline.
const MAX_INTERNED: u64 = 1 << 17;
/// Most async and counter tracks per rank; events of further ones are skipped.
const MAX_EXTRA_TRACKS: usize = 1 << 16;

/// Decodes a whole `.pftrace` (a `Trace` message), for tests and tools.
pub fn decode(bytes: &[u8]) -> Result<proto::Trace, AnalyzeError> {
    proto::Trace::decode(bytes)
        .map_err(|e| AnalyzeError::NotATrace { path: "protobuf trace".into(), why: e.to_string() })
}

/// What one rank contributed, for the merge report.
pub struct RankOut {
    /// Events converted.
    pub events: u64,
    /// Original pid → merged pid.
    pub pids: Vec<(String, u64)>,
    /// Input bytes read.
    pub bytes: u64,
    /// Warnings naming the file.
    pub warnings: Vec<String>,
}

/// Track uuid kinds (bits 34..40 of a uuid).
#[derive(Clone, Copy)]
enum TrackKind {
    Process = 1,
    Thread = 2,
    Overlap = 3,
    Counter = 4,
    Async = 5,
}

fn uuid(rank: u32, kind: TrackKind, idx: usize) -> u64 {
    ((u64::from(rank) + 1) << 40) | ((kind as u64) << 34) | (idx as u64 & ((1 << 34) - 1))
}

struct Process {
    raw: Vec<u8>,
    pid: u64,
    name: Option<String>,
    threads: u64,
}

#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Kind {
    /// `E`: closes before anything else starting at the same instant.
    End = 0,
    /// `X` (with an end) and `B` (without).
    Slice = 1,
    /// A flow binding to the enclosing slice.
    Flow = 2,
}

struct Pending {
    key: (i64, Kind, Reverse<i64>, u64),
    end: Option<i64>,
    ev: TrackEvent,
    flow: Option<(u64, bool)>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(&o.key)
    }
}

struct Open {
    /// End time; `None` for a `B` slice that waits for its `E`.
    end: Option<i64>,
    flows: Vec<u64>,
    terminating: Vec<u64>,
}

struct Thread {
    uuid: u64,
    overlap: Option<u64>,
    idx: usize,
    heap: BinaryHeap<Reverse<Pending>>,
    stack: Vec<Open>,
    last_start: i64,
}

/// Per-rank conversion state.
struct Conv {
    rank: u32,
    seq: u32,
    shift: i128,
    stride: u64,
    out: Vec<u8>,
    first: bool,
    interned: InternedData,
    names: HashMap<Vec<u8>, u64>,
    cats: HashMap<Vec<u8>, u64>,
    keys: HashMap<Vec<u8>, u64>,
    procs: Vec<Process>,
    threads: Vec<Thread>,
    thread_ix: HashMap<(usize, Vec<u8>), usize>,
    extra: HashMap<(usize, u8, Vec<u8>), u64>,
    seqno: u64,
    events: u64,
    late: u64,
    overlapping: u64,
    before_zero: u64,
    unmatched_ends: u64,
    dropped: HashMap<u8, u64>,
    flags: Flags,
}

/// A chunk ends after the event that brings it to at least this many bytes.
const FLUSH_AT: usize = 1 << 20;

/// One rank's conversion, pulled a chunk at a time: [`RankEncoder::open`],
/// then [`RankEncoder::packets`] until it returns false, then
/// [`RankEncoder::finish`]. The chunk boundaries depend only on this rank's
/// own events, and every chunk holds whole packets of this rank's one
/// sequence, so chunks of different ranks may be interleaved in the output.
pub struct RankEncoder {
    reader: TraceReader,
    c: Conv,
    last_proc: usize,
    ended: bool,
    path: std::path::PathBuf,
}

impl RankEncoder {
    /// Opens `input` (reading with a `read_buf`-byte window), shifting its
    /// times by `shift` (fixed point, onto the merged timeline).
    pub fn open(
        input: &RankedInput,
        shift: i128,
        stride: u64,
        read_buf: usize,
    ) -> Result<Self, AnalyzeError> {
        let reader = TraceReader::open_with_buffer(&input.path, read_buf)?;
        let c = Conv {
            rank: input.rank,
            seq: input.rank.saturating_add(1),
            shift,
            stride,
            out: Vec::new(),
            first: true,
            interned: InternedData::default(),
            names: HashMap::new(),
            cats: HashMap::new(),
            keys: HashMap::new(),
            procs: Vec::new(),
            threads: Vec::new(),
            thread_ix: HashMap::new(),
            extra: HashMap::new(),
            seqno: 0,
            events: 0,
            late: 0,
            overlapping: 0,
            before_zero: 0,
            unmatched_ends: 0,
            dropped: HashMap::new(),
            flags: Flags::default(),
        };
        Ok(RankEncoder { reader, c, last_proc: usize::MAX, ended: false, path: input.path.clone() })
    }

    /// Appends the rank's next chunk of packets to `out` (about 1 MiB: it
    /// ends after the event that reaches [`FLUSH_AT`]); returns false once
    /// the rank has ended (then `out` holds its last packets, maybe none).
    pub fn packets(&mut self, out: &mut Vec<u8>) -> Result<bool, AnalyzeError> {
        if self.ended {
            return Ok(false);
        }
        std::mem::swap(&mut self.c.out, out);
        let r = self.fill();
        std::mem::swap(&mut self.c.out, out);
        r
    }

    fn fill(&mut self) -> Result<bool, AnalyzeError> {
        let c = &mut self.c;
        while c.out.len() < FLUSH_AT {
            let Some(ev) = self.reader.next_event()? else {
                for t in 0..c.threads.len() {
                    c.drain_thread(t, 0);
                }
                self.ended = true;
                return Ok(false);
            };
            let pid_raw = ev.pid_raw();
            let pi = if self.last_proc < c.procs.len() && c.procs[self.last_proc].raw == pid_raw {
                self.last_proc
            } else {
                match c.procs.iter().position(|p| p.raw == pid_raw) {
                    Some(p) => p,
                    None => c.add_process(pid_raw),
                }
            };
            self.last_proc = pi;
            c.event(pi, &ev);
        }
        Ok(true)
    }

    /// What the rank contributed (call after the last chunk).
    pub fn finish(self) -> RankOut {
        let (c, reader) = (self.c, self.reader);
        let mut warnings = reader.warnings();
        let file = self.path.display();
        let mut note = |n: u64, what: &str| {
            if n > 0 {
                warnings.push(format!("{file}: {n} {what}"));
            }
        };
        note(
            c.late,
            "slices arrived too far out of start order to nest; they are on the thread's \"overlapping\" track in the .pftrace",
        );
        note(
            c.overlapping,
            "slices overlap their parent without nesting; they are on the thread's \"overlapping\" track in the .pftrace",
        );
        note(
            c.before_zero,
            "events start before the merged trace's base time and were left out of the .pftrace",
        );
        note(
            c.unmatched_ends,
            "\"E\" events without a matching \"B\" were left out of the .pftrace",
        );
        let mut dropped: Vec<_> = c.dropped.iter().collect();
        dropped.sort();
        for (ph, n) in dropped {
            warnings.push(format!(
                "{file}: {n} events of phase {:?} are not written to the .pftrace (the .json merge keeps them)",
                char::from(*ph)
            ));
        }
        RankOut {
            events: c.events,
            pids: c
                .procs
                .iter()
                .map(|p| (String::from_utf8_lossy(&p.raw).into_owned(), p.pid))
                .collect(),
            bytes: reader.stats().bytes,
            warnings,
        }
    }
}

impl Conv {
    fn add_process(&mut self, raw: &[u8]) -> usize {
        let k = self.procs.len() as u64;
        let pid = naming::merged_pid(self.rank, k, self.stride);
        self.procs.push(Process { raw: raw.to_vec(), pid, name: None, threads: 0 });
        let i = self.procs.len() - 1;
        self.describe_process(i);
        i
    }

    fn original(raw: &[u8]) -> String {
        json::unescape(raw).unwrap_or_else(|| String::from_utf8_lossy(raw).into_owned())
    }

    fn describe_process(&mut self, i: usize) {
        let p = &self.procs[i];
        let label = naming::process_label(self.rank, &Self::original(&p.raw), p.name.as_deref());
        let desc = TrackDescriptor {
            uuid: Some(uuid(self.rank, TrackKind::Process, i)),
            name: Some(label.clone()),
            process: Some(ProcessDescriptor {
                pid: i32::try_from(p.pid).ok(),
                legacy_sort_index: None,
                process_name: Some(label),
            }),
            ..TrackDescriptor::default()
        };
        self.packet(None, None, Some(desc));
    }

    fn thread(&mut self, pi: usize, tid_raw: &[u8]) -> usize {
        if let Some(&t) = self.thread_ix.get(&(pi, tid_raw.to_vec())) {
            return t;
        }
        let idx = self.threads.len();
        self.procs[pi].threads += 1;
        self.threads.push(Thread {
            uuid: uuid(self.rank, TrackKind::Thread, idx),
            overlap: None,
            idx: self.procs[pi].threads as usize,
            heap: BinaryHeap::new(),
            stack: Vec::new(),
            last_start: i64::MIN,
        });
        self.thread_ix.insert((pi, tid_raw.to_vec()), idx);
        self.describe_thread(pi, idx, tid_raw, None);
        idx
    }

    fn describe_thread(&mut self, pi: usize, t: usize, tid_raw: &[u8], name: Option<String>) {
        let pid = self.procs[pi].pid;
        let orig = Self::original(tid_raw);
        let name = match name {
            Some(n) if !n.is_empty() => format!("{n} (tid {orig})"),
            _ => format!("tid {orig}"),
        };
        let tid = (self.threads[t].idx < 1000)
            .then(|| pid.checked_mul(1000)?.checked_add(self.threads[t].idx as u64))
            .flatten()
            .and_then(|t| i32::try_from(t).ok());
        let parent = uuid(self.rank, TrackKind::Process, pi);
        let desc = TrackDescriptor {
            uuid: Some(self.threads[t].uuid),
            name: Some(name.clone()),
            parent_uuid: Some(parent),
            thread: tid.map(|tid| ThreadDescriptor {
                pid: i32::try_from(pid).ok(),
                tid: Some(tid),
                legacy_sort_index: None,
                thread_name: Some(name),
            }),
            ..TrackDescriptor::default()
        };
        self.packet(None, None, Some(desc));
    }

    fn overlap_track(&mut self, t: usize) -> u64 {
        if let Some(u) = self.threads[t].overlap {
            return u;
        }
        let u = uuid(self.rank, TrackKind::Overlap, t);
        self.threads[t].overlap = Some(u);
        let desc = TrackDescriptor {
            uuid: Some(u),
            name: Some("overlapping".into()),
            parent_uuid: Some(self.threads[t].uuid),
            ..TrackDescriptor::default()
        };
        self.packet(None, None, Some(desc));
        u
    }

    /// A counter or async track of process `pi`, keyed by `key`.
    fn extra_track(&mut self, pi: usize, kind: TrackKind, key: &[u8], name: String) -> Option<u64> {
        let k = (pi, kind as u8, key.to_vec());
        if let Some(&u) = self.extra.get(&k) {
            return Some(u);
        }
        if self.extra.len() >= MAX_EXTRA_TRACKS {
            return None;
        }
        let u = uuid(self.rank, kind, self.extra.len());
        self.extra.insert(k, u);
        let desc = TrackDescriptor {
            uuid: Some(u),
            name: Some(name),
            parent_uuid: Some(uuid(self.rank, TrackKind::Process, pi)),
            counter: matches!(kind, TrackKind::Counter).then(CounterDescriptor::default),
            ..TrackDescriptor::default()
        };
        self.packet(None, None, Some(desc));
        Some(u)
    }

    fn intern(
        map: &mut HashMap<Vec<u8>, u64>,
        table: &mut Vec<InternedString>,
        raw: &[u8],
    ) -> Result<u64, String> {
        if let Some(&i) = map.get(raw) {
            return Ok(i);
        }
        let s = Self::original(raw);
        if map.len() as u64 >= MAX_INTERNED {
            return Err(s);
        }
        let iid = map.len() as u64 + 1;
        map.insert(raw.to_vec(), iid);
        table.push(InternedString { iid: Some(iid), name: Some(s) });
        Ok(iid)
    }

    fn name_field(&mut self, raw: &[u8]) -> NameField {
        match Self::intern(&mut self.names, &mut self.interned.event_names, raw) {
            Ok(i) => NameField::NameIid(i),
            Err(s) => NameField::Name(s),
        }
    }

    fn base_event(&mut self, ev: &Event<'_>, ty: i32, track: u64, args: bool) -> TrackEvent {
        let mut te = TrackEvent {
            r#type: Some(ty),
            track_uuid: Some(track),
            name_field: Some(self.name_field(ev.name_raw().unwrap_or(b"\"\""))),
            ..TrackEvent::default()
        };
        if let Some(cat) = ev.cat_raw() {
            match Self::intern(&mut self.cats, &mut self.interned.event_categories, cat) {
                Ok(i) => te.category_iids.push(i),
                Err(s) => te.categories.push(s),
            }
        }
        if args {
            if let Some(a) = ev.args_raw() {
                self.annotations(a, &mut te.debug_annotations);
            }
        }
        te
    }

    /// The members of an `args` object as debug annotations.
    fn annotations(&mut self, obj: &[u8], out: &mut Vec<DebugAnnotation>) {
        let (keys, table) = (&mut self.keys, &mut self.interned.debug_annotation_names);
        members(obj, &mut self.flags, |k, v| {
            let value = match v.first() {
                Some(b'"') => json::unescape(v).map(AnnotationValue::String),
                Some(b't') => Some(AnnotationValue::Bool(true)),
                Some(b'f') => Some(AnnotationValue::Bool(false)),
                Some(b'-' | b'0'..=b'9') => std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .map(AnnotationValue::Int)
                    .or_else(|| json::parse_f64(v).map(AnnotationValue::Double)),
                _ => None,
            }
            .unwrap_or_else(|| AnnotationValue::Json(String::from_utf8_lossy(v).into_owned()));
            let name = match Self::intern(keys, table, k) {
                Ok(i) => AnnotationName::NameIid(i),
                Err(s) => AnnotationName::Name(s),
            };
            out.push(DebugAnnotation { name_field: Some(name), value: Some(value) });
        });
    }

    /// Nanoseconds on the merged timeline of a raw `ts`, or `None` (counted)
    /// when it is not a number or falls before the base.
    fn ns(&mut self, raw: Option<&[u8]>) -> Option<i64> {
        let units = timefmt::parse_units(raw?)?.saturating_add(self.shift);
        let ns = i64::try_from(units.div_euclid(UNITS_PER_NS)).ok()?;
        if ns < 0 {
            self.before_zero += 1;
            return None;
        }
        Some(ns)
    }

    fn flow_id(&self, ev: &Event<'_>) -> Option<u64> {
        let f = ev.fields;
        let id = f.id.or(f.bind_id)?.of(ev.raw);
        // Chrome joins flow events by category, name and id; ranks never meet.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for part in [&self.rank.to_le_bytes()[..], ev.cat_raw().unwrap_or(b""), b"\0", id] {
            for &b in part {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        Some(h)
    }

    fn event(&mut self, pi: usize, ev: &Event<'_>) {
        let ph = ev.ph();
        match ph {
            b'M' => {
                // Counted like the JSON merge, which replaces these two.
                if !matches!(ev.name_raw(), Some(b"\"process_name\"" | b"\"process_sort_index\"")) {
                    self.events += 1;
                }
                self.metadata(pi, ev);
            }
            b'X' | b'B' | b'E' => {
                let Some(start) = self.ns(ev.ts_raw()) else { return };
                let t = self.thread(pi, ev.tid_raw());
                let end = if ph == b'X' {
                    let dur = ev
                        .fields
                        .dur
                        .and_then(|d| timefmt::parse_units(d.of(ev.raw)))
                        .unwrap_or(0)
                        .max(0);
                    Some(start.saturating_add(i64::try_from(dur / UNITS_PER_NS).unwrap_or(0)))
                } else {
                    None
                };
                let track = self.threads[t].uuid;
                let (kind, te) = if ph == b'E' {
                    let te = TrackEvent {
                        r#type: Some(proto::TYPE_SLICE_END),
                        track_uuid: Some(track),
                        ..TrackEvent::default()
                    };
                    (Kind::End, te)
                } else {
                    (Kind::Slice, self.base_event(ev, proto::TYPE_SLICE_BEGIN, track, true))
                };
                self.pend(t, start, kind, end, te, None);
                self.events += 1;
            }
            b's' | b't' | b'f' => {
                let (Some(ts), Some(id)) = (self.ns(ev.ts_raw()), self.flow_id(ev)) else {
                    *self.dropped.entry(ph).or_default() += 1;
                    return;
                };
                let t = self.thread(pi, ev.tid_raw());
                let track = self.threads[t].uuid;
                // Kept whole in case no slice encloses it: then it is an instant.
                let te = self.base_event(ev, proto::TYPE_INSTANT, track, false);
                self.pend(t, ts, Kind::Flow, Some(ts), te, Some((id, ph == b'f')));
                self.events += 1;
            }
            b'i' | b'I' | b'R' => {
                let Some(ts) = self.ns(ev.ts_raw()) else { return };
                let scope = json::object_member(ev.raw, b"s").map(|s| s.of(ev.raw));
                let scope = matches!(scope, Some(b"\"p\"" | b"\"g\""));
                let track = if scope {
                    uuid(self.rank, TrackKind::Process, pi)
                } else {
                    let t = self.thread(pi, ev.tid_raw());
                    self.threads[t].uuid
                };
                let te = self.base_event(ev, proto::TYPE_INSTANT, track, true);
                self.packet(Some(ts as u64), Some(te), None);
                self.events += 1;
            }
            b'C' => {
                let Some(ts) = self.ns(ev.ts_raw()) else { return };
                let name = ev.name_raw().map(Self::original).unwrap_or_default();
                let Some(args) = ev.args_raw() else { return };
                let mut series: Vec<(Vec<u8>, f64)> = Vec::new();
                members(args, &mut self.flags, |k, v| {
                    if let Some(x) = json::parse_f64(v) {
                        series.push((k.to_vec(), x));
                    }
                });
                for (k, value) in series {
                    let key = Self::original(&k);
                    let track_name = if key == "value" || key.is_empty() {
                        name.clone()
                    } else {
                        format!("{name} {key}")
                    };
                    let mut id = ev.name_raw().unwrap_or(b"").to_vec();
                    id.push(0);
                    id.extend_from_slice(&k);
                    let Some(track) = self.extra_track(pi, TrackKind::Counter, &id, track_name)
                    else {
                        *self.dropped.entry(ph).or_default() += 1;
                        continue;
                    };
                    let te = TrackEvent {
                        r#type: Some(proto::TYPE_COUNTER),
                        track_uuid: Some(track),
                        double_counter_value: Some(value),
                        ..TrackEvent::default()
                    };
                    self.packet(Some(ts as u64), Some(te), None);
                }
                self.events += 1;
            }
            b'b' | b'e' | b'n' => {
                let Some(ts) = self.ns(ev.ts_raw()) else { return };
                let Some(id) = ev.fields.id.map(|s| s.of(ev.raw)) else {
                    *self.dropped.entry(ph).or_default() += 1;
                    return;
                };
                let mut key = ev.cat_raw().unwrap_or(b"").to_vec();
                key.push(0);
                key.extend_from_slice(id);
                let name = ev.name_raw().map(Self::original).unwrap_or_default();
                let Some(track) = self.extra_track(pi, TrackKind::Async, &key, name) else {
                    *self.dropped.entry(ph).or_default() += 1;
                    return;
                };
                let te = match ph {
                    b'b' => self.base_event(ev, proto::TYPE_SLICE_BEGIN, track, true),
                    b'n' => self.base_event(ev, proto::TYPE_INSTANT, track, true),
                    _ => TrackEvent {
                        r#type: Some(proto::TYPE_SLICE_END),
                        track_uuid: Some(track),
                        ..TrackEvent::default()
                    },
                };
                self.packet(Some(ts as u64), Some(te), None);
                self.events += 1;
            }
            _ => *self.dropped.entry(ph).or_default() += 1,
        }
    }

    fn metadata(&mut self, pi: usize, ev: &Event<'_>) {
        match ev.name_raw() {
            Some(b"\"process_name\"") => {
                if let Some(n) = ev.arg_raw(b"name").and_then(json::unescape) {
                    if self.procs[pi].name.as_deref() != Some(n.as_str()) {
                        self.procs[pi].name = Some(n);
                        self.describe_process(pi);
                    }
                }
            }
            Some(b"\"thread_name\"") => {
                if let Some(n) = ev.arg_raw(b"name").and_then(json::unescape) {
                    let tid = ev.tid_raw();
                    let t = self.thread(pi, tid);
                    self.describe_thread(pi, t, tid, Some(n));
                }
            }
            _ => {}
        }
    }

    /// Queues a slice, end or flow on thread `t`, releasing the earliest
    /// when the window is full.
    fn pend(
        &mut self,
        t: usize,
        start: i64,
        kind: Kind,
        end: Option<i64>,
        ev: TrackEvent,
        flow: Option<(u64, bool)>,
    ) {
        self.seqno += 1;
        let key = (start, kind, Reverse(end.unwrap_or(i64::MAX)), self.seqno);
        self.threads[t].heap.push(Reverse(Pending { key, end, ev, flow }));
        if self.threads[t].heap.len() > WINDOW {
            self.drain_thread(t, WINDOW);
        }
    }

    /// Releases pending items of thread `t` until `keep` remain; with
    /// `keep == 0` also closes every open slice.
    fn drain_thread(&mut self, t: usize, keep: usize) {
        while self.threads[t].heap.len() > keep {
            let Some(Reverse(p)) = self.threads[t].heap.pop() else { break };
            self.release(t, p);
        }
        if keep == 0 {
            while let Some(o) = self.threads[t].stack.pop() {
                if let Some(end) = o.end {
                    self.end_packet(t, end, o);
                }
                // A B without its E stays open: Perfetto shows it unfinished.
            }
        }
    }

    fn end_packet(&mut self, t: usize, ts: i64, o: Open) {
        let te = TrackEvent {
            r#type: Some(proto::TYPE_SLICE_END),
            track_uuid: Some(self.threads[t].uuid),
            flow_ids: o.flows,
            terminating_flow_ids: o.terminating,
            ..TrackEvent::default()
        };
        self.packet(Some(ts as u64), Some(te), None);
    }

    /// Closes open slices of thread `t` that end at or before `at`.
    fn close_until(&mut self, t: usize, at: i64) {
        while let Some(top) = self.threads[t].stack.last() {
            match top.end {
                Some(end) if end <= at => {
                    if let Some(o) = self.threads[t].stack.pop() {
                        self.end_packet(t, end, o);
                    }
                }
                _ => break,
            }
        }
    }

    fn release(&mut self, t: usize, p: Pending) {
        let start = p.key.0;
        match p.key.1 {
            Kind::Flow => {
                let Some((id, terminating)) = p.flow else { return };
                let enclosing = self.threads[t]
                    .stack
                    .iter_mut()
                    .rev()
                    .find(|o| o.end.is_none_or(|e| e >= start));
                match enclosing {
                    Some(o) => {
                        if terminating {
                            o.terminating.push(id);
                        } else {
                            o.flows.push(id);
                        }
                    }
                    None => {
                        // No slice to bind to: an instant carries the flow.
                        let mut te = p.ev;
                        if terminating {
                            te.terminating_flow_ids.push(id);
                        } else {
                            te.flow_ids.push(id);
                        }
                        self.packet(Some(start as u64), Some(te), None);
                    }
                }
            }
            Kind::End => {
                self.close_until(t, start);
                match self.threads[t].stack.pop() {
                    Some(o) => {
                        let te = TrackEvent {
                            r#type: Some(proto::TYPE_SLICE_END),
                            track_uuid: Some(self.threads[t].uuid),
                            flow_ids: o.flows,
                            terminating_flow_ids: o.terminating,
                            ..TrackEvent::default()
                        };
                        self.packet(Some(start as u64), Some(te), None);
                    }
                    None => self.unmatched_ends += 1,
                }
            }
            Kind::Slice => {
                if start < self.threads[t].last_start {
                    self.late += 1;
                    self.overlap(t, start, p);
                    return;
                }
                self.close_until(t, start);
                let nests = match (self.threads[t].stack.last().and_then(|o| o.end), p.end) {
                    (Some(parent), Some(end)) => end <= parent,
                    // A B inside a slice: its end is not known yet.
                    (Some(_), None) | (None, _) => true,
                };
                if !nests {
                    self.overlapping += 1;
                    self.overlap(t, start, p);
                    return;
                }
                self.threads[t].last_start = start;
                self.packet(Some(start as u64), Some(p.ev), None);
                self.threads[t].stack.push(Open {
                    end: p.end,
                    flows: Vec::new(),
                    terminating: Vec::new(),
                });
            }
        }
    }

    /// Writes a slice that cannot nest on the thread's overlapping track
    /// (begin and end at once: slices there may overlap each other too,
    /// Perfetto then nests them as it can).
    fn overlap(&mut self, t: usize, start: i64, p: Pending) {
        let track = self.overlap_track(t);
        let mut te = p.ev;
        te.track_uuid = Some(track);
        self.packet(Some(start as u64), Some(te), None);
        let end = TrackEvent {
            r#type: Some(proto::TYPE_SLICE_END),
            track_uuid: Some(track),
            ..TrackEvent::default()
        };
        self.packet(Some(p.end.unwrap_or(start) as u64), Some(end), None);
    }

    /// Appends one packet (framed as `Trace.packet`, field 1) to the output,
    /// with any strings interned since the last packet.
    fn packet(&mut self, ts: Option<u64>, ev: Option<TrackEvent>, desc: Option<TrackDescriptor>) {
        let interned = (!self.interned.event_names.is_empty()
            || !self.interned.event_categories.is_empty()
            || !self.interned.debug_annotation_names.is_empty())
        .then(|| std::mem::take(&mut self.interned));
        let flags = if self.first {
            self.first = false;
            proto::SEQ_INCREMENTAL_STATE_CLEARED | proto::SEQ_NEEDS_INCREMENTAL_STATE
        } else {
            proto::SEQ_NEEDS_INCREMENTAL_STATE
        };
        let pkt = TracePacket {
            timestamp: ts,
            trusted_packet_sequence_id: Some(self.seq),
            track_event: ev,
            interned_data: interned,
            sequence_flags: Some(flags),
            track_descriptor: desc,
        };
        self.out.push(0x0A);
        // Encoding into a Vec cannot run out of room.
        let _ = pkt.encode_length_delimited(&mut self.out);
    }
}

/// Calls `f` with the raw key (quoted) and raw value of each member of the
/// JSON object `obj` (already validated by the reader).
fn members(obj: &[u8], flags: &mut Flags, mut f: impl FnMut(&[u8], &[u8])) {
    let mut i = json::skip_ws(obj, 0);
    if obj.get(i) != Some(&b'{') {
        return;
    }
    i = json::skip_ws(obj, i + 1);
    while obj.get(i) == Some(&b'"') {
        let ks = i;
        let Ok(ke) = json::scan_string(obj, ks + 1, flags) else { return };
        i = json::skip_ws(obj, ke);
        if obj.get(i) != Some(&b':') {
            return;
        }
        i = json::skip_ws(obj, i + 1);
        let Ok(ve) = json::scan_value(obj, i, flags) else { return };
        f(&obj[ks..ke], &obj[i..ve]);
        i = json::skip_ws(obj, ve);
        if obj.get(i) == Some(&b',') {
            i = json::skip_ws(obj, i + 1);
        }
    }
}
