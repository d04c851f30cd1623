//! The few OS calls std does not offer: `flock`, and the open flags for
//! files that must never follow a symlink or block. (Temp files and
//! directory fsync are [`ranktune_core::atomic_file`]'s.)
//!
//! This module owns every `unsafe` libc call of the file store and nothing
//! else; it must never decide policy (what to lock, when to give up).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Result of a non-blocking lock attempt.
#[derive(Debug)]
pub(crate) enum TryLock {
    /// We hold the exclusive lock now.
    Acquired,
    /// Another open file description holds it.
    Busy,
    /// The filesystem does not support locking (NFS without lockd, some
    /// FUSE filesystems, …).
    Unsupported(io::Error),
}

/// Tries to take an exclusive `flock` on `file` without blocking.
pub(crate) fn try_lock_exclusive(file: &File) -> io::Result<TryLock> {
    loop {
        // SAFETY: flock on a file descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(TryLock::Acquired);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(code) if code == libc::EWOULDBLOCK || code == libc::EAGAIN => {
                return Ok(TryLock::Busy)
            }
            Some(libc::ENOLCK)
            | Some(libc::EOPNOTSUPP)
            | Some(libc::ENOSYS)
            | Some(libc::EINVAL) => return Ok(TryLock::Unsupported(err)),
            _ => return Err(err),
        }
    }
}

/// Opens (creating if needed, mode 0666 less the umask) a file for reading
/// and writing, refusing to follow a symlink at `path`.
pub(crate) fn open_rw_nofollow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o666)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens a file for reading without blocking (`O_NONBLOCK`), so that a
/// FIFO put in place of a cache cannot hang the open; the caller checks what
/// it opened before reading.
pub(crate) fn open_read_nonblock(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(path)
}

/// Opens a file for reading without blocking and without following a
/// symlink at `path` (`O_NOFOLLOW|O_NONBLOCK`): for files that must be the
/// store's own (spool files). A symlink is refused with an error that
/// [`is_symlink_refused`] recognises.
pub(crate) fn open_read_nofollow_nonblock(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

/// Whether `e` is how an `O_NOFOLLOW` open refuses a symlink (`ELOOP`;
/// `EMLINK` on FreeBSD).
pub(crate) fn is_symlink_refused(e: &io::Error) -> bool {
    match e.raw_os_error() {
        Some(libc::ELOOP) => true,
        #[cfg(target_os = "freebsd")]
        Some(libc::EMLINK) => true,
        _ => false,
    }
}
