//! Writing a cache in another tuner's format, for every front end (the
//! CLI's `cache export`, Python's `Cache.export`): which formats there are,
//! whether each is one file or a folder of files, and publishing the result.
//!
//! This module owns the output rules: each file is published atomically
//! (`ranktune_core::atomic_file`: exclusive temp file beside it, the old
//! file's permissions, fsync, rename; never over a device or FIFO); an
//! existing output is only replaced when the caller says so; a folder
//! export checks every file before writing any. It never decides how an
//! entry looks in a format (each format's module does) and never prints:
//! warnings are returned.
//!
//! ```
//! use ranktune_cache::{export, CacheData, ExportFormat};
//! let e = export::export(&CacheData::default(), ExportFormat::Trtllm);
//! assert_eq!((e.written, e.files.len()), (0, 1)); // one (empty) document
//! ```

use crate::{flashinfer, triton, trtllm, vllm_moe, CacheData, CacheError};
use ranktune_core::atomic_file::Publish;
use std::path::{Path, PathBuf};

/// The formats a cache can be exported in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportFormat {
    /// TensorRT-LLM's autotuner cache (one JSON document).
    Trtllm,
    /// FlashInfer's autotuner cache (one JSON document).
    Flashinfer,
    /// vLLM/SGLang fused-MoE config files (a folder, one file per expert
    /// count, N, device, dtype and block shape).
    VllmMoe,
    /// Triton autotune files (a folder laid out like Triton's cache,
    /// `<hash>/<kernel>.autotune.json`).
    Triton,
}

impl ExportFormat {
    /// Every format.
    pub const ALL: [ExportFormat; 4] = [
        ExportFormat::Trtllm,
        ExportFormat::Flashinfer,
        ExportFormat::VllmMoe,
        ExportFormat::Triton,
    ];

    /// The format's name, as `--format` and Python's `format=` take it.
    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Trtllm => "trtllm",
            ExportFormat::Flashinfer => "flashinfer",
            ExportFormat::VllmMoe => "vllm-moe",
            ExportFormat::Triton => "triton",
        }
    }

    /// The format called `name`, if any.
    pub fn parse(name: &str) -> Option<ExportFormat> {
        ExportFormat::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether the output is a folder of files (else one file).
    pub fn is_folder(self) -> bool {
        matches!(self, ExportFormat::VllmMoe | ExportFormat::Triton)
    }

    /// What a cache lacks when a folder format has nothing to write.
    fn lacks(self) -> String {
        match self {
            ExportFormat::VllmMoe => format!(
                "holds no fused-MoE configs (op {}, runner {})",
                vllm_moe::OP,
                vllm_moe::RUNNER
            ),
            ExportFormat::Triton => format!(
                "holds no Triton autotune entries (runner {}, checksum {})",
                triton::RUNNER,
                triton::CHECKSUM
            ),
            _ => "holds nothing to export".into(),
        }
    }
}

/// A cache in an export format, not written yet.
#[derive(Clone, Debug)]
pub struct Export {
    /// The format.
    pub format: ExportFormat,
    /// (path relative to the output folder, content); for a one-file
    /// format, one file whose path is empty (the output itself).
    pub files: Vec<(String, String)>,
    /// Entries written.
    pub written: usize,
    /// Entries left out (see `warnings`).
    pub skipped: usize,
    /// One line per entry left out or guess made.
    pub warnings: Vec<String>,
}

/// What a converter produces: files (for a one-file format, one whose path
/// is empty) and what it wrote and left out. The vLLM-MoE and Triton
/// converters return it as it is.
#[derive(Clone, Debug, Default)]
pub struct Converted {
    /// (path relative to the output folder, content), sorted by path.
    pub files: Vec<(String, String)>,
    /// One line per entry left out.
    pub warnings: Vec<String>,
    /// Entries written.
    pub written: usize,
    /// Entries left out.
    pub skipped: usize,
}

/// Converts `data` to `format` (each format's own converter, which keeps
/// an imported file's exact text where the entries are unchanged).
pub fn export(data: &CacheData, format: ExportFormat) -> Export {
    let one = |text: String, written, skipped, warnings| Converted {
        files: vec![(String::new(), text)],
        warnings,
        written,
        skipped,
    };
    let Converted { files, warnings, written, skipped } = match format {
        ExportFormat::Trtllm => {
            let e = trtllm::export(data);
            one(e.text, e.written, e.skipped, e.warnings)
        }
        ExportFormat::Flashinfer => {
            let e = flashinfer::export(data);
            one(e.text, e.written, e.skipped, e.warnings)
        }
        ExportFormat::VllmMoe => vllm_moe::export(data),
        ExportFormat::Triton => triton::export(data),
    };
    Export { format, files, written, skipped, warnings }
}

/// Why an export was not written. The front end adds how to replace
/// existing files (`--force`, `force=True`) to [`ExportError::Exists`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// Files of the output exist and replacing was not asked for.
    #[error("{} {}", .0.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "), if .0.len() == 1 { "exists" } else { "exist" })]
    Exists(Vec<PathBuf>),
    /// A folder format's output is a file.
    #[error("{path} is not a folder; {format} writes its files into a folder")]
    NotAFolder {
        /// The output.
        path: PathBuf,
        /// The format's name.
        format: &'static str,
    },
    /// A folder format found nothing to write.
    #[error("the cache {lacks}; nothing to export as {format}")]
    Nothing {
        /// What the cache lacks, in words.
        lacks: String,
        /// The format's name.
        format: &'static str,
    },
    /// Writing failed.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

impl ExportError {
    /// The message with the way to replace existing files added where that
    /// is the problem: `how` is the front end's switch (`--force`,
    /// `force=True`).
    pub fn with_force_hint(&self, how: &str) -> String {
        match self {
            ExportError::Exists(paths) => format!(
                "{self}; pass {how} to replace {}",
                if paths.len() == 1 { "it" } else { "them" }
            ),
            _ => self.to_string(),
        }
    }
}

/// Writes `e` to `out` (a file, or a folder for a folder format: created
/// if missing, as are the folders inside it). Existing files are replaced
/// only with `force`; nothing is written unless every file may be.
/// Returns the paths written.
pub fn write(out: &Path, e: &Export, force: bool) -> Result<Vec<PathBuf>, ExportError> {
    let paths: Vec<PathBuf> = if e.format.is_folder() {
        if e.files.is_empty() {
            return Err(ExportError::Nothing { lacks: e.format.lacks(), format: e.format.name() });
        }
        if out.exists() && !out.is_dir() {
            return Err(ExportError::NotAFolder {
                path: out.to_path_buf(),
                format: e.format.name(),
            });
        }
        e.files.iter().map(|(name, _)| out.join(name)).collect()
    } else {
        crate::check_parent_dir(out)?;
        vec![out.to_path_buf()]
    };
    if !force {
        let existing: Vec<PathBuf> = paths.iter().filter(|p| p.exists()).cloned().collect();
        if !existing.is_empty() {
            return Err(ExportError::Exists(existing));
        }
    }
    for (path, (_, text)) in paths.iter().zip(&e.files) {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| CacheError::Io {
                action: "creating",
                path: parent.to_path_buf(),
                source,
            })?;
        }
        Publish::new(path)
            .durable()
            .keep_permissions()
            .regular_target_only()
            .bytes(text.as_bytes())
            .map_err(CacheError::from)?;
    }
    Ok(paths)
}
