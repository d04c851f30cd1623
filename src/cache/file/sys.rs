//! The few OS calls std does not offer: `flock`, the host name, and the
//! open flags for files that must never follow a symlink.
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

/// Creates a new file exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`): fails if
/// anything, a symlink included, already has that name. Mode 0666 less the
/// umask.
pub(crate) fn create_exclusive(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
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

/// fsyncs a directory so that renames and unlinks in it are durable.
/// Filesystems that cannot fsync a directory are tolerated.
pub(crate) fn fsync_dir(dir: &Path) -> io::Result<()> {
    let d = File::open(dir)?;
    match d.sync_all() {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)) => Ok(()),
        Err(e) => Err(e),
    }
}
