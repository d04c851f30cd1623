//! `ranktune cache export CACHE -o OUT --format trtllm`: write a cache in
//! TensorRT-LLM's format. The output is written to a temporary file in the
//! same directory and renamed into place, and an existing OUT is only
//! replaced with --force. The cache itself is only read.

use anyhow::{bail, Context, Result};
use ranktune::cache::trtllm::convert::{export, to_json_text};
use ranktune::cache::FileStore;
use std::io::Write;
use std::path::{Path, PathBuf};
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
    /// The cache to export.
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
    if !args.cache.exists() {
        bail!("{} does not exist", args.cache.display());
    }
    if args.output.exists() && !args.force {
        bail!("{} exists; pass --force to replace it", args.output.display());
    }
    let loaded = FileStore::new(&args.cache)
        .inspect()
        .with_context(|| format!("reading {}", args.cache.display()))?;
    for w in &loaded.warnings {
        warn!("{}: {w}", args.cache.display());
    }
    let ExportFormat::Trtllm = args.format;
    let exported = export(&loaded.data);
    for w in &exported.warnings {
        warn!("{w}");
    }
    write_atomically(&args.output, to_json_text(&exported.doc).as_bytes())
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

/// Writes a new temporary file next to `path` (created exclusively, so never
/// through a symlink), syncs it and renames it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".{name}.tmp-{}-{nanos}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
