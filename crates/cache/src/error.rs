//! Errors of the cache stores.

use std::path::{Path, PathBuf};

/// The one adapter from an OS error to [`CacheError::Io`], for `map_err`:
/// `.map_err(io("reading", path))`.
pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CacheError {
    let path = path.to_path_buf();
    move |source| CacheError::Io { action, path, source }
}

/// Why a cache operation failed.
///
/// A failed publish of `ranktune_core::atomic_file` converts into one
/// (`CacheError::from`), in the store's words: whoever writes a file next to
/// caches (an export, say) reports failures the way the store does.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// An I/O operation failed. The OS error is the [`source`] (not part of
    /// this message, so that a report that walks the chain, like anyhow's
    /// `{:#}`, names it once).
    ///
    /// [`source`]: std::error::Error::source
    #[error("{action} {path}")]
    Io {
        /// What was being done ("reading", "locking", …).
        action: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The lock could not be taken in time.
    #[error("timed out after {waited_secs:.1}s waiting for lock on {path} (held by {holder}); raise RANKTUNE_LOCK_TIMEOUT or find the stuck process")]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// Seconds waited.
        waited_secs: f64,
        /// Who holds it, as far as known.
        holder: String,
    },
    /// The file does not parse (truncated, not JSON, not UTF-8, …). `load`
    /// sets such a file aside instead; read-only inspection reports it.
    #[error("{path} does not parse: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong, with position where known.
        reason: String,
    },
    /// A well-formed file this build must not read or rewrite: another
    /// format, a future major version, or a TensorRT-LLM cache.
    #[error("{path}: {reason}")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// Why, and what to do instead.
        reason: String,
    },
    /// A Redis server could not be used: unreachable, too slow, refused the
    /// credentials, or answered what a Redis server does not. The location
    /// has its password redacted; the reason says what to do.
    #[error("{action} {location}: {reason}")]
    Redis {
        /// What was being done ("loading", "saving into", …).
        action: &'static str,
        /// The cache's location, password redacted.
        location: String,
        /// What went wrong and what to do.
        reason: String,
    },
    /// Anything else, with a message that names the problem and the fix.
    #[error("{0}")]
    Invalid(String),
}

/// Where a parse error's advice names the file it is about; replaced by the
/// file's path when the error meets its path ([`CacheError::unsupported`]).
pub(crate) const THIS_FILE: &str = "{THIS_FILE}";

impl CacheError {
    /// [`CacheError::Unsupported`] for `path`, its advice naming the file.
    pub(crate) fn unsupported(path: &std::path::Path, reason: String) -> CacheError {
        let shown = path.display().to_string();
        let shown = if shown.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
            format!("'{}'", shown.replace('\'', "'\\''"))
        } else {
            shown
        };
        CacheError::Unsupported { path: path.into(), reason: reason.replace(THIS_FILE, &shown) }
    }
}
