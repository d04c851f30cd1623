//! `ranktune tune`: the main job. Tunes the built-in CPU kernels for every
//! token bucket into the shared cache file, as one rank (rank from the
//! launcher's environment: mpirun, srun, torchrun) or as a launcher of N
//! local rank processes (`--ranks N`), and reports what it chose.
//!
//! Presentation only (progress, tables, JSON, child processes): tuning itself
//! is `ranktune_tune`, storage is the cache store.

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ranktune_cache::{Entry, Identity, Section, Store};
use ranktune_collective as collective;
use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_kernels::{gemm, rmsnorm, runners, softmax};
use ranktune_trace::{TraceConfig, TraceSession};
use ranktune_tune::strategy::{self, Coordinator, Strategy};
use ranktune_tune::{Op, Session, Source, TuneInputs, TuneRecord, Tuner, TunerOptions};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Instant;

/// Default cache file, in the current directory.
const DEFAULT_CACHE: &str = "ranktune-cache.json";
/// Largest token bucket without `--max-tokens`.
const DEFAULT_MAX_TOKENS: u64 = 1024;
/// Largest token bucket with `--quick`.
const QUICK_MAX_TOKENS: u64 = 64;
/// Prefix of the progress lines a child rank writes to stderr.
const PROGRESS: &str = "ranktune-progress";
/// Launcher variables a child must not inherit (its rank comes from RANKTUNE_*).
const LAUNCHER_VARS: [&str; 12] = [
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "MPI_LOCALRANKID",
];

/// The built-in ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpName {
    /// f32 GEMM, M (tokens) dynamic.
    Gemm,
    /// Row softmax, rows dynamic.
    Softmax,
    /// RMSNorm, rows dynamic.
    Rmsnorm,
}

/// Arguments of `ranktune tune`.
#[derive(Debug, clap::Args)]
pub struct TuneArgs {
    /// Ops to tune, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "gemm,softmax,rmsnorm")]
    ops: Vec<OpName>,
    /// Largest token (row) count to tune: buckets are the powers of two up to
    /// it [default: 1024, or 64 with --quick].
    #[arg(long, value_name = "N")]
    max_tokens: Option<u64>,
    /// Cache file [default: $RANKTUNE_CACHE, $TLLM_AUTOTUNER_CACHE_PATH, or
    /// ./ranktune-cache.json].
    #[arg(long, value_name = "PATH")]
    cache: Option<PathBuf>,
    /// Start N local rank processes and wait for all of them. Without it this
    /// process is one rank of a job started by mpirun, srun, torchrun, ….
    #[arg(long, value_name = "N")]
    ranks: Option<u32>,
    /// Small shapes: the whole job takes a few seconds (tests, demos).
    #[arg(long)]
    quick: bool,
    /// How the ranks share tuning: `independent` (each rank alone, entries in
    /// its own section), `broadcast` (rank 0 measures), `merge` (every rank
    /// measures, the slowest rank counts) or `parallel` (candidates split over
    /// the ranks). All but independent give every rank the same choice,
    /// stored once in the `shared` section. Waits are bounded by
    /// RANKTUNE_STRATEGY_TIMEOUT seconds (default 300).
    #[arg(long, value_name = "STRATEGY", env = "RANKTUNE_STRATEGY", default_value = "independent")]
    strategy: Strategy,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
    /// Write one Chrome trace per rank: `trace.json` becomes `trace_<rank>.json`,
    /// a directory gets `<dir>/trace_<rank>.json`, `{rank}` and friends are
    /// expanded [default: $RANKTUNE_TRACE or $TLLM_TORCH_PROFILE_TRACE; none].
    /// Each tuned bucket is one iteration (`ProfilerStep#N`), so
    /// $RANKTUNE_PROFILE_ITERS selects buckets.
    #[arg(long, value_name = "PATH")]
    trace: Option<PathBuf>,
    /// Internal: run as a child of `--ranks` (JSON on stdout, progress lines on stderr).
    #[arg(long, hide = true)]
    child: bool,
}

/// One bucket's result in a report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    rank: u32,
    op: String,
    /// Shapes of the bucket (per input).
    bucket: Vec<Vec<u64>>,
    runner: String,
    tactic: serde_json::Value,
    /// `tuned` (measured now), `cache` (hit) or `fallback`.
    source: String,
    best_us: Option<f64>,
    fallback_us: Option<f64>,
    speedup: Option<f64>,
    candidates: usize,
    failures: Vec<String>,
    /// Where a tuned entry went: `shared` (tuned together) or `rank_<N>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    section: Option<String>,
    /// Candidates this rank measured itself (tuned rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    measured_here: Option<usize>,
    /// Why a collective strategy tuned this bucket independently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// One rank's report (what a child prints).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RankReport {
    rank: u32,
    world_size: u32,
    tuned: u64,
    hits: u64,
    misses: u64,
    fallbacks: u64,
    failed_tactics: u64,
    tuning_seconds: f64,
    entries_saved: usize,
    /// The strategy (`independent`, `broadcast`, `merge`, `parallel`).
    #[serde(default)]
    strategy: String,
    /// Buckets tuned together with the other ranks.
    #[serde(default)]
    shared: u64,
    /// Buckets every rank had cached with the same choice (agreed, not measured).
    #[serde(default)]
    agreed_hits: u64,
    /// Buckets a collective strategy had to tune independently.
    #[serde(default)]
    strategy_fallbacks: u64,
    rows: Vec<Row>,
}

/// The whole job's report (`--json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobReport {
    cache: PathBuf,
    world_size: u32,
    /// How the ranks shared tuning.
    strategy: String,
    tuned: u64,
    hits: u64,
    misses: u64,
    fallbacks: u64,
    failed_tactics: u64,
    tuning_seconds: f64,
    wall_seconds: f64,
    ranks: Vec<RankReport>,
}

impl JobReport {
    fn new(cache: PathBuf, ranks: Vec<RankReport>, wall_seconds: f64) -> Self {
        JobReport {
            cache,
            world_size: ranks.first().map_or(1, |r| r.world_size),
            strategy: ranks.first().map_or_else(String::new, |r| r.strategy.clone()),
            tuned: ranks.iter().map(|r| r.tuned).sum(),
            hits: ranks.iter().map(|r| r.hits).sum(),
            misses: ranks.iter().map(|r| r.misses).sum(),
            fallbacks: ranks.iter().map(|r| r.fallbacks).sum(),
            failed_tactics: ranks.iter().map(|r| r.failed_tactics).sum(),
            tuning_seconds: ranks.iter().map(|r| r.tuning_seconds).sum(),
            wall_seconds,
            ranks,
        }
    }
}

/// Runs `ranktune tune`.
pub fn run(args: TuneArgs) -> anyhow::Result<ExitCode> {
    if args.ops.is_empty() {
        bail!("--ops is empty; name at least one of gemm, softmax, rmsnorm");
    }
    if args.max_tokens == Some(0) {
        bail!("--max-tokens 0 tunes nothing; give a token count of at least 1");
    }
    if let Some(n) = args.max_tokens.filter(|&n| n > MAX_TOKENS_LIMIT) {
        bail!(
            "--max-tokens {n} is more than the built-in kernels can tune in memory \
             (at most {MAX_TOKENS_LIMIT}); give a smaller token count"
        );
    }
    if let Some(n) = args.ranks.filter(|&n| n > MAX_LOCAL_RANKS) {
        bail!(
            "--ranks {n} would start {n} processes on this machine (at most {MAX_LOCAL_RANKS}); \
             for bigger jobs start one ranktune per rank with mpirun, srun or torchrun"
        );
    }
    let cache = cache_path(args.cache.as_deref());
    let started = Instant::now();
    let report = match args.ranks {
        Some(0) => bail!("--ranks 0 starts no rank; give at least 1"),
        Some(n) => launch(&args, &cache, n)?,
        None => {
            let rank = run_rank(&args, &cache)?;
            if args.child {
                println!("{}", serde_json::to_string(&rank).context("encoding the rank's report")?);
                return Ok(ExitCode::SUCCESS);
            }
            JobReport::new(cache.clone(), vec![rank], started.elapsed().as_secs_f64())
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).context("encoding the report")?);
    } else {
        print_table(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// `--cache`, then `RANKTUNE_CACHE`, then `TLLM_AUTOTUNER_CACHE_PATH`, then
/// `./ranktune-cache.json`.
fn cache_path(flag: Option<&Path>) -> PathBuf {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    flag.map(Path::to_path_buf)
        .or_else(|| env("RANKTUNE_CACHE"))
        .or_else(|| env("TLLM_AUTOTUNER_CACHE_PATH"))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE))
}

fn max_tokens(args: &TuneArgs) -> u64 {
    args.max_tokens.unwrap_or(if args.quick { QUICK_MAX_TOKENS } else { DEFAULT_MAX_TOKENS })
}

// ------------------------------------------------------------------ one rank

/// The store and identity of this process.
/// Largest `--max-tokens`: the biggest bucket's synthetic inputs must fit
/// in memory (65,536 rows of 4,096 floats is 1 GiB).
const MAX_TOKENS_LIMIT: u64 = 1 << 16;

/// Most local rank processes `--ranks` starts.
const MAX_LOCAL_RANKS: u32 = 1024;

/// Opens the cache store and checks now that the cache can be saved —
/// its directory exists (or is created) and accepts new files — so a bad
/// path fails before tuning rather than after it. The check leaves nothing
/// behind.
fn open_store(path: &Path) -> anyhow::Result<Box<dyn Store>> {
    let store = ranktune_cache::FileStore::from_env(path).context("opening the tuning cache")?;
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| {
                format!("creating {} for the tuning cache; choose another --cache", dir.display())
            })?;
            dir
        }
        None => Path::new("."),
    };
    let probe = dir.join(format!(".ranktune-probe-{}", std::process::id()));
    std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).with_context(|| {
        format!("the tuning cache could not be saved in {}; choose another --cache", dir.display())
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(Box::new(store))
}

fn identity() -> (Identity, String) {
    let id = Identity::current();
    let digest = id.digest();
    (id, digest)
}

/// Progress: a bar on a terminal, lines for a launcher, nothing otherwise.
struct Progress {
    bar: ProgressBar,
    child: bool,
    done: u64,
    total: u64,
}

impl Progress {
    fn new(total: u64, child: bool) -> Self {
        let bar = if child {
            ProgressBar::hidden()
        } else {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
        };
        bar.set_style(bar_style());
        if child {
            eprintln!("{PROGRESS} 0 {total}");
        }
        Progress { bar, child, done: 0, total }
    }

    fn step(&mut self, what: &str) {
        self.done += 1;
        self.bar.set_message(what.to_string());
        self.bar.inc(1);
        if self.child {
            eprintln!("{PROGRESS} {} {}", self.done, self.total);
        }
    }
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:32} {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}

fn run_rank(args: &TuneArgs, cache: &Path) -> anyhow::Result<RankReport> {
    let info =
        RankInfo::detect(&RankOverrides::default()).context("finding this process's rank")?;
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
            Some(cfg) => Some(TraceSession::start(cfg, &info).context("starting the trace")?),
            None => None,
        };

    let (id, digest) = identity();
    let mut opts = TunerOptions::new(Section::Rank(info.rank), id, digest);
    opts.strategy = args.strategy;
    let tuner = Tuner::new(opts);
    if args.strategy.is_collective() {
        // The ranks talk through the cache file's directory, or MPI (see collective::from_env).
        let dir = cache.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let coll = collective::from_env(&info, dir).with_context(|| {
            format!("connecting the ranks for --strategy {} in {}", args.strategy, dir.display())
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
                tune_op(&tuner, &gemm_op, &gemm_base, info.rank, &mut progress, &mut rows)
            }
            OpName::Softmax => {
                tune_op(&tuner, &softmax_op, &softmax_base, info.rank, &mut progress, &mut rows)
            }
            OpName::Rmsnorm => {
                tune_op(&tuner, &rmsnorm_op, &rms_base, info.rank, &mut progress, &mut rows)
            }
        }
    }
    progress.bar.finish_and_clear();
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
        strategy: args.strategy.to_string(),
        shared: coord.shared,
        agreed_hits: coord.agreed_hits,
        strategy_fallbacks: coord.fallbacks,
        rows,
    })
}

fn tune_op<I: TuneInputs>(
    tuner: &Tuner,
    op: &Op<I>,
    base: &[Vec<u64>],
    rank: u32,
    progress: &mut Progress,
    rows: &mut Vec<Row>,
) {
    let die_at = test_die_at();
    for key in op.config().profiles(base) {
        if die_at == Some((rank, progress.done)) {
            // Test-only (RANKTUNE_TEST_DIE_AT): die like a crashed rank, no cleanup.
            std::process::abort();
        }
        let bucket = key.to_nested();
        let choice = tuner.tune_key(op, &key);
        let runner = op.runner_names().get(choice.runner as usize).cloned().unwrap_or_default();
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
        progress.step(&format!("{} {}", op.name(), shape_label(&bucket)));
        rows.push(row);
        // One bucket is one iteration of the trace (a no-op without one).
        ranktune_trace::step();
    }
}

/// `RANKTUNE_TEST_DIE_AT=<rank>:<n>`: rank `<rank>` aborts just before its
/// `<n>`-th bucket (counting from 0). For tests of what the other ranks do
/// when one dies mid-tuning; never set it in real jobs.
fn test_die_at() -> Option<(u32, u64)> {
    let v = std::env::var("RANKTUNE_TEST_DIE_AT").ok()?;
    let (r, n) = v.split_once(':')?;
    Some((r.trim().parse().ok()?, n.trim().parse().ok()?))
}

fn speedup(best: Option<f64>, fallback: Option<f64>) -> Option<f64> {
    match (best, fallback) {
        (Some(b), Some(f)) if b > 0.0 => Some(f / b),
        _ => None,
    }
}

fn row_from_record(
    rank: u32,
    op: &str,
    bucket: &[Vec<u64>],
    runner: &str,
    tactic: serde_json::Value,
    source: Source,
    rec: Option<&TuneRecord>,
) -> Row {
    let best_us = rec.and_then(|r| r.best_us);
    let fallback_us = rec.and_then(|r| r.fallback_us);
    Row {
        rank,
        op: op.to_string(),
        bucket: bucket.to_vec(),
        runner: runner.to_string(),
        tactic,
        source: if source == Source::Tuned { "tuned" } else { "fallback" }.to_string(),
        best_us,
        fallback_us,
        speedup: speedup(best_us, fallback_us),
        candidates: rec.map_or(0, |r| r.measured),
        section: rec.map(|r| r.section.name()),
        measured_here: rec.map(|r| r.measured_here),
        note: rec.and_then(|r| r.fallback.clone()),
        failures: rec
            .map(|r| {
                r.failures
                    .iter()
                    .map(|(run, t, e)| format!("{run} {}: {e}", tactic_label(t)))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn row_from_entry(
    rank: u32,
    op: &str,
    bucket: &[Vec<u64>],
    runner: &str,
    tactic: serde_json::Value,
    entry: Option<&Entry>,
) -> Row {
    let best_us = entry.map(|e| e.time_us);
    let fallback_us = entry.and_then(|e| {
        e.candidates
            .iter()
            .find(|c| {
                c.runner_index == 0 && Some(&c.tactic) == e.candidates.first().map(|f| &f.tactic)
            })
            .and_then(|c| c.stats.as_ref())
            .map(|s| s.median_us)
    });
    Row {
        rank,
        op: op.to_string(),
        bucket: bucket.to_vec(),
        runner: runner.to_string(),
        tactic,
        source: "cache".to_string(),
        best_us,
        fallback_us,
        speedup: speedup(best_us, fallback_us),
        candidates: entry.map_or(0, |e| e.candidates.len()),
        section: None,
        measured_here: None,
        note: None,
        failures: entry
            .map(|e| {
                e.candidates
                    .iter()
                    .filter_map(|c| {
                        c.error
                            .as_ref()
                            .map(|m| format!("{} {}: {m}", c.runner, tactic_label(&c.tactic)))
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

// ------------------------------------------------------------------ launcher

struct Child {
    rank: u32,
    proc: std::process::Child,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::thread::JoinHandle<VecDeque<String>>,
}

enum Event {
    Progress { rank: u32, done: u64, total: u64 },
    Line { rank: u32, line: String },
}

fn launch(args: &TuneArgs, cache: &Path, n: u32) -> anyhow::Result<JobReport> {
    let started = Instant::now();
    let exe =
        std::env::current_exe().context("finding the ranktune executable to start the ranks")?;
    let job = ranktune_collective::JobId::fresh();
    let ops: Vec<&str> = args
        .ops
        .iter()
        .map(|o| match o {
            OpName::Gemm => "gemm",
            OpName::Softmax => "softmax",
            OpName::Rmsnorm => "rmsnorm",
        })
        .collect();
    let (tx, rx) = mpsc::channel::<Event>();
    let mut children = Vec::new();
    for rank in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.arg("tune").arg("--child").arg("--ops").arg(ops.join(",")).arg("--cache").arg(cache);
        cmd.arg("--max-tokens").arg(max_tokens(args).to_string());
        if args.quick {
            cmd.arg("--quick");
        }
        cmd.arg("--strategy").arg(args.strategy.name());
        if let Some(trace) = &args.trace {
            cmd.arg("--trace").arg(trace);
        }
        for v in LAUNCHER_VARS {
            cmd.env_remove(v);
        }
        cmd.env("RANKTUNE_RANK", rank.to_string())
            .env("RANKTUNE_WORLD_SIZE", n.to_string())
            .env("RANKTUNE_LOCAL_RANK", rank.to_string())
            .env("RANKTUNE_JOB_ID", &job.value)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut proc = match cmd.spawn() {
            Ok(p) => p,
            Err(e) => {
                for c in &mut children {
                    let c: &mut Child = c;
                    let _ = c.proc.kill();
                }
                return Err(e).with_context(|| format!("starting rank {rank} ({})", exe.display()));
            }
        };
        let mut out = proc.stdout.take();
        let err = proc.stderr.take();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(o) = out.as_mut() {
                let _ = o.read_to_string(&mut s);
            }
            s
        });
        let tx = tx.clone();
        let stderr = std::thread::spawn(move || {
            let mut tail = VecDeque::new();
            if let Some(e) = err {
                for line in BufReader::new(e).lines().map_while(Result::ok) {
                    let mut parts = line.split_whitespace();
                    if parts.next() == Some(PROGRESS) {
                        let done = parts.next().and_then(|v| v.parse().ok()).unwrap_or(0);
                        let total = parts.next().and_then(|v| v.parse().ok()).unwrap_or(0);
                        let _ = tx.send(Event::Progress { rank, done, total });
                        continue;
                    }
                    if tail.len() >= 20 {
                        tail.pop_front();
                    }
                    tail.push_back(line.clone());
                    let _ = tx.send(Event::Line { rank, line });
                }
            }
            tail
        });
        children.push(Child { rank, proc, stdout, stderr });
    }
    drop(tx);

    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    bar.set_style(bar_style());
    bar.set_message(format!("{n} ranks"));
    let mut done = vec![0u64; n as usize];
    let mut totals = vec![0u64; n as usize];
    for ev in rx {
        match ev {
            Event::Progress { rank, done: d, total } => {
                if let (Some(dd), Some(tt)) =
                    (done.get_mut(rank as usize), totals.get_mut(rank as usize))
                {
                    *dd = d;
                    *tt = total;
                }
                bar.set_length(totals.iter().sum());
                bar.set_position(done.iter().sum());
            }
            Event::Line { rank, line } => bar.suspend(|| eprintln!("[rank {rank}] {line}")),
        }
    }
    bar.finish_and_clear();

    let mut reports = Vec::new();
    let mut failures = Vec::new();
    for mut c in children {
        let status = c.proc.wait().with_context(|| format!("waiting for rank {}", c.rank))?;
        let stdout = c.stdout.join().unwrap_or_default();
        let tail = c.stderr.join().unwrap_or_default();
        if !status.success() {
            failures.push(format!(
                "rank {} failed ({}); last lines of its stderr:\n    {}",
                c.rank,
                describe_status(&status),
                if tail.is_empty() {
                    "(none)".to_string()
                } else {
                    tail.into_iter().collect::<Vec<_>>().join("\n    ")
                }
            ));
            continue;
        }
        match stdout
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .map(serde_json::from_str::<RankReport>)
        {
            Some(Ok(r)) => reports.push(r),
            _ => {
                failures.push(format!("rank {} exited successfully but printed no report", c.rank))
            }
        }
    }
    if !failures.is_empty() {
        bail!("{} of {n} ranks failed:\n  {}", failures.len(), failures.join("\n  "));
    }
    reports.sort_by_key(|r| r.rank);
    Ok(JobReport::new(cache.to_path_buf(), reports, started.elapsed().as_secs_f64()))
}

fn describe_status(status: &std::process::ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("killed by signal {sig}");
        }
    }
    status.to_string()
}

// ------------------------------------------------------------------ output

/// `{"blocked":{"tile_m":4,"tile_n":64}}` → `blocked(tile_m=4,tile_n=64)`.
fn tactic_label(t: &serde_json::Value) -> String {
    use serde_json::Value;
    match t {
        Value::String(s) => s.clone(),
        Value::Object(m) if m.len() == 1 => {
            let (k, v) =
                m.iter().next().map_or((String::new(), &Value::Null), |(k, v)| (k.clone(), v));
            match v {
                Value::Object(inner) => {
                    let args: Vec<String> =
                        inner.iter().map(|(a, b)| format!("{a}={}", tactic_label(b))).collect();
                    format!("{k}({})", args.join(","))
                }
                other => format!("{k}({})", tactic_label(other)),
            }
        }
        other => other.to_string(),
    }
}

/// The first input's shape, e.g. `64x512`.
fn shape_label(bucket: &[Vec<u64>]) -> String {
    bucket
        .first()
        .map(|s| s.iter().map(u64::to_string).collect::<Vec<_>>().join("x"))
        .unwrap_or_default()
}

fn us(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 1000.0 => format!("{:.2} ms", v / 1000.0),
        Some(v) => format!("{v:.1} µs"),
        None => "-".to_string(),
    }
}

fn print_table(report: &JobReport) {
    let multi = report.ranks.len() > 1;
    let header = [
        "rank",
        "op",
        "bucket",
        "runner",
        "tactic",
        "best",
        "vs fallback",
        "cands",
        "fails",
        "source",
    ];
    let mut lines: Vec<[String; 10]> = Vec::new();
    for r in &report.ranks {
        for row in &r.rows {
            lines.push([
                row.rank.to_string(),
                row.op.clone(),
                shape_label(&row.bucket),
                row.runner.clone(),
                tactic_label(&row.tactic),
                us(row.best_us),
                row.speedup.map_or("-".to_string(), |s| format!("{s:.2}x")),
                row.candidates.to_string(),
                row.failures.len().to_string(),
                match (row.section.as_deref(), &row.note) {
                    (_, Some(_)) => format!("{}, alone", row.source),
                    (Some("shared"), None) => format!("{}, shared", row.source),
                    _ => row.source.clone(),
                },
            ]);
        }
    }
    let skip = usize::from(!multi);
    let mut widths = [0usize; 10];
    for (i, h) in header.iter().enumerate() {
        widths[i] = h.chars().count();
    }
    for l in &lines {
        for (i, c) in l.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let fmt = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .skip(skip)
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let header: Vec<String> = header.iter().map(|s| s.to_string()).collect();
    println!("{}", fmt(&header));
    for l in &lines {
        println!("{}", fmt(l));
    }
    for r in &report.ranks {
        for row in &r.rows {
            for f in &row.failures {
                println!(
                    "  failed on rank {} {} {}: {f}",
                    row.rank,
                    row.op,
                    shape_label(&row.bucket)
                );
            }
        }
    }
    for r in &report.ranks {
        let mut notes = r.rows.iter().filter_map(|row| row.note.as_ref().map(|n| (row, n)));
        if let Some((row, note)) = notes.next() {
            println!("  rank {} {} {}: {note}", row.rank, row.op, shape_label(&row.bucket));
            let more = notes.count();
            if more > 0 {
                println!("  rank {}: {more} more bucket(s) tuned alone after that", row.rank);
            }
        }
    }
    println!();
    if !report.strategy.is_empty() && report.strategy != "independent" {
        let sum = |f: fn(&RankReport) -> u64| report.ranks.iter().map(f).sum::<u64>();
        println!(
            "strategy {}: {} buckets tuned together, {} cache hits agreed by all ranks, {} tuned alone after a failure (counts over ranks)",
            report.strategy,
            sum(|r| r.shared),
            sum(|r| r.agreed_hits),
            sum(|r| r.strategy_fallbacks)
        );
    }
    let lookups = report.hits + report.misses;
    if report.tuned == 0 && report.misses == 0 {
        println!(
            "nothing to tune: all {lookups} lookups hit the cache {} ({} rank{})",
            report.cache.display(),
            report.ranks.len(),
            if report.ranks.len() == 1 { "" } else { "s" }
        );
    } else {
        println!(
            "tuned {} buckets on {} rank{} in {:.2} s of measuring ({:.2} s wall); cache hits {}, misses {}, fallbacks {}, failed tactics {}",
            report.tuned,
            report.ranks.len(),
            if report.ranks.len() == 1 { "" } else { "s" },
            report.tuning_seconds,
            report.wall_seconds,
            report.hits,
            report.misses,
            report.fallbacks,
            report.failed_tactics
        );
        let saved: usize = report.ranks.iter().map(|r| r.entries_saved).sum();
        println!("saved {saved} entries to {}", report.cache.display());
    }
}
