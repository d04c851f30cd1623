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

use super::common::{exists, location, open_store, same_file};
use anyhow::{bail, Context, Result};
use ranktune_cache::export::{self, ExportError};
use std::path::PathBuf;
use std::process::ExitCode;
use tracing::warn;

/// Export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// TensorRT-LLM's autotuner cache (one JSON document).
    Trtllm,
    /// vLLM/SGLang fused-MoE config files, into the folder OUT.
    VllmMoe,
    /// FlashInfer's autotuner cache (one JSON document).
    Flashinfer,
    /// Triton autotune files, into the folder OUT (`<hash>/<kernel>.autotune.json`).
    Triton,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The cache to export: a file, or `redis://host[:port][/db][?prefix=NAME]`.
    pub cache: PathBuf,
    /// Where to write.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Trtllm)]
    pub format: ExportFormat,
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
    let format = args.format.into();
    let loaded = open_store(&loc)?.inspect().with_context(|| format!("reading {loc}"))?;
    for w in &loaded.warnings {
        warn!("{loc}: {w}");
    }
    let exported = export::export(&loaded.data, format);
    for w in &exported.warnings {
        warn!("{w}");
    }
    match export::write(&args.output, &exported, args.force) {
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
    if format.is_folder() {
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

impl From<ExportFormat> for export::ExportFormat {
    fn from(f: ExportFormat) -> Self {
        match f {
            ExportFormat::Trtllm => export::ExportFormat::Trtllm,
            ExportFormat::VllmMoe => export::ExportFormat::VllmMoe,
            ExportFormat::Flashinfer => export::ExportFormat::Flashinfer,
            ExportFormat::Triton => export::ExportFormat::Triton,
        }
    }
}
