//! Errors of the cache stores.

use std::path::PathBuf;

/// Why a cache operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// An I/O operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("reading", "locking", …).
        action: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The lock could not be taken in time.
    #[error("timed out after {waited_secs:.0}s waiting for lock on {path} (held by {holder}); raise RANKTUNE_LOCK_TIMEOUT or find the stuck process")]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// Seconds waited.
        waited_secs: f64,
        /// Who holds it, as far as known.
        holder: String,
    },
    /// Anything else, with a message that names the problem and the fix.
    #[error("{0}")]
    Invalid(String),
}
