//! Streaming merge: writes every rank's events onto one timeline in one
//! Chrome trace, one rank after the other, copying each event's bytes through
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
//! starts at the same instant. Memory stays flat: one event, the pid table
//! and two I/O buffers per worker. It never holds a whole input or output in
//! memory. Ranks are converted in parallel, one file per worker, and written
//! whole in rank order (a rank the writer has not reached yet spills to a
//! temporary file), so the bytes do not depend on the number of workers.
//! With a `.pftrace` output the per-rank conversion is the `perfetto`
//! module's.

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
    /// Files read at once, one per worker thread; 0 means one per core.
    /// The output is the same bytes for any number.
    pub jobs: usize,
    /// Output format; [`merge`] sets it from the output's name.
    pub format: OutputFormat,
    /// Where workers spill ranks the writer has not reached yet; `None`:
    /// the system's temporary directory ([`merge`] uses the output's).
    pub spill_dir: Option<PathBuf>,
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
    /// Output bytes that went through spill files (ranks finished by a
    /// worker before the writer reached them).
    pub spilled_bytes: u64,
}

struct Pid {
    raw: Vec<u8>,
    new: u64,
    name: Option<String>,
    sort: Option<i64>,
}

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
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let opts = &MergeOptions {
        format: OutputFormat::from_path(out),
        spill_dir: opts.spill_dir.clone().or_else(|| Some(dir.to_path_buf())),
        ..opts.clone()
    };
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

type RankResult = Result<(RankDone, Option<PathBuf>), AnalyzeError>;

/// Where a rank worker's output goes: chunks (JSON: complete events joined
/// by `,\n`, no leading separator; Perfetto: complete packets) stream to
/// the writer while it is writing this rank or has room in the queue;
/// once the queue of a rank the writer is not at yet is full, the rest goes
/// to a spill file the writer copies when it gets there. So every rank is
/// written whole, in rank order (the same bytes for any number of workers),
/// workers never wait for each other, and memory stays bounded.
struct RankOutput<'a> {
    tx: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    idx: usize,
    head: &'a std::sync::atomic::AtomicUsize,
    dir: &'a Path,
    json: bool,
    spill: Option<(PathBuf, std::io::BufWriter<std::fs::File>, bool)>,
    error: Option<std::io::Error>,
}

impl<'a> RankOutput<'a> {
    fn new(
        tx: std::sync::mpsc::SyncSender<Vec<u8>>,
        idx: usize,
        head: &'a std::sync::atomic::AtomicUsize,
        dir: &'a Path,
        json: bool,
    ) -> Self {
        RankOutput { tx: Some(tx), idx, head, dir, json, spill: None, error: None }
    }

    /// Hands one chunk on; false when the writer has gone or spilling failed.
    fn send(&mut self, chunk: Vec<u8>) -> bool {
        use std::sync::mpsc::TrySendError;
        if self.spill.is_none() {
            let Some(tx) = &self.tx else { return false };
            let chunk = match tx.try_send(chunk) {
                Ok(()) => return true,
                Err(TrySendError::Disconnected(_)) => return false,
                Err(TrySendError::Full(c)) => c,
            };
            if self.head.load(Ordering::Acquire) == self.idx {
                return tx.send(chunk).is_ok();
            }
            match self.open_spill() {
                Ok(s) => self.spill = Some(s),
                Err(e) => {
                    self.error = Some(e);
                    return false;
                }
            }
            return self.spill_chunk(&chunk);
        }
        self.spill_chunk(&chunk)
    }

    fn open_spill(&self) -> std::io::Result<(PathBuf, std::io::BufWriter<std::fs::File>, bool)> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = self.dir.join(format!(
            ".ranktune-merge-{}-{stamp}-{}.part",
            std::process::id(),
            self.idx
        ));
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&path)?;
        Ok((path, std::io::BufWriter::with_capacity(1 << 16, file), false))
    }

    fn spill_chunk(&mut self, chunk: &[u8]) -> bool {
        let Some((_, w, started)) = &mut self.spill else { return false };
        let r = (|| {
            if *started && self.json {
                w.write_all(b",\n")?;
            }
            w.write_all(chunk)
        })();
        *started = true;
        match r {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    /// Ends the rank: returns the spill file to copy, if any, and the
    /// channel, whose drop tells the writer the rank is complete.
    #[allow(clippy::type_complexity)]
    fn finish(
        mut self,
    ) -> (Result<Option<PathBuf>, AnalyzeError>, Option<std::sync::mpsc::SyncSender<Vec<u8>>>) {
        let tx = self.tx.take();
        (self.finish_spill(), tx)
    }

    fn finish_spill(&mut self) -> Result<Option<PathBuf>, AnalyzeError> {
        let spill = self.spill.take();
        let io =
            |path: &Path, source| AnalyzeError::Io { path: path.display().to_string(), source };
        if let Some(e) = self.error.take() {
            if let Some((p, _, _)) = &spill {
                let _ = std::fs::remove_file(p);
                return Err(io(p, e));
            }
            return Err(io(self.dir, e));
        }
        match spill {
            None => Ok(None),
            Some((p, w, _)) => match w.into_inner().map_err(|e| e.into_error()) {
                Ok(_) => Ok(Some(p)),
                Err(e) => {
                    let _ = std::fs::remove_file(&p);
                    Err(io(&p, e))
                }
            },
        }
    }
}

/// Copies a spill file to the output (after a `,\n` when `sep`); returns
/// whether it held anything.
fn copy_spill(path: &Path, sep: bool, w: &mut dyn Write) -> std::io::Result<bool> {
    let mut f = std::fs::File::open(path)?;
    if f.metadata()?.len() == 0 {
        return Ok(false);
    }
    if sep {
        w.write_all(b",\n")?;
    }
    std::io::copy(&mut f, w)?;
    Ok(true)
}

struct RankDone {
    merge: RankMerge,
    bytes: u64,
    warnings: Vec<String>,
}

/// Chunks a worker may have queued ahead of the writer.
const QUEUE: usize = 4;

/// Merges into any writer, in `opts.format`. Ranks are processed by up to
/// `opts.jobs` worker threads (one file each); the writer writes each rank
/// whole, in rank order, so the output is the same bytes for any number of
/// workers. Memory stays bounded: each worker queues at most 4 chunks of
/// 1 MiB, then spills a rank the writer has not reached yet to a file in
/// `opts.spill_dir` (removed once copied). See [`merge`].
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
    let workers = super::inputs::workers(opts.jobs, inputs.len());
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
    let mut done: Vec<Option<RankDone>> = (0..inputs.len()).map(|_| None).collect();
    let spill_dir = opts.spill_dir.clone().unwrap_or_else(std::env::temp_dir);
    let slots: std::sync::Mutex<Vec<Option<RankResult>>> =
        std::sync::Mutex::new((0..inputs.len()).map(|_| None).collect());
    let mut channels = Vec::with_capacity(inputs.len());
    let mut receivers = Vec::with_capacity(inputs.len());
    for _ in inputs {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(QUEUE);
        channels.push(std::sync::Mutex::new(Some(tx)));
        receivers.push(rx);
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let head = std::sync::atomic::AtomicUsize::new(0);
    let mut spilled = 0u64;
    let written = std::thread::scope(|scope| -> Result<(), AnalyzeError> {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let idx = next.fetch_add(1, Ordering::Relaxed);
                let Some(input) = inputs.get(idx) else { break };
                let Some(tx) = channels[idx].lock().ok().and_then(|mut t| t.take()) else {
                    break;
                };
                let shift = (input.base_ns - base_ns)
                    .saturating_mul(UNITS_PER_NS)
                    .saturating_add(adjust[idx]);
                let mut out = RankOutput::new(tx, idx, &head, &spill_dir, json);
                let done = if json {
                    merge_rank(input, shift, stride, &mut |c| out.send(c))
                } else {
                    perfetto_rank(input, shift, stride, &mut |c| out.send(c))
                };
                let (spill, tx) = out.finish();
                let result = spill.and_then(|spill| done.map(|d| (d, spill)));
                if let Ok(mut g) = slots.lock() {
                    g[idx] = Some(result);
                }
                // Only now may the writer see the rank end.
                drop(tx);
            });
        }
        // The writer: ranks in order, each as its worker streams it or from
        // the file it spilled to while an earlier rank was being written.
        let mut first = true;
        for (idx, rx) in receivers.into_iter().enumerate() {
            head.store(idx, Ordering::Release);
            while let Ok(c) = rx.recv() {
                if !first && json {
                    w.write_all(b",\n").map_err(wio)?;
                }
                first = false;
                w.write_all(&c).map_err(wio)?;
            }
            let result = slots.lock().ok().and_then(|mut g| g[idx].take());
            match result {
                Some(Ok((d, spill))) => {
                    if let Some(spill) = spill {
                        spilled += std::fs::metadata(&spill).map_or(0, |m| m.len());
                        let copied = copy_spill(&spill, json && !first, w);
                        let _ = std::fs::remove_file(&spill);
                        first &= !copied.map_err(wio)?;
                    }
                    done[idx] = Some(d);
                }
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(AnalyzeError::NoTraces(format!(
                        "the worker merging {} stopped unexpectedly",
                        inputs[idx].path.display()
                    )))
                }
            }
        }
        Ok(())
    });
    // On failure, later ranks may have left spill files.
    if let Ok(g) = slots.lock() {
        for (_, spill) in g.iter().flatten().flatten() {
            if let Some(p) = spill {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    written?;
    report.spilled_bytes = spilled;
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

/// Converts one rank to Perfetto packets (see the `perfetto` module).
fn perfetto_rank(
    input: &RankedInput,
    shift: i128,
    stride: u64,
    send: &mut dyn FnMut(Vec<u8>) -> bool,
) -> Result<RankDone, AnalyzeError> {
    let out = perfetto::encode_rank(input, shift, stride, send)?;
    Ok(RankDone {
        merge: RankMerge {
            rank: input.rank,
            path: input.path.clone(),
            events: out.events,
            shift_ns: shift / UNITS_PER_NS,
            pids: out.pids,
        },
        bytes: out.bytes,
        warnings: out.warnings,
    })
}

/// Rewrites one rank's events into chunks handed to `send` (which returns
/// false when the writer has gone away).
fn merge_rank(
    input: &RankedInput,
    shift: i128,
    stride: u64,
    send: &mut dyn FnMut(Vec<u8>) -> bool,
) -> Result<RankDone, AnalyzeError> {
    let rank = input.rank;
    let mut reader = TraceReader::open(&input.path)?;
    let mut pids: Vec<Pid> = Vec::new();
    let mut last = usize::MAX;
    let mut events = 0u64;
    let mut reps: Vec<(Span, Rep)> = Vec::with_capacity(16);
    let mut out: Vec<u8> = Vec::with_capacity(FLUSH_AT + (64 << 10));
    while let Some(ev) = reader.next_event()? {
        let raw = ev.raw;
        let f = ev.fields;
        let pid_raw = ev.pid_raw();
        let pi = if last < pids.len() && pids[last].raw == pid_raw {
            last
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
        last = pi;
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
        for &(span, rep) in &reps {
            let (s, e) = (span.start as usize, span.end as usize);
            if s < at {
                continue; // nested inside an earlier replacement
            }
            out.extend_from_slice(&raw[at..s]);
            let v = &raw[s..e];
            match rep {
                Rep::Pid(p) => timefmt::write_u128(u128::from(p), &mut out),
                Rep::Ts => {
                    if !timefmt::shift(v, shift, &mut out) {
                        out.extend_from_slice(v);
                    }
                }
                Rep::Id => remap_id(v, rank, stride, &mut out),
                Rep::Quote => {
                    out.push(b'"');
                    out.extend_from_slice(v);
                    out.push(b'"');
                }
            }
            at = e;
        }
        out.extend_from_slice(&raw[at..]);
        events += 1;
        if out.len() >= FLUSH_AT {
            let full = std::mem::replace(&mut out, Vec::with_capacity(FLUSH_AT + (64 << 10)));
            if !send(full) {
                break;
            }
        }
    }
    // Process names and order for this rank.
    let mut order: Vec<usize> = (0..pids.len()).collect();
    order.sort_by_key(|&i| (pids[i].sort.unwrap_or(i64::MAX), i));
    for (pos, &i) in order.iter().enumerate() {
        let p = &pids[i];
        let orig =
            json::unescape(&p.raw).unwrap_or_else(|| String::from_utf8_lossy(&p.raw).into_owned());
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
    if !out.is_empty() {
        send(out);
    }
    Ok(RankDone {
        merge: RankMerge {
            rank,
            path: input.path.clone(),
            events,
            shift_ns: shift / UNITS_PER_NS,
            pids: pids
                .iter()
                .map(|p| (String::from_utf8_lossy(&p.raw).into_owned(), p.new))
                .collect(),
        },
        bytes: reader.stats().bytes,
        warnings: reader.warnings(),
    })
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
