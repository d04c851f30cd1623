//! Streaming merge: writes every rank's events onto one timeline in one
//! Chrome trace (the ranks interleaved in fixed chunks), copying each event's bytes through
//! and rewriting only the fields that must change (`pid`, `ts`, `id`,
//! `bind_id`, and integers beyond 64 bits, which become strings).
//!
//! Each rank becomes its own set of process groups: pids are renumbered
//! (`rank * 1000 + k`) so no two ranks collide, every process is named
//! "rank R · pid P" (plus its original name) and sorted by rank; thread names
//! pass through; flow and async ids are remapped per rank so arrows never join
//! two ranks. Times stay absolute on a shared base (the smallest
//! `baseTimeNanoseconds`, written into the output) or, with
//! [`Align::FirstStep`], each rank is shifted so its first `ProfilerStep#`
//! starts at the same instant. With a `.pftrace` output the per-rank
//! conversion is the `perfetto` module's.
//!
//! Output order: the ranks are interleaved in chunks of about 1 MiB, cut at
//! points that depend only on each rank's own events. Ranks go in groups of
//! [`GROUP`] consecutive ones; within a group, round after round, the next
//! chunk of every rank still going, in rank order (chunk 0 of ranks 0..15,
//! chunk 1 of ranks 0..15, …; a rank that ends drops out). Viewers do not
//! care about the order of the event array (Chrome JSON events carry their
//! own `ts`, and each rank's events keep their order; each rank of a
//! `.pftrace` is its own packet sequence, whose packets keep their order).
//! This order lets N workers convert N ranks at once and stream every chunk
//! straight to the writer in the order it is written: the bytes are the same
//! for any number of workers, and nothing is parked in memory or on disk.
//!
//! Owns: the merge's order, the pid/flow-id rewriting of the JSON output,
//! the workers and the writer. Memory stays flat: per worker, its share of a
//! group's open inputs (a small read window, the pid table or Perfetto's
//! per-rank state each) and a queue of at most 4 chunks. It never holds a
//! whole input or output in memory and writes no file but the output.

use super::inputs::RankedInput;
use super::json::{self, Span};
use super::naming;
use super::perfetto;
use super::reader::TraceReader;
use super::timefmt::{self, UNITS_PER_NS};
use super::AnalyzeError;
use ranktune_core::atomic_file::{Publish, PublishError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// How ranks' clocks are put on one timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Align {
    /// Keep absolute times (each rank's base applied, shared output base).
    #[default]
    Absolute,
    /// Shift each rank so its first step starts when the earliest does.
    /// Reads each file twice.
    FirstStep,
}

/// What [`merge`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// A Chrome trace (JSON object form).
    #[default]
    Json,
    /// Perfetto's protobuf trace (`TracePacket` stream), see the
    /// `perfetto` module.
    Perfetto,
}

impl OutputFormat {
    /// The format an output path asks for: `.pftrace` and `.perfetto-trace`
    /// (each optionally followed by `.gz`) are Perfetto, all else JSON.
    pub fn from_path(path: &Path) -> Self {
        let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase());
        let name = name.as_deref().unwrap_or("");
        let name = name.strip_suffix(".gz").unwrap_or(name);
        if name.ends_with(".pftrace") || name.ends_with(".perfetto-trace") {
            OutputFormat::Perfetto
        } else {
            OutputFormat::Json
        }
    }
}

/// Options of [`merge`].
#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// Clock alignment.
    pub align: Align,
    /// Threads: 1 does everything on the calling thread; N ≥ 2 converts on
    /// N worker threads (one input each at a time) while the calling thread
    /// writes; 0 means one per core. At most [`GROUP`] and the number of
    /// inputs are used. The output is the same bytes for any number.
    pub jobs: usize,
    /// Output format; [`merge`] sets it from the output's name.
    pub format: OutputFormat,
}

/// What one rank contributed.
#[derive(Debug, Clone)]
pub struct RankMerge {
    /// The rank.
    pub rank: u32,
    /// The file.
    pub path: PathBuf,
    /// Events written.
    pub events: u64,
    /// Shift applied to this rank's `ts` values, in nanoseconds.
    pub shift_ns: i128,
    /// Original pid (as written in the file) → new pid.
    pub pids: Vec<(String, u64)>,
}

/// The result of a merge.
#[derive(Debug, Clone, Default)]
pub struct MergeReport {
    /// Events written (excluding the process metadata ranktune adds).
    pub events: u64,
    /// Input bytes read (decompressed).
    pub bytes_in: u64,
    /// `baseTimeNanoseconds` of the output.
    pub base_ns: i128,
    /// Per rank, in rank order.
    pub ranks: Vec<RankMerge>,
    /// Warnings naming files and what was skipped.
    pub warnings: Vec<String>,
}

struct Pid {
    raw: Vec<u8>,
    new: u64,
    name: Option<String>,
    sort: Option<i64>,
}

/// A JSON chunk ends after the event that brings it to this many bytes.
const FLUSH_AT: usize = 1 << 20;

/// Merges `inputs` (sorted by rank, unique ranks) into `out`: a Chrome trace
/// (`.json`, `.json.gz`) or Perfetto's protobuf format (`.pftrace`,
/// `.perfetto-trace`, optionally `.gz`), chosen by the name. The output is written to a temporary file next to `out` and
/// renamed into place ([`ranktune_core::atomic_file`]), so a failed merge never
/// leaves a half file.
pub fn merge(
    inputs: &[RankedInput],
    out: &Path,
    opts: &MergeOptions,
) -> Result<MergeReport, AnalyzeError> {
    let io = |source| AnalyzeError::Io { path: out.display().to_string(), source };
    for i in inputs {
        if out.exists() && same(&i.path, out) {
            return Err(AnalyzeError::BadInput {
                input: out.display().to_string(),
                why: "the output is also an input; choose another -o".into(),
            });
        }
    }
    let gz =
        out.file_name().is_some_and(|n| n.to_string_lossy().to_ascii_lowercase().ends_with(".gz"));
    let opts = &MergeOptions { format: OutputFormat::from_path(out), ..opts.clone() };
    // Atomic, not durable: a merge is rerun from its inputs if it is lost.
    Publish::new(out)
        .write_with(|temp| {
            if gz {
                let mut w = flate2::write::GzEncoder::new(temp.file(), flate2::Compression::fast());
                let r = merge_to(inputs, &mut w, opts)?;
                w.finish().map_err(io)?;
                Ok(r)
            } else {
                merge_to(inputs, temp.file(), opts)
            }
        })
        .map_err(|e| match e {
            PublishError::Writer(e) => e,
            PublishError::Io { source, .. } => io(source),
            other => io(std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string())),
        })
}

fn same(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// First `ProfilerStep#` start of a file, in fixed-point units relative to
/// its base.
fn first_step(path: &Path) -> Result<Option<i128>, AnalyzeError> {
    let mut r = TraceReader::open(path)?;
    let mut first: Option<i128> = None;
    while let Some(ev) = r.next_event()? {
        if ev.ph() == b'X' && ev.name_raw().is_some_and(|n| n.starts_with(b"\"ProfilerStep#")) {
            if let Some(t) = ev.ts_raw().and_then(timefmt::parse_units) {
                first = Some(first.map_or(t, |f| f.min(t)));
            }
        }
    }
    Ok(first)
}

struct RankDone {
    merge: RankMerge,
    bytes: u64,
    warnings: Vec<String>,
}

/// Ranks whose chunks are interleaved with each other: fixed runs of this
/// many consecutive inputs. A constant (not the number of workers), so the
/// output is the same bytes for any `--jobs`. It bounds the inputs a worker
/// holds open (with `--jobs 1`, all of a group's) and so its memory: a
/// `.pftrace` rank's state is about 2 MiB on Kineto-shaped traces (reorder
/// windows of its threads), so 16 keep one worker near 45 MiB (32 measured
/// 71 MiB). It is also the most workers a merge can use.
pub const GROUP: usize = 16;

/// Initial read window of each open input (it grows for a larger event):
/// small, because a worker may hold a whole group of inputs open.
const READ_BUF: usize = 256 << 10;

/// Chunks a worker may have queued ahead of the writer.
const QUEUE: usize = 4;

/// One rank's conversion, pulled a chunk at a time. The chunk boundaries
/// depend only on the rank's own events (a chunk ends after the event that
/// brings it to 1 MiB), never on timing or the number of workers.
enum RankConv {
    Json(Box<JsonRank>),
    Perfetto(Box<perfetto::RankEncoder>),
}

impl RankConv {
    fn open(
        input: &RankedInput,
        shift: i128,
        stride: u64,
        json: bool,
    ) -> Result<Self, AnalyzeError> {
        Ok(if json {
            RankConv::Json(Box::new(JsonRank::open(input, shift, stride)?))
        } else {
            RankConv::Perfetto(Box::new(perfetto::RankEncoder::open(
                input, shift, stride, READ_BUF,
            )?))
        })
    }

    /// Appends the next chunk to `out` (JSON: complete events joined by
    /// `,\n`, no leading separator; Perfetto: complete packets); false once
    /// the rank has ended (`out` then holds its last bytes, maybe none).
    fn next_chunk(&mut self, out: &mut Vec<u8>) -> Result<bool, AnalyzeError> {
        match self {
            RankConv::Json(j) => j.next_chunk(out),
            RankConv::Perfetto(p) => p.next_chunk(out),
        }
    }

    fn finish(self, input: &RankedInput, shift: i128) -> RankDone {
        match self {
            RankConv::Json(j) => (*j).finish(),
            RankConv::Perfetto(p) => {
                let out = p.finish();
                RankDone {
                    merge: RankMerge {
                        rank: input.rank,
                        path: input.path.clone(),
                        events: out.events,
                        shift_ns: shift / UNITS_PER_NS,
                        pids: out.pids,
                    },
                    bytes: out.bytes,
                    warnings: out.warnings,
                }
            }
        }
    }
}

/// The order in which chunks are written: groups of [`GROUP`] consecutive
/// ranks, one after the other; within a group, round after round, the next
/// chunk of every rank of the group that has not ended, in rank order.
/// `Rounds` walks it for any subset of a group's ranks (a worker's own).
struct Rounds {
    /// Ranks still going, in order, each with its conversion once opened.
    live: Vec<(usize, Option<RankConv>)>,
    at: usize,
}

impl Rounds {
    fn new(ranks: impl Iterator<Item = usize>) -> Self {
        Rounds { live: ranks.map(|i| (i, None)).collect(), at: 0 }
    }

    /// The next rank due, or `None` when all have ended.
    fn due(&mut self) -> Option<usize> {
        if self.at >= self.live.len() {
            self.at = 0;
        }
        self.live.get(self.at).map(|r| r.0)
    }

    /// Produces the due rank's next chunk into `out` (opening it on its
    /// first); returns the rank's result when this was its last chunk.
    fn produce(
        &mut self,
        inputs: &[RankedInput],
        shifts: &[i128],
        stride: u64,
        json: bool,
        out: &mut Vec<u8>,
    ) -> Result<Option<RankDone>, AnalyzeError> {
        let Some((idx, slot)) = self.live.get_mut(self.at) else { return Ok(None) };
        let idx = *idx;
        let conv = match slot {
            Some(c) => c,
            None => slot.insert(RankConv::open(&inputs[idx], shifts[idx], stride, json)?),
        };
        if conv.next_chunk(out)? {
            self.at += 1;
            return Ok(None);
        }
        let (_, conv) = self.live.remove(self.at);
        Ok(conv.map(|c| c.finish(&inputs[idx], shifts[idx])))
    }
}

/// What a worker hands the writer, in exactly the order the writer takes
/// them from that worker.
enum Msg {
    /// A chunk of rank `.0`.
    Chunk(usize, Vec<u8>),
    /// The last chunk of rank `.0`, and what the rank contributed.
    Last(usize, Vec<u8>, Box<RankDone>),
    /// Rank `.0` failed; the merge stops.
    Failed(usize, AnalyzeError),
}

/// Merges into any writer, in `opts.format`. The output interleaves the
/// ranks in fixed chunks (see [`GROUP`] and `Rounds`), so it is the same
/// bytes for any `opts.jobs`, and no worker ever waits for a rank that is
/// not its own: with one job everything runs on the calling thread; with
/// N ≥ 2, N worker threads convert (rank i of a group on worker i mod N,
/// each producing its chunks in the order they are written, through a
/// queue of at most 4) and the calling thread writes. Memory stays bounded:
/// a worker holds at most a group's share of open inputs (a small read
/// window and conversion state each) plus its queue. See [`merge`].
pub fn merge_to(
    inputs: &[RankedInput],
    w: &mut dyn Write,
    opts: &MergeOptions,
) -> Result<MergeReport, AnalyzeError> {
    let wio = |source| AnalyzeError::Io { path: "output".into(), source };
    let mut report = MergeReport {
        base_ns: inputs.iter().map(|i| i.base_ns).min().unwrap_or(0),
        ..MergeReport::default()
    };
    let workers = super::inputs::workers(opts.jobs, inputs.len()).min(GROUP);
    let json = opts.format == OutputFormat::Json;
    let mut adjust = vec![0i128; inputs.len()];
    if opts.align == Align::FirstStep {
        let firsts = parallel_map(inputs, workers, |i| {
            first_step(&i.path)
                .map(|f| f.map(|t| t.saturating_add(i.base_ns.saturating_mul(UNITS_PER_NS))))
        })?;
        for (i, f) in inputs.iter().zip(&firsts) {
            if f.is_none() {
                report.warnings.push(format!(
                    "{}: no ProfilerStep# events, so rank {} is not shifted by --align first-step",
                    i.path.display(),
                    i.rank
                ));
            }
        }
        if let Some(target) = firsts.iter().flatten().min().copied() {
            for (a, f) in adjust.iter_mut().zip(&firsts) {
                if let Some(f) = f {
                    *a = target.saturating_sub(*f);
                }
            }
        }
    }
    let stride = u64::from(inputs.iter().map(|i| i.rank).max().unwrap_or(0)) + 1;
    let mut head: Vec<u8> = Vec::with_capacity(256);
    head.extend_from_slice(
        b"{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"ranktuneMerged\":true,\"baseTimeNanoseconds\":",
    );
    timefmt::write_u128(report.base_ns.max(0) as u128, &mut head);
    head.extend_from_slice(b",\n\"traceEvents\":[\n");
    if json {
        w.write_all(&head).map_err(wio)?;
    }
    let base_ns = report.base_ns;
    let shifts: Vec<i128> = inputs
        .iter()
        .zip(&adjust)
        .map(|(i, a)| (i.base_ns - base_ns).saturating_mul(UNITS_PER_NS).saturating_add(*a))
        .collect();
    let mut done: Vec<Option<RankDone>> = (0..inputs.len()).map(|_| None).collect();
    let mut first = true;
    let mut put = |w: &mut dyn Write, c: &[u8]| -> Result<(), AnalyzeError> {
        if c.is_empty() {
            return Ok(());
        }
        if !first && json {
            w.write_all(b",\n").map_err(wio)?;
        }
        first = false;
        w.write_all(c).map_err(wio)
    };
    let groups = (0..inputs.len()).step_by(GROUP).map(|g| g..(g + GROUP).min(inputs.len()));
    if workers <= 1 {
        // One job: one thread converts and writes.
        let mut buf = Vec::with_capacity(FLUSH_AT + (64 << 10));
        for group in groups {
            let mut rounds = Rounds::new(group);
            while let Some(idx) = rounds.due() {
                buf.clear();
                let last = rounds.produce(inputs, &shifts, stride, json, &mut buf)?;
                put(w, &buf)?;
                if let Some(d) = last {
                    done[idx] = Some(d);
                }
            }
        }
    } else {
        let shifts = &shifts;
        std::thread::scope(|scope| -> Result<(), AnalyzeError> {
            let mut rxs = Vec::with_capacity(workers);
            // Written chunks go back to their worker for reuse.
            let mut backs = Vec::with_capacity(workers);
            for k in 0..workers {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(QUEUE);
                let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
                rxs.push(rx);
                backs.push(back_tx);
                let groups = groups.clone();
                scope.spawn(move || {
                    for group in groups {
                        let mut rounds = Rounds::new(group.filter(|i| i % workers == k));
                        while let Some(idx) = rounds.due() {
                            let mut buf = back_rx
                                .try_recv()
                                .unwrap_or_else(|_| Vec::with_capacity(FLUSH_AT + (64 << 10)));
                            buf.clear();
                            let msg = match rounds.produce(inputs, shifts, stride, json, &mut buf) {
                                Ok(None) => Msg::Chunk(idx, buf),
                                Ok(Some(d)) => Msg::Last(idx, buf, Box::new(d)),
                                Err(e) => Msg::Failed(idx, e),
                            };
                            let failed = matches!(msg, Msg::Failed(..));
                            if tx.send(msg).is_err() || failed {
                                return; // the writer has stopped, or this rank failed
                            }
                        }
                    }
                });
            }
            // The writer: the same order, taking each chunk from the worker
            // that owns its rank. Returning drops the receivers, which stops
            // the workers.
            for group in groups {
                let mut rounds = Rounds::new(group);
                while let Some(idx) = rounds.due() {
                    let lost = || {
                        AnalyzeError::NoTraces(format!(
                            "the worker merging {} stopped unexpectedly",
                            inputs[idx].path.display()
                        ))
                    };
                    match rxs[idx % workers].recv().map_err(|_| lost())? {
                        Msg::Chunk(i, c) if i == idx => {
                            put(w, &c)?;
                            let _ = backs[idx % workers].send(c);
                            rounds.at += 1;
                        }
                        Msg::Last(i, c, d) if i == idx => {
                            put(w, &c)?;
                            let _ = backs[idx % workers].send(c);
                            rounds.live.remove(rounds.at);
                            done[idx] = Some(*d);
                        }
                        Msg::Failed(i, e) if i == idx => return Err(e),
                        _ => return Err(lost()),
                    }
                }
            }
            Ok(())
        })?;
    }
    for d in done.into_iter().flatten() {
        report.events += d.merge.events;
        report.bytes_in += d.bytes;
        report.warnings.extend(d.warnings);
        report.ranks.push(d.merge);
    }
    if !json {
        w.flush().map_err(wio)?;
        return Ok(report);
    }
    let mut tail = Vec::new();
    tail.extend_from_slice(b"\n],\n\"ranktuneMerge\":");
    let meta = serde_json::json!({
        "align": match opts.align { Align::Absolute => "absolute", Align::FirstStep => "first-step" },
        "baseTimeNanoseconds": report.base_ns.to_string(),
        "ranks": report.ranks.iter().map(|r| serde_json::json!({
            "rank": r.rank,
            "file": r.path.display().to_string(),
            "events": r.events,
            "shift_ns": r.shift_ns.to_string(),
            "pids": r.pids.iter().map(|(o, n)| serde_json::json!({"original": o, "pid": n})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    tail.extend_from_slice(meta.to_string().as_bytes());
    tail.extend_from_slice(b"}\n");
    w.write_all(&tail).map_err(wio)?;
    w.flush().map_err(wio)?;
    Ok(report)
}

/// Runs `f` over `items` on up to `workers` threads, keeping the order.
fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&T) -> Result<R, AnalyzeError> + Sync,
) -> Result<Vec<R>, AnalyzeError> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Result<R, AnalyzeError>>>> =
        std::sync::Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                if let Ok(mut g) = results.lock() {
                    g[i] = Some(r);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_default();
    let mut out = Vec::with_capacity(items.len());
    for r in results {
        match r {
            Some(r) => out.push(r?),
            None => return Err(AnalyzeError::NoTraces("a worker stopped unexpectedly".into())),
        }
    }
    Ok(out)
}

/// One rank's JSON conversion: each event's bytes copied through with the
/// fields that must change rewritten; after the last event, the rank's
/// process names and sort order.
struct JsonRank {
    rank: u32,
    path: PathBuf,
    shift: i128,
    stride: u64,
    reader: TraceReader,
    pids: Vec<Pid>,
    last: usize,
    events: u64,
    reps: Vec<(Span, Rep)>,
    ended: bool,
}

impl JsonRank {
    fn open(input: &RankedInput, shift: i128, stride: u64) -> Result<Self, AnalyzeError> {
        Ok(JsonRank {
            rank: input.rank,
            path: input.path.clone(),
            shift,
            stride,
            reader: TraceReader::open_with_buffer(&input.path, READ_BUF)?,
            pids: Vec::new(),
            last: usize::MAX,
            events: 0,
            reps: Vec::with_capacity(16),
            ended: false,
        })
    }

    /// See [`RankConv::next_chunk`].
    fn next_chunk(&mut self, out: &mut Vec<u8>) -> Result<bool, AnalyzeError> {
        if self.ended {
            return Ok(false);
        }
        let (rank, shift, stride) = (self.rank, self.shift, self.stride);
        let pids = &mut self.pids;
        let reps = &mut self.reps;
        while out.len() < FLUSH_AT {
            let Some(ev) = self.reader.next_event()? else {
                self.ended = true;
                self.write_processes(out);
                return Ok(false);
            };
            let raw = ev.raw;
            let f = ev.fields;
            let pid_raw = ev.pid_raw();
            let pi = if self.last < pids.len() && pids[self.last].raw == pid_raw {
                self.last
            } else {
                match pids.iter().position(|p| p.raw == pid_raw) {
                    Some(p) => p,
                    None => {
                        let new = naming::merged_pid(rank, pids.len() as u64, stride);
                        pids.push(Pid { raw: pid_raw.to_vec(), new, name: None, sort: None });
                        pids.len() - 1
                    }
                }
            };
            self.last = pi;
            if ev.ph() == b'M' {
                match ev.name_raw() {
                    Some(b"\"process_name\"") => {
                        if let Some(n) = ev.arg_raw(b"name").and_then(json::unescape) {
                            pids[pi].name = Some(n);
                        }
                        continue;
                    }
                    Some(b"\"process_sort_index\"") => {
                        pids[pi].sort = ev
                            .arg_raw(b"sort_index")
                            .and_then(|s| std::str::from_utf8(s).ok()?.parse().ok());
                        continue;
                    }
                    _ => {}
                }
            }
            reps.clear();
            if let Some(s) = f.pid {
                reps.push((s, Rep::Pid(pids[pi].new)));
            }
            if shift != 0 {
                if let Some(s) = f.ts {
                    reps.push((s, Rep::Ts));
                }
            }
            if stride > 1 {
                if let Some(s) = f.id {
                    reps.push((s, Rep::Id));
                }
                if let Some(s) = f.bind_id {
                    reps.push((s, Rep::Id));
                }
            }
            for &(a, b) in ev.big_ints {
                reps.push((Span { start: a as u32, end: b as u32 }, Rep::Quote));
            }
            if !out.is_empty() {
                out.extend_from_slice(b",\n");
            }
            if reps.len() > 1 {
                reps.sort_unstable_by_key(|r| r.0.start);
            }
            let mut at = 0usize;
            for &(span, rep) in reps.iter() {
                let (s, e) = (span.start as usize, span.end as usize);
                if s < at {
                    continue; // nested inside an earlier replacement
                }
                out.extend_from_slice(&raw[at..s]);
                let v = &raw[s..e];
                match rep {
                    Rep::Pid(p) => timefmt::write_u128(u128::from(p), out),
                    Rep::Ts => {
                        if !timefmt::shift(v, shift, out) {
                            out.extend_from_slice(v);
                        }
                    }
                    Rep::Id => remap_id(v, rank, stride, out),
                    Rep::Quote => {
                        out.push(b'"');
                        out.extend_from_slice(v);
                        out.push(b'"');
                    }
                }
                at = e;
            }
            out.extend_from_slice(&raw[at..]);
            self.events += 1;
        }
        Ok(true)
    }

    /// Process names and order for this rank.
    fn write_processes(&self, out: &mut Vec<u8>) {
        let (rank, pids) = (self.rank, &self.pids);
        let mut order: Vec<usize> = (0..pids.len()).collect();
        order.sort_by_key(|&i| (pids[i].sort.unwrap_or(i64::MAX), i));
        for (pos, &i) in order.iter().enumerate() {
            let p = &pids[i];
            let orig = json::unescape(&p.raw)
                .unwrap_or_else(|| String::from_utf8_lossy(&p.raw).into_owned());
            let name = naming::process_label(rank, &orig, p.name.as_deref());
            if !out.is_empty() {
                out.extend_from_slice(b",\n");
            }
            let name_json = serde_json::to_string(&name).unwrap_or_else(|_| "\"?\"".into());
            let sort = i64::from(rank) * 1_000_000 + pos as i64;
            let _ = write!(
                out,
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":{name_json}}}}},\n{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"tid\":0,\"args\":{{\"sort_index\":{sort}}}}}",
                p.new, p.new
            );
        }
    }

    fn finish(self) -> RankDone {
        RankDone {
            merge: RankMerge {
                rank: self.rank,
                path: self.path,
                events: self.events,
                shift_ns: self.shift / UNITS_PER_NS,
                pids: self
                    .pids
                    .iter()
                    .map(|p| (String::from_utf8_lossy(&p.raw).into_owned(), p.new))
                    .collect(),
            },
            bytes: self.reader.stats().bytes,
            warnings: self.reader.warnings(),
        }
    }
}
#[derive(Debug, Clone, Copy)]
enum Rep {
    Pid(u64),
    Ts,
    Id,
    Quote,
}

/// Remaps a flow/async id so ids of different ranks never meet:
/// numbers become `id * stride + rank`, hex strings likewise (kept hex),
/// other strings get a `:r<rank>` suffix.
fn remap_id(v: &[u8], rank: u32, stride: u64, out: &mut Vec<u8>) {
    let map = |id: u64| id.checked_mul(stride).and_then(|x| x.checked_add(u64::from(rank)));
    if let Some(n) = json::parse_u64(v).and_then(map) {
        timefmt::write_u128(u128::from(n), out);
        return;
    }
    if v.len() >= 2 && v[0] == b'"' {
        let inner = &v[1..v.len() - 1];
        let hex = inner
            .strip_prefix(b"0x")
            .or_else(|| inner.strip_prefix(b"0X"))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .and_then(map);
        if let Some(h) = hex {
            let _ = write!(out, "\"0x{h:x}\"");
        } else {
            out.extend_from_slice(&v[..v.len() - 1]);
            let _ = write!(out, ":r{rank}\"");
        }
        return;
    }
    out.extend_from_slice(v);
}
