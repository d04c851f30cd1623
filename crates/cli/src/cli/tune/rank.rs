//! One rank of `ranktune tune`: builds the built-in ops, opens the cache and
//! the trace, tunes every bucket of the chosen ops (alone or with the other
//! ranks, by `--strategy`), saving progress as it goes (`--save-every`),
//! saves the rest, and returns the rank's report.
//!
//! It reports progress through `progress` and never prints a table or a
//! document itself; tuning is `ranktune_tune`'s, storage the cache store's.

use super::durable::Durable;
use super::progress::Progress;
use super::report::{row_from_entry, row_from_record, RankReport, Row};
use super::{labels::shape_label, max_tokens, shown, strategy_for, OpName, TuneArgs};
use crate::cli::sys;
use anyhow::Context;
use ranktune_cache::{CacheData, CacheLocation, Identity, Section, Store};
use ranktune_collective as collective;
use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_kernels::{crashy, gemm, rmsnorm, runners, softmax};
use ranktune_trace::{TraceConfig, TraceSession};
use ranktune_tune::isolation::Isolation;
use ranktune_tune::strategy::{self, Coordinator, Strategy};
use ranktune_tune::{ChoiceSource, Op, Session, TuneInputs, Tuner, TunerOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;

/// Opens the cache store and checks now that the cache can be saved — a
/// file's directory exists (ranktune never creates it) and accepts new
/// files; a Redis server answers, takes the credentials and holds a
/// ranktune cache (or nothing) under the prefix — so a bad location fails
/// before tuning rather than after it. The check leaves nothing behind.
pub(super) fn open_store(cache: &CacheLocation) -> anyhow::Result<Box<dyn Store + Send + Sync>> {
    let store = cache.open().context("opening the tuning cache")?;
    let path = match cache {
        CacheLocation::File(path) => path,
        CacheLocation::Redis(_) => {
            store.load_sections(&[]).context("opening the tuning cache")?;
            return Ok(store);
        }
    };
    ranktune_cache::check_parent_dir(path).context("the tuning cache; choose another --cache")?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let probe = dir.join(format!(".ranktune-probe-{}", std::process::id()));
    std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).with_context(|| {
        format!("the tuning cache could not be saved in {}; choose another --cache", dir.display())
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(store)
}

/// Where a rank keeps what it measured when the store cannot take it at the
/// end (a Redis server that went away): a cache file in the current
/// directory (or the temp directory), written whole, that `ranktune cache
/// import LOCATION FILE` pushes later. Returns the file, or `None` when it
/// could not be written either (the error says so).
fn write_fallback(cache: &CacheLocation, rank: u32, data: &CacheData) -> Option<PathBuf> {
    let prefix = match cache {
        CacheLocation::Redis(u) => u.prefix.replace(['/', ':'], "_"),
        CacheLocation::File(_) => return None,
    };
    let name = format!("ranktune-unsaved-{prefix}-rank{rank}-{}.json", std::process::id());
    [PathBuf::from("."), std::env::temp_dir()]
        .into_iter()
        .map(|dir| dir.join(&name))
        .find(|path| ranktune_cache::write_cache_file(path, data).is_ok())
}

/// This machine's identity and its digest.
fn identity() -> (Identity, String) {
    let id = Identity::current();
    let digest = id.digest();
    (id, digest)
}

/// Tunes as one rank (its rank from the environment) into `cache`. Stops
/// before the next bucket once `stop` is set (SIGINT/SIGTERM), and then
/// still saves what it tuned and writes its trace.
pub(super) fn run_rank(
    args: &TuneArgs,
    cache: &CacheLocation,
    stop: &AtomicUsize,
) -> anyhow::Result<RankReport> {
    let overrides =
        RankOverrides { rank: args.rank, world_size: args.world_size, local_rank: None };
    let info = RankInfo::detect(&overrides).context("finding this process's rank")?;
    let strategy = strategy_for(args, info.world_size);
    let plan = Plan::new(args, info.rank)?;
    let trace = start_trace(args, &info)?;
    let settings = super::isolate::settings(args)?;
    let local_ranks = super::isolate::local_ranks(args.child, info.world_size);
    let tuner = new_tuner(
        &info,
        strategy,
        super::isolate::isolation(&settings, local_ranks),
        args.retry_failed,
    );
    if strategy.is_collective() {
        connect(&tuner, args, cache, &info, strategy)?;
    }
    let save_every = super::durable::policy(args)?;
    let store = open_store(cache)?;
    let checkpoints = super::durable::checkpoint_store(cache)?;
    let session = Session::start(&tuner, store.as_ref())
        .with_context(|| format!("loading the tuning cache {cache}"))?
        .save_every(save_every);
    let mut session = super::durable::with_checkpoints(session, checkpoints.as_ref());
    let durable = Durable::new(&mut session, info.rank, shown(cache));
    let rows = plan.tune(&tuner, info.rank, stop, args.child, durable);
    let saved = save(session, &tuner, cache, info.rank)?;
    stop_trace(trace, info.rank)?;
    Ok(rank_report(&tuner, &info, strategy, saved, rows))
}

/// What one rank tunes: the built-in ops and the bucket bases of each (the
/// GEMM's from `--model`'s linear layers, or the built-in one).
struct Plan {
    ops: Vec<OpName>,
    gemm_op: Op<runners::GemmIo>,
    softmax_op: Op<runners::SoftmaxIo>,
    rmsnorm_op: Op<runners::RmsNormIo>,
    /// The test op (`--ops crashy`), in builds that have it.
    crashy_op: Option<Op<crashy::CrashyIo>>,
    gemm_bases: Vec<Vec<Vec<u64>>>,
    softmax_base: Vec<Vec<u64>>,
    rms_base: Vec<Vec<u64>>,
}

impl Plan {
    /// The ops and shapes `args` ask for (`--ops`, `--model`, `--quick`,
    /// `--max-tokens`), for rank `rank`.
    fn new(args: &TuneArgs, rank: u32) -> anyhow::Result<Plan> {
        let max = max_tokens(args);
        let (gemm_n, gemm_k, cols) = if args.quick {
            (gemm::QUICK_N, gemm::QUICK_K, softmax::QUICK_COLS)
        } else {
            (gemm::DEFAULT_N, gemm::DEFAULT_K, softmax::DEFAULT_COLS)
        };
        let rms_cols = if args.quick { rmsnorm::QUICK_COLS } else { rmsnorm::DEFAULT_COLS };
        let gemm_op = runners::gemm_op(max).context("building the gemm op")?;
        let softmax_op = runners::softmax_op(max).context("building the softmax op")?;
        let rmsnorm_op = runners::rmsnorm_op(max).context("building the rmsnorm op")?;
        let crashy_op = match crashy::crashy_op(rank, max) {
            Some(op) if args.ops.contains(&OpName::Crashy) => {
                Some(op.context("building the crashy op")?)
            }
            _ => None,
        };
        // The GEMM shapes: a model's linear layers, or the built-in one.
        let (gemm_bases, ops) = match &args.model {
            Some(path) => {
                let model = super::model::ModelShapes::from_file(path, args.tp)?;
                let bases: Vec<_> = model
                    .distinct()
                    .into_iter()
                    .map(|((n, k), _)| runners::gemm_base(n as usize, k as usize))
                    .collect();
                (bases, vec![OpName::Gemm])
            }
            None => (vec![runners::gemm_base(gemm_n, gemm_k)], args.ops.clone()),
        };
        Ok(Plan {
            ops,
            gemm_op,
            softmax_op,
            rmsnorm_op,
            crashy_op,
            gemm_bases,
            softmax_base: runners::rows_base(cols),
            rms_base: runners::rows_base(rms_cols),
        })
    }

    /// How many buckets there are to tune, over every op.
    fn buckets(&self) -> usize {
        self.ops
            .iter()
            .map(|o| match o {
                OpName::Gemm => {
                    self.gemm_bases.iter().map(|b| self.gemm_op.config().profiles(b).len()).sum()
                }
                OpName::Softmax => self.softmax_op.config().profiles(&self.softmax_base).len(),
                OpName::Rmsnorm => self.rmsnorm_op.config().profiles(&self.rms_base).len(),
                OpName::Crashy => self
                    .crashy_op
                    .as_ref()
                    .map_or(0, |op| op.config().profiles(&self.crashy_base()).len()),
            })
            .sum()
    }

    /// Tunes (or looks up) every bucket, op by op, reporting progress (as
    /// a child rank's progress lines when `child`) and checkpointing after
    /// each bucket through `durable`; one row per bucket.
    fn tune(
        &self,
        tuner: &Tuner,
        rank: u32,
        stop: &AtomicUsize,
        child: bool,
        durable: Durable<'_, '_>,
    ) -> Vec<Row> {
        let mut steps = Steps {
            progress: Progress::new(self.buckets() as u64, child),
            rows: Vec::new(),
            durable,
        };
        let s = &mut steps;
        for o in &self.ops {
            match o {
                OpName::Gemm => {
                    for base in &self.gemm_bases {
                        tune_op(tuner, &self.gemm_op, base, rank, stop, s)
                    }
                }
                OpName::Softmax => {
                    tune_op(tuner, &self.softmax_op, &self.softmax_base, rank, stop, s)
                }
                OpName::Rmsnorm => tune_op(tuner, &self.rmsnorm_op, &self.rms_base, rank, stop, s),
                OpName::Crashy => {
                    if let Some(op) = &self.crashy_op {
                        tune_op(tuner, op, &self.crashy_base(), rank, stop, s)
                    }
                }
            }
        }
        steps.progress.finish();
        steps.rows
    }

    /// The crashy op's base shapes (rows bucketed).
    fn crashy_base(&self) -> Vec<Vec<u64>> {
        crashy::crashy_base(self.softmax_base[0][1] as usize)
    }
}

/// Starts tracing (when `--trace` or the environment asks) before any work,
/// so a bad trace path fails now rather than after a long run; the session
/// writes its file when dropped, also on an early return or a panic.
fn start_trace(args: &TuneArgs, info: &RankInfo) -> anyhow::Result<Option<TraceSession>> {
    match TraceConfig::from_env_or(args.trace.clone()).context("reading the trace settings")? {
        Some(mut cfg) => {
            // The command handles SIGINT/SIGTERM itself (it saves the
            // cache, then stops the trace): the trace's own handler
            // would end the process before the save.
            cfg.handle_signals = false;
            Ok(Some(TraceSession::start(cfg, info).context("starting the trace")?))
        }
        None => Ok(None),
    }
}

/// Writes the trace, if one was started.
fn stop_trace(trace: Option<TraceSession>, rank: u32) -> anyhow::Result<()> {
    if let Some(trace) = trace {
        let path = trace.stop().context("writing the trace")?;
        tracing::info!("rank {rank} wrote its trace to {}", path.display());
    }
    Ok(())
}

/// This rank's tuner, writing to its own section under `strategy`,
/// measuring as `isolation` says; `retry_failed` measures known-bad tactics
/// again.
fn new_tuner(
    info: &RankInfo,
    strategy: Strategy,
    isolation: Isolation,
    retry_failed: bool,
) -> Tuner {
    let (id, digest) = identity();
    let mut opts = TunerOptions::new(Section::Rank(info.rank), id, digest);
    opts.strategy = strategy;
    opts.isolation = isolation;
    opts.retry_failed = retry_failed;
    Tuner::new(opts)
}

/// Connects this rank to the others for a collective `strategy` and gives
/// the tuner its coordinator.
fn connect(
    tuner: &Tuner,
    args: &TuneArgs,
    cache: &CacheLocation,
    info: &RankInfo,
    strategy: Strategy,
) -> anyhow::Result<()> {
    // The ranks talk through the cache file's directory, the cache's
    // Redis server, RANKTUNE_COLLECTIVE's choice, or MPI (see
    // collective::from_env_for_cache).
    let meet = match cache {
        CacheLocation::File(p) => collective::CacheAt::File(p),
        CacheLocation::Redis(u) => collective::CacheAt::Redis(u),
    };
    let coll = collective::from_env_for_cache(info, meet).with_context(|| {
        let why =
            if args.strategy.is_none() { " (the default for more than one rank)" } else { "" };
        // The collective's error names where (directory, redacted server).
        format!(
            "connecting the ranks for --strategy {strategy}{why}; \
             `--strategy independent` needs no connection but lets ranks disagree"
        )
    })?;
    let timeout = strategy::timeout_from_env()?;
    tuner.set_coordinator(Coordinator::new(coll).with_timeout(timeout));
    Ok(())
}

/// What a rank's session saved in all: entries written, saves made and the
/// seconds they took.
struct Saved {
    entries: usize,
    saves: u32,
    seconds: f64,
}

/// Saves what the session tuned and its checkpoints did not save yet (the
/// last durable save, logged as each checkpoint is) and says what the
/// session saved, checkpoints included. When the store cannot take it, what
/// was measured is never thrown away: it goes to a fallback file the error
/// names.
fn save(
    mut session: Session<'_>,
    tuner: &Tuner,
    cache: &CacheLocation,
    rank: u32,
) -> anyhow::Result<Saved> {
    let e = match session.flush() {
        Ok(c) => {
            if let Some(c) = &c {
                tracing::info!("{}", super::durable::durable_line(rank, &shown(cache), c));
            }
            // Nothing is pending any more: dropping the session writes nothing.
            let (saves, took) = session.saves();
            let seconds = took.as_secs_f64();
            return Ok(Saved { entries: session.written(), saves, seconds });
        }
        Err(e) => e,
    };
    // Never throw away what was measured: the session kept it.
    let unsaved = tuner.take_pending();
    // Nothing is pending now: ending the session writes nothing.
    drop(session);
    let err = anyhow::Error::new(e).context(format!("saving the tuning cache {cache}"));
    if unsaved.is_unchanged_update() {
        return Err(err);
    }
    Err(match write_fallback(cache, rank, &unsaved) {
        Some(file) => err.context(format!(
            "rank {rank}: the {} entries it measured since its last durable save are kept in \
             {}; push them once the server is back with: ranktune cache import '{}' {}",
            unsaved.len(),
            file.display(),
            match cache {
                CacheLocation::Redis(u) => u.without_password().to_string(),
                CacheLocation::File(p) => p.display().to_string(),
            },
            file.display()
        )),
        None => err,
    })
}

/// The rank's report: the tuner's counters, the coordinator's, what was
/// saved, the rows.
fn rank_report(
    tuner: &Tuner,
    info: &RankInfo,
    strategy: Strategy,
    saved: Saved,
    rows: Vec<Row>,
) -> RankReport {
    let (coord, _) = tuner.coordinator_stats().unwrap_or_default();
    RankReport {
        rank: info.rank,
        world_size: info.world_size,
        counts: tuner.stats().total,
        entries_saved: saved.entries,
        strategy: strategy.to_string(),
        shared: coord.shared,
        agreed_hits: coord.agreed_hits,
        strategy_fallbacks: coord.fallbacks,
        saves: saved.saves,
        save_seconds: saved.seconds,
        rows,
    }
}

/// What each bucket tuned goes to: the progress, the rows, the checkpoints.
struct Steps<'s, 'a> {
    progress: Progress,
    rows: Vec<Row>,
    durable: Durable<'s, 'a>,
}

/// Tunes (or looks up) every bucket of `op`, adds one row per bucket and
/// checkpoints after each; stops before the next bucket once `stop` is set.
fn tune_op<I: TuneInputs>(
    tuner: &Tuner,
    op: &Op<I>,
    base: &[Vec<u64>],
    rank: u32,
    stop: &AtomicUsize,
    steps: &mut Steps<'_, '_>,
) {
    for key in op.config().profiles(base) {
        if sys::stop_signal(stop).is_some() {
            return;
        }
        let bucket = key.to_nested();
        let choice = tuner.tune_key(op, &key);
        let runner =
            op.runner_names().get(choice.runner_index as usize).cloned().unwrap_or_default();
        let tactic = op.tactic(choice).cloned().unwrap_or(serde_json::Value::Null);
        let row = match choice.source {
            ChoiceSource::Tuned | ChoiceSource::Fallback => {
                let records = tuner.records();
                let rec = records.iter().rev().find(|r| r.op == op.name() && r.bucket == bucket);
                row_from_record(rank, op.name(), &bucket, &runner, tactic, choice.source, rec)
            }
            ChoiceSource::Cache => {
                let entry = tuner.loaded_entry(op.name(), &runner, &bucket);
                row_from_entry(rank, op.name(), &bucket, &runner, tactic, entry.as_ref())
            }
        };
        let what = format!("{} {}", op.name(), shape_label(&bucket));
        tracing::debug!("rank {rank}: {what} done ({:?})", choice.source);
        steps.progress.step(&what);
        steps.rows.push(row);
        // Local file or server I/O only, never a collective: the ranks stay
        // in lockstep whoever saves when.
        steps.durable.after_bucket();
        // One bucket is one iteration of the trace (a no-op without one).
        ranktune_trace::step();
    }
}
