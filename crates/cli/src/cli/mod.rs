//! Command-line front end: parses arguments, sets up logging, dispatches to
//! one module per subcommand group, and turns errors into messages with
//! context. It owns presentation (tables, `--json`, progress bars) and must
//! never implement library behaviour itself.

mod cache;
mod code;
pub mod sys;
mod table;
mod trace;
mod tune;

use clap::{Parser, Subcommand};
pub use code::ExitCode;
use std::io::{IsTerminal, Write};

/// Autotuning with one shared, crash-safe tuning cache and per-rank
/// profiling traces for multi-rank jobs.
#[derive(Debug, Parser)]
#[command(name = "ranktune", version, about, long_about = None)]
struct Cli {
    /// More log output (-v info, -vv debug). `RANKTUNE_LOG` sets a filter directly.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, display_order = 1000)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Tune the built-in CPU kernels into the shared cache (the main job).
    #[command(after_help = "Examples:
  ranktune tune --ranks 2                 # 2 local ranks into ./ranktune-cache.json
  ranktune tune --quick --ops gemm        # small shapes: a few seconds
  mpirun -n 4 ranktune tune --cache /shared/tune.json --trace traces/
  ranktune tune --ranks 4 --strategy merge --json

  # A real model's GEMMs; --quick stops at 64 tokens (about 30 s for SmolLM2
  # on one rank), without it every bucket up to 1024 tokens is tuned:
  ranktune tune --quick --model examples/models/smollm2-135m.json
  ranktune tune --quick --model examples/models/mixtral-8x7b.json --tp 8")]
    Tune(tune::TuneArgs),
    /// Inspect, check, compare, merge, prune, import and export tuning caches.
    #[command(subcommand)]
    Cache(cache::CacheCommand),
    /// Merge and summarize per-rank profiling traces.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
}

/// Logs go to stderr through a filtered `fmt` layer; the trace layer sees
/// ranktune's spans at every level and records them only while a trace
/// session is active (`ranktune tune --trace`), so the log filter never hides
/// spans from the trace.
fn init_logging(verbose: u8) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;

    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = match std::env::var("RANKTUNE_LOG") {
        Ok(s) if !s.trim().is_empty() => {
            tracing_subscriber::EnvFilter::try_new(&s).unwrap_or_else(|e| {
                eprintln!(
                    "warning: RANKTUNE_LOG={s:?} is not a log filter ({e}); using {default:?}. \
                     Examples: info, ranktune=debug"
                );
                tracing_subscriber::EnvFilter::new(default)
            })
        }
        Ok(_) | Err(std::env::VarError::NotPresent) => tracing_subscriber::EnvFilter::new(default),
        Err(std::env::VarError::NotUnicode(_)) => {
            eprintln!("warning: RANKTUNE_LOG is not valid UTF-8; using {default:?}");
            tracing_subscriber::EnvFilter::new(default)
        }
    };
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .event_format(Plain)
        .with_filter(filter);
    let traces = ranktune_trace::layer()
        .with_filter(Targets::new().with_target("ranktune", LevelFilter::TRACE));
    let _ = tracing_subscriber::registry().with(logs).with(traces).try_init();
}

/// Log lines in the style of the CLI's own messages (`warning: …`,
/// `error: …`), so a warning from the library and one the CLI prints read
/// the same: one word for the level, then the message and its fields.
struct Plain;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Plain
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let word = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            tracing::Level::INFO => "info",
            tracing::Level::DEBUG => "debug",
            tracing::Level::TRACE => "trace",
        };
        write!(writer, "{word}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Parses a count flag (`--max-tokens`, `--ranks`, `--rank`). Flags that use
/// it also set `allow_negative_numbers`, so `-5` reaches this parser and
/// gets this message instead of clap's "unexpected argument '-5'".
pub(crate) fn count<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!("{s} is negative; give a whole number of at least 0"));
    }
    s.trim().parse().map_err(|_| format!("{s:?} is not a whole number (e.g. 4)"))
}

/// The executable that starts `tune --ranks N`'s rank processes, when it
/// is not this process's own (`std::env::current_exe`): the Python
/// package's `ranktune` script runs the command inside Python.
static RANK_EXECUTABLE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// The executable rank processes are started with.
pub(crate) fn rank_executable() -> std::io::Result<std::path::PathBuf> {
    match RANK_EXECUTABLE.get() {
        Some(p) => Ok(p.clone()),
        None => std::env::current_exe(),
    }
}

/// Runs the CLI on `args` (the program name first, as `std::env::args_os`)
/// and returns its exit status; `rank_exe` starts the ranks of `tune --ranks`
/// instead of this process's executable. `--help`, `--version` and argument
/// errors print and end the process, as clap does.
pub fn run<I, T>(args: I, rank_exe: Option<std::path::PathBuf>) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    if let Some(exe) = rank_exe {
        let _ = RANK_EXECUTABLE.set(exe);
    }
    dispatch(Cli::parse_from(args))
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> ExitCode {
    dispatch(Cli::parse())
}

/// The `-v` count this command was started with (0 before `dispatch`).
static VERBOSITY: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// How many `-v` this command was given: `tune --ranks` passes them on to
/// its ranks.
pub(crate) fn verbosity() -> u8 {
    VERBOSITY.load(std::sync::atomic::Ordering::Relaxed)
}

fn dispatch(cli: Cli) -> ExitCode {
    VERBOSITY.store(cli.verbose, std::sync::atomic::Ordering::Relaxed);
    init_logging(cli.verbose);
    let result = match cli.command {
        Command::Tune(args) => tune::run(args),
        Command::Cache(cmd) => cache::run(cmd),
        Command::Trace(cmd) => trace::run(cmd),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // Not eprintln!: a rank whose launcher (and stderr) is gone
            // must still exit with its status, not panic.
            let _ = writeln!(std::io::stderr(), "error: {err:#}");
            ExitCode::from(2)
        }
    }
}
