//! The read cap every store applies: the most bytes one load may read,
//! from a file (`file/read.rs`) or from a server (`redis_store`).
//!
//! Owns the limit and its environment variable; it reads nothing else and
//! must never touch a store.

use crate::CacheError;

/// Environment variable that sets the largest cache file ranktune reads, in
/// bytes (default [`DEFAULT_MAX_FILE_BYTES`]).
pub const MAX_FILE_BYTES_ENV: &str = "RANKTUNE_CACHE_MAX_BYTES";

/// The largest cache file ranktune reads unless told otherwise: 1 GiB (a
/// cache with millions of entries is far smaller).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1 << 30;

/// The size limit from `RANKTUNE_CACHE_MAX_BYTES`, or
/// [`DEFAULT_MAX_FILE_BYTES`] when unset; a malformed value is an error.
pub fn max_file_bytes() -> Result<u64, CacheError> {
    match std::env::var(MAX_FILE_BYTES_ENV) {
        Err(_) => Ok(DEFAULT_MAX_FILE_BYTES),
        Ok(s) if s.trim().is_empty() => Ok(DEFAULT_MAX_FILE_BYTES),
        Ok(s) => s.trim().parse::<u64>().map_err(|_| {
            CacheError::Invalid(format!(
                "{MAX_FILE_BYTES_ENV}={s:?} is not a number of bytes; set it to e.g. {DEFAULT_MAX_FILE_BYTES}"
            ))
        }),
    }
}
