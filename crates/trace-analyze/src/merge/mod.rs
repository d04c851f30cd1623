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
//! the workers and the writer, one job per submodule:
//!
//! | module | owns |
//! | --- | --- |
//! | `output` | the one trait of an output format (`RankOutput`: a rank's conversion, pulled a chunk at a time, and the format's head, separator and tail), and its Perfetto side over the `perfetto` module |
//! | `json` | the Chrome JSON side: events copied through with pids, times and flow ids rewritten |
//! | `order` | the order of the chunks, the workers and the hand-over to the writer |
//!
//! This module aligns the clocks and drives one format (monomorphised:
//! nothing is dispatched per event or per chunk). Memory stays flat: per
//! worker, its share of a group's open inputs (a small read window, the pid
//! table or Perfetto's per-rank state each) and a queue of at most 4 chunks. It never holds a
//! whole input or output in memory and writes no file but the output.

mod json;
mod order;
mod output;

use super::inputs::RankedInput;
use super::perfetto;
use super::reader::TraceReader;
use super::timefmt::{self, UNITS_PER_NS};
use super::AnalyzeError;
use json::JsonRank;
use output::RankOutput;
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
    /// The names an output's file name may end in, for messages.
    pub const EXTENSIONS: &'static str =
        ".json, .json.gz, .pftrace, .perfetto-trace (or those with .gz)";

    /// The format an output's file name names by its extension, or `None`
    /// for any other name (`m.txt`): `.json` and `.json.gz` are JSON,
    /// `.pftrace` and `.perfetto-trace` (optionally `.gz`) Perfetto.
    ///
    /// ```
    /// use ranktune_trace_analyze::OutputFormat;
    /// use std::path::Path;
    /// assert_eq!(OutputFormat::named(Path::new("m.json.gz")), Some(OutputFormat::Json));
    /// assert_eq!(OutputFormat::named(Path::new("m.pftrace")), Some(OutputFormat::Perfetto));
    /// assert_eq!(OutputFormat::named(Path::new("m.txt")), None);
    /// ```
    pub fn named(path: &Path) -> Option<Self> {
        let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase())?;
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        if name.ends_with(".json") {
            Some(OutputFormat::Json)
        } else if name.ends_with(".pftrace") || name.ends_with(".perfetto-trace") {
            Some(OutputFormat::Perfetto)
        } else {
            None
        }
    }

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

/// Ranks whose chunks are interleaved with each other: fixed runs of this
/// many consecutive inputs. A constant (not the number of workers), so the
/// output is the same bytes for any `--jobs`. It bounds the inputs a worker
/// holds open (with `--jobs 1`, all of a group's) and so its memory: a
/// `.pftrace` rank's state is about 2 MiB on Kineto-shaped traces (reorder
/// windows of its threads), so 16 keep one worker near 45 MiB (32 measured
/// 71 MiB). It is also the most workers a merge can use.
pub const GROUP: usize = 16;

/// A JSON chunk ends after the event that brings it to this many bytes
/// (Perfetto's chunks are cut the same way, in its own module).
const FLUSH_AT: usize = 1 << 20;

/// Initial read window of each open input (it grows for a larger event):
/// small, because a worker may hold a whole group of inputs open.
const READ_BUF: usize = 256 << 10;

/// Merges into any writer, in `opts.format`. The output interleaves the
/// ranks in fixed chunks (see [`GROUP`] and the `order` module), so it is
/// the same bytes for any `opts.jobs`, and no worker ever waits for a rank
/// that is not its own: with one job everything runs on the calling thread;
/// with N ≥ 2, N worker threads convert (rank i of a group on worker i mod
/// N, each producing its chunks in the order they are written, through a
/// queue of at most 4) and the calling thread writes. Memory stays bounded:
/// a worker holds at most a group's share of open inputs (a small read
/// window and conversion state each) plus its queue. See [`merge`].
pub fn merge_to(
    inputs: &[RankedInput],
    w: &mut dyn Write,
    opts: &MergeOptions,
) -> Result<MergeReport, AnalyzeError> {
    match opts.format {
        OutputFormat::Json => merge_as::<JsonRank>(inputs, w, opts),
        OutputFormat::Perfetto => merge_as::<perfetto::RankEncoder>(inputs, w, opts),
    }
}

/// [`merge_to`] in the format of `R`: the clocks aligned, the format's
/// head, every rank's chunks in the merge's order, the format's tail.
fn merge_as<R: RankOutput>(
    inputs: &[RankedInput],
    w: &mut dyn Write,
    opts: &MergeOptions,
) -> Result<MergeReport, AnalyzeError> {
    let mut report = MergeReport {
        base_ns: inputs.iter().map(|i| i.base_ns).min().unwrap_or(0),
        ..MergeReport::default()
    };
    let workers = super::inputs::workers(opts.jobs, inputs.len()).min(GROUP);
    let shifts = shifts(inputs, report.base_ns, opts.align, workers, &mut report.warnings)?;
    let stride = u64::from(inputs.iter().map(|i| i.rank).max().unwrap_or(0)) + 1;
    let mut sink = Sink::new(w, R::SEPARATOR);
    sink.write(&R::head(report.base_ns))?;
    let done = if workers <= 1 {
        order::on_this_thread::<R>(inputs, &shifts, stride, &mut sink)?
    } else {
        order::on_workers::<R>(inputs, &shifts, stride, workers, &mut sink)?
    };
    for d in done.into_iter().flatten() {
        report.events += d.merge.events;
        report.bytes_in += d.bytes;
        report.warnings.extend(d.warnings);
        report.ranks.push(d.merge);
    }
    sink.write(&R::tail(&report, opts.align))?;
    sink.flush()?;
    Ok(report)
}

/// Each input's shift onto the merged timeline (fixed point): its base
/// over the output's `base_ns`, plus with [`Align::FirstStep`] what brings
/// its first step to the earliest one (a rank without steps is not
/// shifted, and said so in `warnings`).
fn shifts(
    inputs: &[RankedInput],
    base_ns: i128,
    align: Align,
    workers: usize,
    warnings: &mut Vec<String>,
) -> Result<Vec<i128>, AnalyzeError> {
    let mut adjust = vec![0i128; inputs.len()];
    if align == Align::FirstStep {
        let firsts = parallel_map(inputs, workers, |i| {
            first_step(&i.path)
                .map(|f| f.map(|t| t.saturating_add(i.base_ns.saturating_mul(UNITS_PER_NS))))
        })?;
        for (i, f) in inputs.iter().zip(&firsts) {
            if f.is_none() {
                warnings.push(format!(
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
    Ok(inputs
        .iter()
        .zip(&adjust)
        .map(|(i, a)| (i.base_ns - base_ns).saturating_mul(UNITS_PER_NS).saturating_add(*a))
        .collect())
}

/// The output writer: the format's separator between two non-empty chunks.
struct Sink<'w> {
    w: &'w mut dyn Write,
    separator: &'static [u8],
    first: bool,
}

impl<'w> Sink<'w> {
    fn new(w: &'w mut dyn Write, separator: &'static [u8]) -> Self {
        Sink { w, separator, first: true }
    }

    /// Writes bytes as they are (a head or a tail).
    fn write(&mut self, bytes: &[u8]) -> Result<(), AnalyzeError> {
        self.w.write_all(bytes).map_err(wio)
    }

    /// Writes one chunk (nothing for an empty one), after the separator
    /// unless it is the first.
    fn put(&mut self, chunk: &[u8]) -> Result<(), AnalyzeError> {
        if chunk.is_empty() {
            return Ok(());
        }
        if !self.first {
            self.write(self.separator)?;
        }
        self.first = false;
        self.write(chunk)
    }

    fn flush(&mut self) -> Result<(), AnalyzeError> {
        self.w.flush().map_err(wio)
    }
}

/// An error writing the output.
fn wio(source: std::io::Error) -> AnalyzeError {
    AnalyzeError::Io { path: "output".into(), source }
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
