//! `ranktune cache export CACHE -o OUT --format trtllm`: write a cache in
//! TensorRT-LLM's format. The output is published like the cache file
//! itself, through `ranktune_core::atomic_file` (exclusive temp file in the
//! same directory, the old file's permissions, fsync, rename, fsync of the
//! directory; never over a device or FIFO), and an existing OUT is only
//! replaced with --force. The cache itself is only read.

use super::common::{exists, location, open_store, same_file};
use anyhow::{bail, Context, Result};
use ranktune_cache::trtllm::{export, to_json_text};
use ranktune_cache::CacheError;
use ranktune_core::atomic_file::Publish;
use std::path::PathBuf;
use std::process::ExitCode;
use tracing::warn;

/// Export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// TensorRT-LLM's autotuner cache (one JSON document).
    Trtllm,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The cache to export: a file, or redis://host[:port][/db][?prefix=NAME].
    pub cache: PathBuf,
    /// Where to write.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Trtllm)]
    pub format: ExportFormat,
    /// Replace OUT if it exists.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: ExportArgs) -> Result<ExitCode> {
    let loc = location(&args.cache)?;
    if !exists(&loc) || loc.as_path().is_some_and(|p| !p.exists()) {
        bail!("{loc} does not exist");
    }
    if loc.as_path().is_some() && same_file(&args.cache, &args.output) {
        bail!(
            "{} is the cache being exported (the same file{}); writing the export there would \
             replace the cache with another format. Choose another -o path",
            args.output.display(),
            if args.cache == args.output { "" } else { " through a link" }
        );
    }
    ranktune_cache::check_parent_dir(&args.output)?;
    if args.output.exists() && !args.force {
        bail!("{} exists; pass --force to replace it", args.output.display());
    }
    let loaded = open_store(&loc)?.inspect().with_context(|| format!("reading {loc}"))?;
    for w in &loaded.warnings {
        warn!("{loc}: {w}");
    }
    let ExportFormat::Trtllm = args.format;
    let exported = export(&loaded.data);
    for w in &exported.warnings {
        warn!("{w}");
    }
    Publish::new(&args.output)
        .durable()
        .keep_permissions()
        .regular_target_only()
        .bytes(to_json_text(&exported.doc).as_bytes())
        .map_err(CacheError::from)
        .with_context(|| format!("writing {}", args.output.display()))?;
    println!(
        "exported {} entries to {} (trtllm){}",
        exported.written,
        args.output.display(),
        if exported.skipped > 0 {
            format!("; {} left out, see warnings", exported.skipped)
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}
