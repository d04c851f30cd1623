//! Reading cache and spool files safely: only regular files (never a
//! device, a FIFO or a socket, which could hang the reader or be replaced
//! by a save), and never more than a size limit, read without trusting the
//! size the file system reports for an allocation.
//!
//! This module owns the "what may be read as a cache" rule and applies the
//! size limit (`limit.rs`). It must never modify, move or lock anything.

use super::sys;
use crate::error::io;
use crate::limit::{max_file_bytes, MAX_FILE_BYTES_ENV};
use crate::CacheError;
use std::fs::FileType;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// What kind of thing `t` is, in words, when it is not a regular file.
fn odd_kind(t: FileType) -> Option<&'static str> {
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

/// An error unless `t` (the type of `path`) is a regular file.
pub(crate) fn require_regular(path: &Path, t: FileType) -> Result<(), CacheError> {
    match odd_kind(t) {
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
    let Some(opened) = open_regular(path)? else { return Ok(None) };
    let limit = max_file_bytes()?;
    let bytes = read_limited(opened.file, path, limit)?;
    Ok(Some((bytes, opened.ident)))
}

/// A cache file opened for reading by [`open_regular`].
pub(crate) struct Opened {
    /// The open file: its content stays what it was, whatever is renamed
    /// over its path meanwhile (caches are never written in place).
    pub file: std::fs::File,
    /// Its (device, inode).
    pub ident: FileId,
}

/// Opens the regular file at `path` (symlinks followed) by the rules of
/// [`read_regular`], without reading it: `None` when nothing is there.
pub(crate) fn open_regular(path: &Path) -> Result<Option<Opened>, CacheError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("reading", path)(e)),
    };
    require_regular(path, meta.file_type())?;
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
    require_regular(path, meta.file_type())?;
    if meta.len() > limit {
        return Err(too_large(path, meta.len(), limit));
    }
    Ok(Some(Opened { file, ident: (meta.dev(), meta.ino()) }))
}

/// The bytes `start..end` of `file`.
pub(crate) fn read_range(file: &std::fs::File, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let len = usize::try_from(end.saturating_sub(start))
        .map_err(|_| std::io::Error::other("range too large"))?;
    let mut out = vec![0u8; len];
    file.read_exact_at(&mut out, start)?;
    Ok(out)
}

/// Copies the bytes `start..end` of `file` to `sink`, a MiB at a time.
pub(crate) fn copy_range(
    file: &std::fs::File,
    start: u64,
    end: u64,
    sink: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; (1usize << 20).min(usize::try_from(end - start).unwrap_or(1 << 20))];
    let mut at = start;
    while at < end {
        let n = buf.len().min(usize::try_from(end - at).unwrap_or(buf.len()));
        file.read_exact_at(&mut buf[..n], at)?;
        sink.write_all(&buf[..n])?;
        at += n as u64;
    }
    Ok(())
}

/// Reads all of `file` (of `path`), failing once it is over `limit` bytes.
fn read_limited(file: std::fs::File, path: &Path, limit: u64) -> Result<Vec<u8>, CacheError> {
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(io("reading", path))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(path, bytes.len() as u64, limit));
    }
    Ok(bytes)
}

/// What is at a path inside the spool directory.
#[derive(Debug)]
pub(crate) enum InSpool {
    /// A regular file, and its bytes.
    File(Vec<u8>),
    /// Nothing (folded by someone else since it was listed).
    Gone,
    /// Something ranktune did not write there: what it is, in words.
    NotAFile(&'static str),
}

/// Reads the spool file at `path`, which must be a regular file of its own:
/// a symlink is never followed, and a device, FIFO, socket or directory is
/// never read (nor opened, when it is one already at the first look), but
/// reported as [`InSpool::NotAFile`] so the caller can skip it. The open is
/// `O_NOFOLLOW|O_NONBLOCK` and what was opened is checked again with
/// `fstat`, so a FIFO swapped in meanwhile cannot hang the reader. Files over
/// [`max_file_bytes`] are an error, like the cache itself.
pub(crate) fn read_spool_file(path: &Path) -> Result<InSpool, CacheError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            if let Some(kind) = odd_kind(meta.file_type()) {
                return Ok(InSpool::NotAFile(kind));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(InSpool::Gone),
        Err(e) => return Err(io("reading", path)(e)),
    }
    let file = match sys::open_read_nofollow_nonblock(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(InSpool::Gone),
        Err(e) if sys::is_symlink_refused(&e) => return Ok(InSpool::NotAFile("a symbolic link")),
        Err(e) => return Err(io("reading", path)(e)),
    };
    let meta = file.metadata().map_err(io("reading", path))?;
    if let Some(kind) = odd_kind(meta.file_type()) {
        return Ok(InSpool::NotAFile(kind));
    }
    let limit = max_file_bytes()?;
    if meta.len() > limit {
        return Err(too_large(path, meta.len(), limit));
    }
    read_limited(file, path, limit).map(InSpool::File)
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
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "does not exist"),
        }),
    }
}
