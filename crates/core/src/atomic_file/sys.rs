//! The OS calls behind publishing: an exclusive temp file that never follows
//! a symlink, and fsync of a directory.
//!
//! This module owns the open flags and the platform error codes; it must
//! never decide names, retries or what to do on failure.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Creates a new file exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`),
/// mode 0666 less the umask: fails with `AlreadyExists` if anything, a
/// symlink (dangling or not) included, already has that name, so nothing
/// is ever written through a link planted at the temp path.
pub(super) fn create_exclusive(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o666)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// fsyncs a directory so that renames and unlinks in it are durable.
/// Filesystems that cannot fsync a directory (`EINVAL`, `EOPNOTSUPP`) are
/// tolerated: there is nothing more to do on them.
pub(super) fn fsync_dir(dir: &Path) -> io::Result<()> {
    let d = File::open(dir)?;
    match d.sync_all() {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)) => Ok(()),
        Err(e) => Err(e),
    }
}
