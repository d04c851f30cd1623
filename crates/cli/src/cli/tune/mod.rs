//! `ranktune tune`: the main job. Tunes the built-in CPU kernels for every
//! token bucket into the shared cache file, as one rank (rank from the
//! launcher's environment: mpirun, srun, torchrun) or as a launcher of N
//! local rank processes (`--ranks N`), and reports what it chose.
//!
//! Presentation only (arguments, progress, tables, JSON): tuning itself and
//! the rank launcher are `ranktune_tune`, storage is the cache store.
//!
//! - this file: the arguments, their checks and defaults, and `run`;
//! - [`rank`]: one rank's tuning; [`launch`]: `--ranks N`;
//! - [`report`]: the rows and reports (`--json`, a child's result);
//! - [`agree`]: the warning when the ranks ended with different choices;
//! - [`table`]: the table; [`progress`]: the bars; [`labels`]: short labels;
//! - [`model`]: `--model`, a Hugging Face model's GEMM shapes;
//! - [`isolate`]: `--isolate` and the candidates' limits;
//! - [`durable`]: `--save-every` and the checkpoint after each bucket.
//!
//! SIGINT and SIGTERM stop `tune` cleanly. A rank checks for them between
//! buckets: it stops tuning, saves the entries it has tuned, writes its
//! trace, and exits with status 128+signal (143 for SIGTERM). A launcher
//! (`--ranks N`) forwards the signal to its ranks, waits for them (at most
//! 30 s, then kills them) and exits with the same status. A rank started by
//! a launcher ignores SIGPIPE (its progress writes may fail once the
//! launcher is gone) and, on Linux, gets SIGTERM when its launcher dies.
//!
//! SIGKILL cannot be caught: against it, each rank saves the buckets decided
//! so far as it goes (`--save-every`, [`durable`]), so a job killed outright
//! loses only the buckets in flight (being measured, or decided since the
//! last save), and the next run tunes only the missing ones.

mod agree;
mod durable;
mod isolate;
mod labels;
mod launch;
mod meet;
mod model;
mod progress;
mod rank;
mod report;
mod table;

use crate::cli::sys;
use crate::cli::ExitCode;
use anyhow::{bail, Context};
use ranktune_cache::CacheLocation;
use ranktune_tune::strategy::Strategy;
use report::JobReport;
use serde::{Deserialize, Serialize};
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Default cache file, in the current directory.
const DEFAULT_CACHE: &str = "ranktune-cache.json";
/// Largest token bucket without `--max-tokens`.
const DEFAULT_MAX_TOKENS: u64 = 1024;
/// Largest token bucket with `--quick`.
const QUICK_MAX_TOKENS: u64 = 64;

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
    /// A test op whose tactics crash on purpose (segfault, abort, hang,
    /// unbounded allocation): only in builds with the kernels'
    /// `crash-tactics` feature, for the tests of `--isolate`.
    #[value(hide = true)]
    Crashy,
}

impl OpName {
    /// The name as `--ops` takes it.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            OpName::Gemm => "gemm",
            OpName::Softmax => "softmax",
            OpName::Rmsnorm => "rmsnorm",
            OpName::Crashy => "crashy",
        }
    }

    /// `--ops` value for `ops`: their names, comma-separated.
    pub(super) fn list(ops: &[OpName]) -> String {
        ops.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(",")
    }
}

/// Arguments of `ranktune tune`.
#[derive(Debug, clap::Args)]
pub struct TuneArgs {
    /// Ops to tune, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "gemm,softmax,rmsnorm")]
    ops: Vec<OpName>,
    /// Largest token (row) count to tune, a power of two: buckets are the
    /// powers of two up to it [default: 1024, or 64 with --quick].
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::cli::count::<u64>)]
    max_tokens: Option<u64>,
    /// The cache: a file, or `redis://[user@]host[:port][/db][?prefix=NAME]`
    /// for ranks on many machines (password in RANKTUNE_REDIS_PASSWORD)
    /// [default: $RANKTUNE_CACHE, $TLLM_AUTOTUNER_CACHE_PATH, or
    /// ./ranktune-cache.json].
    #[arg(long, value_name = "LOCATION")]
    cache: Option<OsString>,
    /// Start N local rank processes and wait for all of them. Without it this
    /// process is one rank of a job started by mpirun, srun, torchrun, ….
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::cli::count::<u32>)]
    ranks: Option<u32>,
    /// Small shapes: the whole job takes a few seconds (tests, demos).
    #[arg(long)]
    quick: bool,
    /// Measure the tactics on the cache's blocklist again (those that
    /// crashed, timed out, ran out of memory or failed validation in this
    /// environment) instead of skipping them; one that now works leaves the
    /// blocklist. Also RANKTUNE_RETRY_FAILED=1.
    #[arg(long)]
    retry_failed: bool,
    /// How the ranks share tuning: `parallel` (candidates split over the
    /// ranks), `broadcast` (rank 0 measures), `merge` (every rank measures,
    /// the slowest rank counts) or `independent` (each rank alone, entries in
    /// its own section). All but independent give every rank the same
    /// choice, stored once in the `shared` section. Waits are bounded by
    /// RANKTUNE_STRATEGY_TIMEOUT seconds (default 300). [default: parallel
    /// with more than one rank, independent for one]
    #[arg(long, value_name = "STRATEGY", env = "RANKTUNE_STRATEGY", hide_env_values = true)]
    strategy: Option<Strategy>,
    /// This process's rank, overriding the launcher's variables (with
    /// --world-size; for one rank of a job started by hand, or when stale
    /// launcher variables disagree).
    #[arg(long, value_name = "N", requires = "world_size", conflicts_with = "ranks")]
    rank: Option<u32>,
    /// The job's number of ranks, overriding the launcher's variables (with --rank).
    #[arg(long, value_name = "N", requires = "rank", conflicts_with = "ranks")]
    world_size: Option<u32>,
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
    /// Tune the GEMM shapes of a model's linear layers (QKV, output,
    /// gate/up, down, LM head; experts for a mixture of experts) read from
    /// its Hugging Face config.json, instead of the built-in ops' shapes.
    #[arg(long, value_name = "CONFIG.JSON", conflicts_with = "ops")]
    model: Option<PathBuf>,
    /// With --model: the tensor-parallel degree the layers are split by
    /// (column-parallel layers split their outputs, row-parallel their inputs).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "model", value_parser = crate::cli::count::<u32>)]
    tp: u32,
    /// Measure candidates in a worker process forked per bucket, so a tactic
    /// that crashes (SIGSEGV, abort), hangs or runs out of memory fails
    /// alone, with its reason, and the tune goes on (RANKTUNE_ISOLATE=1;
    /// see docs/isolation.md).
    #[arg(long)]
    isolate: bool,
    /// With --isolate: each request of a candidate (a warm-up run, or one
    /// sample) may take this many seconds [default: max(5 s, 50 × the
    /// fallback's time); RANKTUNE_CANDIDATE_TIMEOUT].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    candidate_timeout: Option<String>,
    /// With --isolate: a worker may grow by this many MiB [default: half the
    /// memory available at start divided by the ranks on this machine;
    /// RANKTUNE_CANDIDATE_MEMORY].
    #[arg(long, value_name = "MIB", allow_negative_numbers = true)]
    candidate_memory: Option<String>,
    /// Save the buckets decided so far while tuning, so a job killed
    /// outright (SIGKILL, out of memory, a failed node) loses only the
    /// buckets since its last save and the next run tunes only those: `auto`
    /// (the first bucket at once, then as often as keeps saving under about
    /// 5% of tuning time), a number of seconds (0: after every bucket) or
    /// `end` (only when the run ends). With -v each save names the buckets
    /// it made durable [default: $RANKTUNE_SAVE_EVERY, or auto].
    #[arg(long, value_name = "SECS|auto|end", allow_negative_numbers = true)]
    save_every: Option<String>,
    /// Internal: run as a child of `--ranks` (JSON on stdout, progress lines on stderr).
    #[arg(long, hide = true)]
    child: bool,
}

/// Runs `ranktune tune`.
pub fn run(args: TuneArgs) -> anyhow::Result<ExitCode> {
    if args.ops.is_empty() {
        bail!("--ops is empty; name at least one of gemm, softmax, rmsnorm");
    }
    if args.ops.contains(&OpName::Crashy) && !ranktune_kernels::crashy::BUILT {
        bail!(
            "--ops crashy is a test op whose tactics crash on purpose; this ranktune was built \
             without it (the ranktune-kernels feature crash-tactics); use gemm, softmax or rmsnorm"
        );
    }
    // Bad isolation or save settings are one error here, not one per rank.
    isolate::settings(&args)?;
    durable::policy(&args)?;
    if args.max_tokens == Some(0) {
        bail!("--max-tokens 0 tunes nothing; give a token count of at least 1");
    }
    if let Some(n) = args.max_tokens.filter(|&n| n > MAX_TOKENS_LIMIT) {
        bail!(
            "--max-tokens {n} is more than the built-in kernels can tune in memory \
             (at most {MAX_TOKENS_LIMIT}); give a smaller token count"
        );
    }
    if let Some(n) = args.max_tokens.filter(|n| !n.is_power_of_two()) {
        let below = 1u64 << (63 - n.leading_zeros());
        bail!(
            "--max-tokens {n} is not a power of two: the buckets are the powers of two up to it, \
             so it would tune up to {below} tokens only; give {below} or {}",
            below.saturating_mul(2)
        );
    }
    if let Some(n) = args.ranks.filter(|&n| n > MAX_LOCAL_RANKS) {
        bail!(
            "--ranks {n} would start {n} processes on this machine (at most {MAX_LOCAL_RANKS}); \
             for bigger jobs start one ranktune per rank with mpirun, srun or torchrun"
        );
    }
    // A bad model config is one error here, not one per rank.
    let model = match &args.model {
        Some(path) => {
            let m = model::ModelShapes::from_file(path, args.tp)?;
            m.check_fits(MODEL_WEIGHT_LIMIT)
                .with_context(|| format!("the model config {}", path.display()))?;
            Some(m)
        }
        None => None,
    };
    let cache = cache_location(args.cache.as_deref())?;
    // RANKTUNE_RETRY_FAILED reads like the flag (a bad value is an error
    // here, once, not one per rank).
    let args = TuneArgs {
        retry_failed: args.retry_failed
            || ranktune_tune::retry_failed_from_env().map_err(anyhow::Error::msg)?,
        ..args
    };
    if args.child {
        // A rank whose launcher died must still save: its progress writes
        // fail instead of killing it.
        sys::ignore_sigpipe();
    }
    // SIGINT/SIGTERM stop the job at a safe point (see the module docs).
    let stop = sys::stop_on_signals().context("installing the SIGINT/SIGTERM handler")?;
    let started = Instant::now();
    let report = match args.ranks {
        Some(0) => bail!("--ranks 0 starts no rank; give at least 1"),
        Some(n) => match launch::launch(&args, &cache, n, &stop)? {
            launch::Launched::Done(report) => *report,
            launch::Launched::Stopped(sig) => return Ok(signal_exit(sig)),
        },
        None => {
            let rank = rank::run_rank(&args, &cache, &stop)?;
            if let Some(sig) = sys::stop_signal(&stop) {
                let _ = writeln!(
                    std::io::stderr(),
                    "ranktune: {}: rank {} stopped after {} buckets; {} entries saved to {cache}",
                    sys::signal_name(sig),
                    rank.rank,
                    rank.rows.len(),
                    rank.entries_saved,
                );
                return Ok(signal_exit(sig));
            }
            if args.child {
                ranktune_launch::write_result(std::io::stdout().lock(), &rank)
                    .context("encoding the rank's report")?;
                return Ok(ExitCode::SUCCESS);
            }
            JobReport::new(shown(&cache), vec![rank], started.elapsed().as_secs_f64())
        }
    };
    let report = JobReport { model, ..report };
    let disagree = agree::warning(&report, &args);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).context("encoding the report")?);
        if let Some(w) = disagree {
            eprintln!("{w}");
        }
    } else {
        if let Some(m) = &report.model {
            println!("{}", m.describe());
        }
        table::print_table(&report);
        if let Some(w) = disagree {
            println!("{w}");
        }
    }
    // A signal that came after the last bucket: the work is complete and
    // reported, and the exit status still says the signal came.
    if let Some(sig) = sys::stop_signal(&stop) {
        return Ok(signal_exit(sig));
    }
    Ok(ExitCode::SUCCESS)
}

/// The exit status of a command stopped by `sig`: 128+`sig`, as a shell
/// reports a process killed by it (143 for SIGTERM, 130 for SIGINT).
fn signal_exit(sig: i32) -> ExitCode {
    ExitCode::from(u8::try_from(128 + sig).unwrap_or(1))
}

/// `--cache`, then `RANKTUNE_CACHE`, then `TLLM_AUTOTUNER_CACHE_PATH`, then
/// `./ranktune-cache.json`: a file path or a Redis URL
/// (`ranktune_cache::CacheLocation`).
fn cache_location(flag: Option<&OsStr>) -> anyhow::Result<CacheLocation> {
    if let Some(flag) = flag {
        return Ok(CacheLocation::parse_os(flag)?);
    }
    match CacheLocation::from_env()? {
        Some(location) => Ok(location),
        None => Ok(CacheLocation::parse_os(&OsString::from(DEFAULT_CACHE))?),
    }
}

/// How the report names the cache: the path, or the URL with its password
/// redacted (a URL never travels as a path).
fn shown(cache: &CacheLocation) -> String {
    match cache {
        CacheLocation::File(p) => p.display().to_string(),
        CacheLocation::Redis(u) => u.to_string(),
    }
}

/// The strategy a job of `world_size` ranks uses: `--strategy` (or
/// RANKTUNE_STRATEGY) when given; otherwise ranks agree by default —
/// `parallel` for more than one rank (see docs/strategy.md for why), and
/// `independent` for one rank, which has nobody to agree with.
fn strategy_for(args: &TuneArgs, world_size: u32) -> Strategy {
    args.strategy.unwrap_or(if world_size > 1 { Strategy::Parallel } else { Strategy::Independent })
}

/// The largest token bucket to tune.
fn max_tokens(args: &TuneArgs) -> u64 {
    args.max_tokens.unwrap_or(if args.quick { QUICK_MAX_TOKENS } else { DEFAULT_MAX_TOKENS })
}

/// Largest `--max-tokens`: the biggest bucket's synthetic inputs must fit
/// in memory (65,536 rows of 4,096 floats is 1 GiB).
const MAX_TOKENS_LIMIT: u64 = 1 << 16;

/// Largest f32 weight of one `--model` layer on one rank (1 GiB, the same
/// memory bound as `--max-tokens`).
const MODEL_WEIGHT_LIMIT: u64 = 1 << 30;

/// Most local rank processes `--ranks` starts.
const MAX_LOCAL_RANKS: u32 = 1024;
