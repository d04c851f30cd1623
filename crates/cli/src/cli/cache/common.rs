//! What several `cache` subcommands share: the `--format` flag, reading a
//! source cache with its warnings logged, opening a store the same way
//! everywhere, and a few ways of printing cache values. Subcommand modules
//! use this one and never each other.

use anyhow::Context;
use ranktune_cache::{read_source, FileStore, Source, SourceFormat, WonBy};
use std::path::Path;
use tracing::warn;

/// Source file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Decide from the file's name and shape (the import says which).
    Auto,
    /// A ranktune cache file.
    Ranktune,
    /// A TensorRT-LLM autotuner cache file.
    Trtllm,
    /// vLLM/SGLang fused-MoE config files (a file or a folder of them).
    VllmMoe,
    /// A FlashInfer autotuner cache file.
    Flashinfer,
}

impl Format {
    /// The format to read as; `None` to detect it.
    fn source_format(self) -> Option<SourceFormat> {
        match self {
            Format::Auto => None,
            Format::Ranktune => Some(SourceFormat::Ranktune),
            Format::Trtllm => Some(SourceFormat::Trtllm),
            Format::VllmMoe => Some(SourceFormat::VllmMoe),
            Format::Flashinfer => Some(SourceFormat::Flashinfer),
        }
    }
}

/// Reads one cache file in the given (or detected) format, logging each
/// warning (bad entries skipped, an empty file). A file that is not JSON is
/// an error and is left exactly as it is.
pub(super) fn load_source(path: &Path, format: Format) -> anyhow::Result<Source> {
    let source = read_source(path, format.source_format())?;
    for w in &source.warnings {
        warn!("{w}");
    }
    Ok(source)
}

/// True when the file at `path` holds nothing but blanks (0 bytes
/// included): the store reads it as an empty cache, but people should hear
/// that it is empty, not that it is a healthy cache.
pub(super) fn is_empty_file(path: &Path) -> bool {
    ranktune_cache::read_cache_bytes(path).is_ok_and(|b| b.iter().all(u8::is_ascii_whitespace))
}

/// The store for `path`, configured from the environment the same way for
/// every subcommand: a malformed `RANKTUNE_LOCK_TIMEOUT` is an error.
pub(super) fn open_store(path: &Path) -> anyhow::Result<FileStore> {
    FileStore::from_env(path).with_context(|| format!("cannot open {}", path.display()))
}

/// The rule that decided a conflict, in words.
pub(super) fn won_by_text(w: WonBy) -> &'static str {
    match w {
        WonBy::Newer => "newer",
        WonBy::Faster => "same age, faster",
        WonBy::Earlier => "same age and time, earlier input",
    }
}

/// `64x64,64`: a bucket as people read it, the same label `tune` prints
/// (see `ranktune_cache::bucket_label`).
pub(super) fn bucket_text(bucket: &[Vec<u64>]) -> String {
    ranktune_cache::bucket_label(bucket)
}

/// A tactic in at most `max` characters, the same label `tune` prints (see
/// `ranktune_cache::tactic_label`).
pub(super) fn tactic_text(t: &serde_json::Value, max: usize) -> String {
    crate::cli::table::clip(&ranktune_cache::tactic_label(t), max)
}

/// True when `a` and `b` name the same file once resolved: the same path,
/// a symlink to it, or a hard link (same device and inode). False when
/// either does not exist.
pub(super) fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    }
}
