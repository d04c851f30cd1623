//! The read caps every store applies: the most bytes one load may read,
//! from a file (`file/read.rs`) or from a server (`redis_store`), and the
//! most entries and sections a server's cache may list.
//!
//! Owns the limits and their environment variables; it reads nothing else
//! and must never touch a store.

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
    limit(MAX_FILE_BYTES_ENV, 0, "bytes", DEFAULT_MAX_FILE_BYTES)
}

/// The whole number in `name` (at least `least`, in `unit`), or `default`
/// when it is unset or blank: the one setting rule
/// ([`ranktune_core::setting`]).
fn limit(name: &str, least: u64, unit: &str, default: u64) -> Result<u64, CacheError> {
    use ranktune_core::setting::{from_env, process_env, whole};
    let example = default.to_string();
    from_env(process_env, name, |t, s| whole(t, s, least..=u64::MAX, unit, &example))
        .map(|v| v.unwrap_or(default))
        .map_err(|e| CacheError::Invalid(e.to_string()))
}

/// Environment variable that sets the most entries one section of a cache
/// may hold when it is read (default [`DEFAULT_MAX_SECTION_ENTRIES`]).
/// Bytes alone do not bound a load: a million empty fields are few bytes
/// and much memory, so a store refuses a section with more entries than
/// this before it reads any of them.
pub const MAX_SECTION_ENTRIES_ENV: &str = "RANKTUNE_CACHE_MAX_ENTRIES";

/// The most entries one section may hold unless told otherwise: ten
/// million, far beyond any tune (a model's cache holds thousands).
pub const DEFAULT_MAX_SECTION_ENTRIES: u64 = 10_000_000;

/// The most sections a store lists: the shared section and 65,536 ranks.
pub const MAX_SECTIONS: u64 = 65_537;

/// The bytes every stored entry counts toward the read cap beyond its own
/// text: about what holding one costs while it is read, so that the cap
/// bounds memory, not only text.
pub const ENTRY_OVERHEAD_BYTES: u64 = 64;

/// The entry limit from `RANKTUNE_CACHE_MAX_ENTRIES`, or
/// [`DEFAULT_MAX_SECTION_ENTRIES`] when unset; a malformed value is an error.
pub fn max_section_entries() -> Result<u64, CacheError> {
    limit(MAX_SECTION_ENTRIES_ENV, 1, "entries", DEFAULT_MAX_SECTION_ENTRIES)
}
