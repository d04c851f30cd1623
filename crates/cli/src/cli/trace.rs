//! `ranktune trace merge|summary`: argument parsing and presentation for
//! trace analysis. The work itself is in `ranktune_trace_analyze`; this
//! module only resolves inputs, calls it, prints warnings, tables or JSON.
use crate::cli::ExitCode;
use anyhow::Context;
use ranktune_trace_analyze as analyze;
use std::path::PathBuf;

/// Trace analysis subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TraceCommand {
    /// Merge per-rank traces onto one timeline (one process group per rank).
    #[command(after_help = "Examples:
  ranktune trace merge traces/ -o merged.json     # open in https://ui.perfetto.dev
  ranktune trace merge traces/ -o merged.pftrace  # Perfetto's format: multi-GB jobs
  ranktune trace merge traces/ -o merged.json.gz --align first-step")]
    Merge(MergeArgs),
    /// Per-rank step times and top spans, and which rank is slow and where.
    #[command(after_help = "Examples:
  ranktune trace summary traces/                # per-rank steps and the straggler
  ranktune trace summary traces/ --html r.html  # with charts
  ranktune trace summary traces/ --straggler-threshold 10
  ranktune trace summary traces/ --json")]
    Summary(SummaryArgs),
}

/// Inputs shared by both subcommands.
#[derive(Debug, clap::Args)]
pub struct InputArgs {
    /// Trace files, directories (their *.json and *.json.gz), globs, or the
    /// path template the job was given (`--trace traces` finds traces_0.json, …).
    #[arg(required = true, value_name = "INPUTS")]
    inputs: Vec<String>,
    /// Set a file's rank (FILE=N, repeatable); overrides distributedInfo and the name.
    #[arg(long = "rank", value_name = "FILE=N", value_parser = analyze::parse_rank_arg)]
    ranks: Vec<(PathBuf, u32)>,
    /// Keep files of every run; by default only the newest complete run is
    /// used and the files of other runs are named in a warning.
    #[arg(long)]
    all_runs: bool,
    /// Threads (default: the cores). 1 does everything on one thread; N ≥ 2
    /// reads N files at once, one per worker thread (merge: while the main
    /// thread writes). The output is the same for any number.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
}

impl InputArgs {
    fn jobs(&self) -> usize {
        self.jobs.map_or(0, |j| j as usize)
    }
}

/// `trace merge` arguments.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output file: .json or .json.gz (Chrome trace), .pftrace or
    /// .perfetto-trace (Perfetto's protobuf format).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Clock alignment: `absolute` keeps wall-clock times; `first-step`
    /// shifts each rank so its first ProfilerStep starts at the same instant.
    #[arg(long, value_enum, default_value = "absolute")]
    align: AlignArg,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum AlignArg {
    Absolute,
    FirstStep,
}

/// `trace summary` arguments.
#[derive(Debug, clap::Args)]
pub struct SummaryArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Print JSON for scripts (schema in docs/trace-analysis.md).
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML report with charts.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Spans listed per rank.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// How much slower than the other ranks, in percent, a rank must be to
    /// be named a straggler (by the wait it caused at collectives, as a share
    /// of a step; else by time outside collectives, step or busy time).
    #[arg(long, value_name = "PERCENT", default_value = "5", value_parser = parse_percent)]
    straggler_threshold: f64,
}

/// A percentage above 0 and at most 1000, returned as a fraction.
fn parse_percent(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a number: give a percentage such as 5 or 2.5"))?;
    if !(p > 0.0 && p <= 1000.0) {
        return Err(format!("{s}% is out of range: give a percentage above 0 and at most 1000"));
    }
    Ok(p / 100.0)
}

/// An input that names nothing on disk may be the path template a job was
/// given (`--trace traces` wrote `traces_0.json`, …): it stands for the
/// files the recorder's path rule made from it.
fn expand_templates(inputs: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::with_capacity(inputs.len());
    for input in inputs {
        let path = std::path::Path::new(input);
        if path.exists() || input.contains(['*', '?', '[']) {
            out.push(input.clone());
            continue;
        }
        let files = ranktune_trace::rank_files(path).unwrap_or_default();
        if files.is_empty() {
            let example =
                ranktune_trace::rank_path(path, &ranktune_core::rank::RankInfo::SINGLE, 0, "host")
                    .map(|p| format!(" (such as {})", p.display()))
                    .unwrap_or_default();
            anyhow::bail!(
                "{input}: no such file or directory, and no trace files written for the \
                 template {input}{example}; give the trace files, their directory, a glob, or \
                 the --trace path the job was given"
            );
        }
        tracing::info!("{input}: the trace template's {} files", files.len());
        out.extend(files.into_iter().map(|f| f.display().to_string()));
    }
    Ok(out)
}

fn resolve(args: &InputArgs) -> anyhow::Result<analyze::Resolved> {
    let inputs = expand_templates(&args.inputs)?;
    let opts = analyze::ResolveOptions { all_runs: args.all_runs };
    let res =
        analyze::resolve_with(&inputs, &args.ranks, &opts).context("reading the trace inputs")?;
    for w in &res.warnings {
        tracing::warn!("{w}");
    }
    for i in &res.inputs {
        tracing::info!("rank {} ← {} ({})", i.rank, i.path.display(), i.source.describe());
    }
    Ok(res)
}

/// Runs a `trace` subcommand.
pub fn run(cmd: TraceCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        TraceCommand::Merge(a) => {
            let res = resolve(&a.input)?;
            if analyze::OutputFormat::named(&a.output).is_none() {
                anyhow::bail!(
                    "-o {}: the name does not say which format to write; end it in {}",
                    a.output.display(),
                    analyze::OutputFormat::EXTENSIONS
                );
            }
            let opts = analyze::MergeOptions {
                align: match a.align {
                    AlignArg::Absolute => analyze::Align::Absolute,
                    AlignArg::FirstStep => analyze::Align::FirstStep,
                },
                jobs: a.input.jobs(),
                ..Default::default()
            };
            let started = std::time::Instant::now();
            let report = analyze::merge(&res.inputs, &a.output, &opts)
                .with_context(|| format!("merging into {}", a.output.display()))?;
            for w in &report.warnings {
                tracing::warn!("{w}");
            }
            let secs = started.elapsed().as_secs_f64();
            println!(
                "merged {} ranks, {} events ({:.1} MB) into {} in {:.2} s ({:.0} MB/s); base {} ns",
                report.ranks.len(),
                report.events,
                report.bytes_in as f64 / 1e6,
                a.output.display(),
                secs,
                report.bytes_in as f64 / 1e6 / secs.max(1e-9),
                report.base_ns
            );
            for r in &report.ranks {
                let pids: Vec<String> = r.pids.iter().map(|(o, n)| format!("{o}→{n}")).collect();
                println!(
                    "  rank {}: {} events, shift {} ns, pids {}  ({})",
                    r.rank,
                    r.events,
                    r.shift_ns,
                    pids.join(" "),
                    r.path.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        TraceCommand::Summary(a) => {
            let res = resolve(&a.input)?;
            let s = analyze::summarize(
                &res.inputs,
                &analyze::SummaryOptions {
                    top: a.top,
                    jobs: a.input.jobs(),
                    straggler_threshold: a.straggler_threshold,
                },
            )
            .context("summarizing the traces")?;
            for w in &s.warnings {
                tracing::warn!("{w}");
            }
            if let Some(path) = &a.html {
                std::fs::write(path, s.to_html())
                    .with_context(|| format!("writing the HTML report {}", path.display()))?;
            }
            if a.json {
                let doc = s.document(&res).to_json();
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                print!("{}", s.to_text());
                if let Some(path) = &a.html {
                    println!("\nHTML report: {}", path.display());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
