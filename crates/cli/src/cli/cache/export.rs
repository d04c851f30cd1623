//! `ranktune cache export CACHE -o OUT --format trtllm|vllm-moe|flashinfer|triton`:
//! write a cache in TensorRT-LLM's or FlashInfer's format (one file), its
//! fused-MoE configs as vLLM/SGLang config files (OUT is a folder, one file
//! per expert count, N, device, dtype and block shape), or its Triton
//! entries as Triton autotune files (OUT is a folder laid out like Triton's
//! cache, `<hash>/<kernel>.autotune.json`). The output is published like the cache file
//! itself, through `ranktune_core::atomic_file` (exclusive temp file in the
//! same directory, the old file's permissions, fsync, rename, fsync of the
//! directory; never over a device or FIFO), and an existing OUT is only
//! replaced with --force. The cache itself is only read.

use super::common::{exists, export_formats, location, open_store, same_file};
use crate::cli::ExitCode;
use anyhow::{bail, Context, Result};
use ranktune_formats::{ExportError, Format, Layout};
use std::path::PathBuf;
use tracing::warn;

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The cache to export: a file, or `redis://host[:port][/db][?prefix=NAME]`.
    pub cache: PathBuf,
    /// Where to write.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Output format.
    #[arg(long, value_parser = export_formats(), default_value = "trtllm")]
    pub format: &'static dyn Format,
    /// Replace OUT if it exists (with vllm-moe and triton: files of the same
    /// name in OUT).
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
    let format = args.format;
    let loaded = open_store(&loc)?.inspect().with_context(|| format!("reading {loc}"))?;
    for w in &loaded.warnings {
        warn!("{loc}: {w}");
    }
    let exported = ranktune_formats::export(&loaded.data, format)?;
    for w in &exported.warnings {
        warn!("{w}");
    }
    match ranktune_formats::write(&args.output, format, &exported, args.force) {
        Ok(_) => {}
        Err(e @ ExportError::Exists(_)) => bail!("{}", e.with_force_hint("--force")),
        Err(ExportError::Nothing { lacks, format }) => {
            bail!("{} {lacks}; nothing to export as {format}", args.cache.display())
        }
        Err(e) => return Err(e).with_context(|| format!("writing {}", args.output.display())),
    }
    let left_out = if exported.skipped > 0 {
        format!("; {} left out, see warnings", exported.skipped)
    } else {
        String::new()
    };
    if let Layout::Folder { .. } = format.layout() {
        println!(
            "exported {} entries to {} files in {} ({}){left_out}",
            exported.written,
            exported.files.len(),
            args.output.display(),
            format.name(),
        );
    } else {
        println!(
            "exported {} entries to {} ({}){left_out}",
            exported.written,
            args.output.display(),
            format.name()
        );
    }
    Ok(ExitCode::SUCCESS)
}
