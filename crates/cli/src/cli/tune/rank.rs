//! One rank of `ranktune tune`: builds the built-in ops, opens the cache and
//! the trace, tunes every bucket of the chosen ops (alone or with the other
//! ranks, by `--strategy`), saves, and returns the rank's report.
//!
//! It reports progress through `progress` and never prints a table or a
//! document itself; tuning is `ranktune_tune`'s, storage the cache store's.

use super::progress::Progress;
use super::report::{row_from_entry, row_from_record, RankReport, Row};
use super::{labels::shape_label, max_tokens, strategy_for, OpName, TuneArgs};
use crate::cli::sys;
use anyhow::Context;
use ranktune_cache::{Identity, Section, Store};
use ranktune_collective as collective;
use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_kernels::{gemm, rmsnorm, runners, softmax};
use ranktune_trace::{TraceConfig, TraceSession};
use ranktune_tune::strategy::{self, Coordinator};
use ranktune_tune::{Op, Session, Source, TuneInputs, Tuner, TunerOptions};
use std::path::Path;
use std::sync::atomic::AtomicUsize;

/// Opens the cache store and checks now that the cache can be saved —
/// its directory exists (ranktune never creates it) and accepts new files — so a bad
/// path fails before tuning rather than after it. The check leaves nothing
/// behind.
pub(super) fn open_store(path: &Path) -> anyhow::Result<Box<dyn Store>> {
    let store = ranktune_cache::FileStore::from_env(path).context("opening the tuning cache")?;
    ranktune_cache::check_parent_dir(path).context("the tuning cache; choose another --cache")?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let probe = dir.join(format!(".ranktune-probe-{}", std::process::id()));
    std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).with_context(|| {
        format!("the tuning cache could not be saved in {}; choose another --cache", dir.display())
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(Box::new(store))
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
    cache: &Path,
    stop: &AtomicUsize,
) -> anyhow::Result<RankReport> {
    let overrides =
        RankOverrides { rank: args.rank, world_size: args.world_size, local_rank: None };
    let info = RankInfo::detect(&overrides).context("finding this process's rank")?;
    let strategy = strategy_for(args, info.world_size);
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
    let gemm_base = runners::gemm_base(gemm_n, gemm_k);
    let softmax_base = runners::rows_base(cols);
    let rms_base = runners::rows_base(rms_cols);

    // Start tracing before any work, so a bad trace path fails now rather
    // than after a long run; the session writes its file when dropped, also
    // on an early return or a panic.
    let trace =
        match TraceConfig::from_env_or(args.trace.clone()).context("reading the trace settings")? {
            Some(mut cfg) => {
                // The command handles SIGINT/SIGTERM itself (it saves the
                // cache, then stops the trace): the trace's own handler
                // would end the process before the save.
                cfg.handle_signals = false;
                Some(TraceSession::start(cfg, &info).context("starting the trace")?)
            }
            None => None,
        };

    let (id, digest) = identity();
    let mut opts = TunerOptions::new(Section::Rank(info.rank), id, digest);
    opts.strategy = strategy;
    let tuner = Tuner::new(opts);
    if strategy.is_collective() {
        // The ranks talk through the cache file's directory, the cache's
        // Redis server, RANKTUNE_COLLECTIVE's choice, or MPI (see
        // collective::from_env_for_cache).
        let coll = collective::from_env_for_cache(&info, cache).with_context(|| {
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
    }
    let store = open_store(cache)?;
    let session = Session::start(&tuner, store.as_ref())
        .with_context(|| format!("loading the tuning cache {}", cache.display()))?;

    let total: usize = args
        .ops
        .iter()
        .map(|o| match o {
            OpName::Gemm => gemm_op.config().profiles(&gemm_base).len(),
            OpName::Softmax => softmax_op.config().profiles(&softmax_base).len(),
            OpName::Rmsnorm => rmsnorm_op.config().profiles(&rms_base).len(),
        })
        .sum();
    let mut progress = Progress::new(total as u64, args.child);
    let mut rows = Vec::new();
    for o in &args.ops {
        match o {
            OpName::Gemm => {
                tune_op(&tuner, &gemm_op, &gemm_base, info.rank, stop, &mut progress, &mut rows)
            }
            OpName::Softmax => {
                let base = &softmax_base;
                tune_op(&tuner, &softmax_op, base, info.rank, stop, &mut progress, &mut rows)
            }
            OpName::Rmsnorm => {
                tune_op(&tuner, &rmsnorm_op, &rms_base, info.rank, stop, &mut progress, &mut rows)
            }
        }
    }
    progress.finish();
    let saved =
        session.finish().with_context(|| format!("saving the tuning cache {}", cache.display()))?;
    if let Some(trace) = trace {
        let path = trace.stop().context("writing the trace")?;
        tracing::info!("rank {} wrote its trace to {}", info.rank, path.display());
    }
    let stats = tuner.stats().total;
    let (coord, _) = tuner.coordinator_stats().unwrap_or_default();
    Ok(RankReport {
        rank: info.rank,
        world_size: info.world_size,
        tuned: stats.tuned,
        hits: stats.hits,
        misses: stats.misses,
        fallbacks: stats.fallbacks,
        failed_tactics: stats.failed_tactics,
        tuning_seconds: stats.tuning_seconds,
        entries_saved: saved.written,
        strategy: strategy.to_string(),
        shared: coord.shared,
        agreed_hits: coord.agreed_hits,
        strategy_fallbacks: coord.fallbacks,
        rows,
    })
}

/// Tunes (or looks up) every bucket of `op` and adds one row per bucket;
/// stops before the next bucket once `stop` is set.
fn tune_op<I: TuneInputs>(
    tuner: &Tuner,
    op: &Op<I>,
    base: &[Vec<u64>],
    rank: u32,
    stop: &AtomicUsize,
    progress: &mut Progress,
    rows: &mut Vec<Row>,
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
            Source::Tuned | Source::Fallback => {
                let records = tuner.records();
                let rec = records.iter().rev().find(|r| r.op == op.name() && r.bucket == bucket);
                row_from_record(rank, op.name(), &bucket, &runner, tactic, choice.source, rec)
            }
            Source::Cache => {
                let entry = tuner.loaded_entry(op.name(), &runner, &bucket);
                row_from_entry(rank, op.name(), &bucket, &runner, tactic, entry.as_ref())
            }
        };
        let what = format!("{} {}", op.name(), shape_label(&bucket));
        tracing::debug!("rank {rank}: {what} done ({:?})", choice.source);
        progress.step(&what);
        rows.push(row);
        // One bucket is one iteration of the trace (a no-op without one).
        ranktune_trace::step();
    }
}
