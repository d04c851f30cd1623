//! Writing a cache in a format, for every front end (the CLI's `cache
//! export`, Python's `Cache.export`): converting through the format's
//! [`Writer`](crate::Writer) and publishing the result, one file or a
//! folder of files as the format's [`Layout`] says.
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
//! use ranktune_cache::CacheData;
//! use ranktune_formats::{by_name, export};
//! let e = export(&CacheData::default(), by_name("trtllm").unwrap()).unwrap();
//! assert_eq!((e.written, e.files.len()), (0, 1)); // one (empty) document
//! ```

use crate::{Exported, Format, Layout};
use ranktune_cache::{CacheData, CacheError};
use ranktune_core::atomic_file::Publish;
use std::path::{Path, PathBuf};

/// Converts `data` to `format` (the format's own converter, which keeps
/// an imported file's exact text where the entries are unchanged).
pub fn export(data: &CacheData, format: &dyn Format) -> Result<Exported, ExportError> {
    let writer = format.writer().ok_or(ExportError::Unwritten { format: format.name() })?;
    Ok((writer.export)(data))
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
        lacks: &'static str,
        /// The format's name.
        format: &'static str,
    },
    /// The format is one ranktune reads but does not write.
    #[error("ranktune reads {format} files but does not write them")]
    Unwritten {
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

/// Writes `e`, an export in `format`, to `out` (a file, or a folder for
/// a folder format: created if missing, as are the folders inside it).
/// Existing files are replaced only with `force`; nothing is written
/// unless every file may be. Returns the paths written.
pub fn write(
    out: &Path,
    format: &dyn Format,
    e: &Exported,
    force: bool,
) -> Result<Vec<PathBuf>, ExportError> {
    let paths: Vec<PathBuf> = if let Layout::Folder { .. } = format.layout() {
        if e.files.is_empty() {
            let lacks = format.writer().map_or("holds nothing to export", |w| w.lacks);
            return Err(ExportError::Nothing { lacks, format: format.name() });
        }
        if out.exists() && !out.is_dir() {
            return Err(ExportError::NotAFolder { path: out.to_path_buf(), format: format.name() });
        }
        e.files.iter().map(|(name, _)| out.join(name)).collect()
    } else {
        ranktune_cache::check_parent_dir(out)?;
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
