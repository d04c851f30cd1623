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
use ranktune_cache::trtllm::export;
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
    let to_folder = matches!(args.format, ExportFormat::VllmMoe | ExportFormat::Triton);
    if !to_folder {
        ranktune_cache::check_parent_dir(&args.output)?;
        if args.output.exists() && !args.force {
            bail!("{} exists; pass --force to replace it", args.output.display());
        }
    }
    let loaded = open_store(&loc)?.inspect().with_context(|| format!("reading {loc}"))?;
    for w in &loaded.warnings {
        warn!("{loc}: {w}");
    }
    if args.format == ExportFormat::VllmMoe {
        let e = ranktune_cache::vllm_moe::export(&loaded.data);
        let folder = Folder {
            files: e.files,
            written: e.written,
            skipped: e.skipped,
            warnings: e.warnings,
            format: "vllm-moe",
            none: format!(
                "holds no fused-MoE configs (op {}, runner {})",
                ranktune_cache::vllm_moe::OP,
                ranktune_cache::vllm_moe::RUNNER
            ),
        };
        return export_folder(&args, folder);
    }
    if args.format == ExportFormat::Triton {
        let e = ranktune_cache::triton::export(&loaded.data);
        let folder = Folder {
            files: e.files,
            written: e.written,
            skipped: e.skipped,
            warnings: e.warnings,
            format: "triton",
            none: format!(
                "holds no Triton autotune entries (runner {}, checksum {})",
                ranktune_cache::triton::RUNNER,
                ranktune_cache::triton::CHECKSUM
            ),
        };
        return export_folder(&args, folder);
    }
    let (text, written, skipped, warnings) = match args.format {
        ExportFormat::Flashinfer => {
            let e = ranktune_cache::flashinfer::export(&loaded.data);
            (e.text, e.written, e.skipped, e.warnings)
        }
        _ => {
            let e = export(&loaded.data);
            (e.text, e.written, e.skipped, e.warnings)
        }
    };
    for w in &warnings {
        warn!("{w}");
    }
    Publish::new(&args.output)
        .durable()
        .keep_permissions()
        .regular_target_only()
        .bytes(text.as_bytes())
        .map_err(CacheError::from)
        .with_context(|| format!("writing {}", args.output.display()))?;
    println!(
        "exported {} entries to {} ({}){}",
        written,
        args.output.display(),
        if args.format == ExportFormat::Flashinfer { "flashinfer" } else { "trtllm" },
        if skipped > 0 { format!("; {} left out, see warnings", skipped) } else { String::new() }
    );
    Ok(ExitCode::SUCCESS)
}

/// An export that is a folder of files.
struct Folder {
    /// (path relative to the folder, content).
    files: Vec<(String, String)>,
    written: usize,
    skipped: usize,
    warnings: Vec<String>,
    /// The format's name.
    format: &'static str,
    /// What the cache lacks when there is nothing to write, in words.
    none: String,
}

/// Writes an export's files into the folder `args.output` (created if
/// missing, and the folders inside it). Existing files of the same names
/// are only replaced with --force; nothing is written unless every file
/// can be.
fn export_folder(args: &ExportArgs, exported: Folder) -> Result<ExitCode> {
    for w in &exported.warnings {
        warn!("{w}");
    }
    if exported.files.is_empty() {
        bail!(
            "{} {}; nothing to export as {}",
            args.cache.display(),
            exported.none,
            exported.format
        );
    }
    if args.output.exists() && !args.output.is_dir() {
        bail!(
            "{} is not a folder; {} writes its files into a folder",
            args.output.display(),
            exported.format
        );
    }
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let paths: Vec<PathBuf> =
        exported.files.iter().map(|(name, _)| args.output.join(name)).collect();
    if !args.force {
        let existing: Vec<String> =
            paths.iter().filter(|p| p.exists()).map(|p| p.display().to_string()).collect();
        if !existing.is_empty() {
            bail!("{} exist; pass --force to replace them", existing.join(", "));
        }
    }
    for (path, (_, text)) in paths.iter().zip(&exported.files) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        Publish::new(path)
            .durable()
            .keep_permissions()
            .regular_target_only()
            .bytes(text.as_bytes())
            .map_err(CacheError::from)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    println!(
        "exported {} entries to {} files in {} ({}){}",
        exported.written,
        exported.files.len(),
        args.output.display(),
        exported.format,
        if exported.skipped > 0 {
            format!("; {} left out, see warnings", exported.skipped)
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}
