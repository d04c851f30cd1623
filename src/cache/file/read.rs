//! Reading cache and spool files safely: only regular files (never a
//! device, a FIFO or a socket, which could hang the reader or be replaced
//! by a save), and never more than a size limit, read without trusting the
//! size the file system reports for an allocation.
//!
//! This module owns the "what may be read as a cache" rule and the size
//! limit. It must never modify, move or lock anything.

use super::sys;
use crate::cache::error::io;
use crate::cache::CacheError;
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

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

/// What kind of thing `meta` describes, in words, when it is not a regular
/// file.
fn odd_kind(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_symlink() {
        Some("a symbolic link")
    } else {
        Some("not a regular file")
    }
}

/// An error unless `meta` (of `path`) is a regular file.
pub(crate) fn require_regular(path: &Path, meta: &Metadata) -> Result<(), CacheError> {
    match odd_kind(meta) {
        None => Ok(()),
        Some("a directory") => Err(CacheError::Invalid(format!(
            "{} is a directory; give the path of a cache file inside it, e.g. {}/tune.json",
            path.display(),
            path.display()
        ))),
        Some(kind) => Err(CacheError::Invalid(format!(
            "{} is {kind}, not a regular file; ranktune reads and writes caches only as regular \
             files, so give another path",
            path.display()
        ))),
    }
}

/// (device, inode) of a file: tells "still the file that was read".
pub(crate) type FileId = (u64, u64);

fn too_large(path: &Path, size: u64, limit: u64) -> CacheError {
    CacheError::Invalid(format!(
        "{} is {size} bytes, more than the {limit}-byte limit for cache files; it was left as it \
         is. If it really is a cache, raise {MAX_FILE_BYTES_ENV}; otherwise give another path",
        path.display()
    ))
}

/// The bytes of the regular file at `path` (symlinks followed) and its
/// (device, inode), or `None` when nothing is there. Refuses anything that
/// is not a regular file, and files over [`max_file_bytes`], before reading
/// a byte.
pub(crate) fn read_regular(path: &Path) -> Result<Option<(Vec<u8>, FileId)>, CacheError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("reading", path)(e)),
    };
    require_regular(path, &meta)?;
    let limit = max_file_bytes()?;
    if meta.len() > limit {
        return Err(too_large(path, meta.len(), limit));
    }
    // Non-blocking open: if the path was swapped for a FIFO since the check
    // above, opening it must not hang; the checks are repeated on the file
    // that was actually opened.
    let file = match sys::open_read_nonblock(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("reading", path)(e)),
    };
    let meta = file.metadata().map_err(io("reading", path))?;
    require_regular(path, &meta)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(io("reading", path))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(path, bytes.len() as u64, limit));
    }
    Ok(Some((bytes, (meta.dev(), meta.ino()))))
}

/// Reads a whole cache file (any format) by the same rules as the store:
/// a regular file (symlinks followed), at most [`max_file_bytes`]. For
/// tools that read other caches (`cache import`, `diff`, `merge`).
pub fn read_cache_bytes(path: &Path) -> Result<Vec<u8>, CacheError> {
    match read_regular(path)? {
        Some((bytes, _)) => Ok(bytes),
        None => Err(CacheError::Io {
            action: "reading",
            path: path.to_path_buf(),
            source: std::io::ErrorKind::NotFound.into(),
        }),
    }
}
