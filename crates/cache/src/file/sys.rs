//! The few OS calls std does not offer: `flock`, `fcntl` record locks, and the open flags for
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
        if err.raw_os_error() != Some(libc::EINTR) {
            return busy_or_unsupported(err);
        }
    }
}

/// What a failed non-blocking lock attempt (`flock` or `fcntl`) means:
/// another holder (`Busy`), a filesystem that cannot lock (`Unsupported`),
/// or an error.
fn busy_or_unsupported(err: io::Error) -> io::Result<TryLock> {
    match err.raw_os_error() {
        Some(code) if code == libc::EWOULDBLOCK || code == libc::EAGAIN || code == libc::EACCES => {
            Ok(TryLock::Busy)
        }
        Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL) => {
            Ok(TryLock::Unsupported(err))
        }
        _ => Err(err),
    }
}

/// Tries to take a shared `flock` on `file` without blocking; `Ok(false)`
/// when someone holds it exclusively or the filesystem cannot lock.
pub(crate) fn try_lock_shared(file: &File) -> io::Result<bool> {
    loop {
        // SAFETY: flock on a file descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(_) if matches!(try_lock_classify(&err), Some(())) => return Ok(false),
            _ => return Err(err),
        }
    }
}

/// Releases the `flock` held on `file`'s open file description, whoever
/// else shares that description: a child made by `fork` in the instant
/// between the file's open and its [`CloseOnFork`] registration holds a
/// copy of the description, and closing our descriptor alone would leave
/// the lock held for that child's life. Errors are ignored: the descriptor
/// is closed next, which releases it where nothing else shares it.
///
/// [`CloseOnFork`]: ranktune_core::fork_guard::CloseOnFork
pub(crate) fn unlock(file: &File) {
    // SAFETY: flock on a file descriptor we own; no memory is passed.
    let _ = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
}

/// Tries to take an exclusive record lock (`fcntl`) on the whole of
/// `file` without blocking: the lock TensorRT-LLM's own saver takes with
/// Python's `fcntl.lockf`, so a rank of ours and an unpatched rank exclude
/// each other. On Linux it is an open-file-description lock
/// (`F_OFD_SETLK`), which conflicts with `lockf` locks but, unlike them,
/// belongs to the open file, not the process: another thread of this
/// process (with its own open of the lock file) waits for it, and closing
/// some other descriptor of the same file does not release it. Elsewhere
/// it is a classic POSIX lock (`F_SETLK`), per process.
pub(crate) fn try_record_lock_exclusive(file: &File) -> io::Result<TryLock> {
    record_lock(file, libc::F_WRLCK as libc::c_short)
}

/// Releases the record lock of [`try_record_lock_exclusive`], whoever else
/// shares the open file description (see [`unlock`]). Errors are ignored:
/// closing the descriptor next releases it where nothing else shares it.
pub(crate) fn record_unlock(file: &File) {
    let _ = record_lock(file, libc::F_UNLCK as libc::c_short);
}

/// The process that holds a classic POSIX record lock (`lockf`) on
/// `file`, where one does: `F_OFD_GETLK` names it (an open-file-description
/// lock has no owner process and gives `None`).
pub(crate) fn record_holder(file: &File) -> Option<u32> {
    #[cfg(target_os = "linux")]
    let cmd = libc::F_OFD_GETLK;
    #[cfg(not(target_os = "linux"))]
    let cmd = libc::F_GETLK;
    // SAFETY: as in `record_lock`.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: fcntl on a descriptor we own with a pointer to a live flock.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut fl as *mut libc::flock) };
    if rc == -1 || fl.l_type == libc::F_UNLCK as libc::c_short {
        return None;
    }
    u32::try_from(fl.l_pid).ok().filter(|&pid| pid > 0)
}

fn record_lock(file: &File, kind: libc::c_short) -> io::Result<TryLock> {
    #[cfg(target_os = "linux")]
    let cmd = libc::F_OFD_SETLK;
    #[cfg(not(target_os = "linux"))]
    let cmd = libc::F_SETLK;
    // SAFETY: an all-zero flock is a valid value (start 0, len 0: the whole
    // file; pid 0, as F_OFD_SETLK requires).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    loop {
        // SAFETY: fcntl on a descriptor we own with a pointer to a live,
        // initialised flock.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut fl as *mut libc::flock) };
        if rc != -1 {
            return Ok(TryLock::Acquired);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return busy_or_unsupported(err);
        }
    }
}

/// Whether a failed `flock` means "busy" or "cannot lock here".
fn try_lock_classify(err: &io::Error) -> Option<()> {
    match err.raw_os_error() {
        Some(code)
            if code == libc::EWOULDBLOCK
                || code == libc::EAGAIN
                || code == libc::ENOLCK
                || code == libc::EOPNOTSUPP
                || code == libc::ENOSYS
                || code == libc::EINVAL =>
        {
            Some(())
        }
        _ => None,
    }
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

/// Opens (creating if needed with `mode`, less the umask) a file for
/// reading and writing, refusing to follow a symlink at `path`.
pub(crate) fn open_rw_nofollow_mode(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// The effective user id of this process: who owns what it creates.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// `uid N (name)`, or `uid N` when the user database has no name for it.
pub(crate) fn user_label(uid: u32) -> String {
    let mut buf = vec![0u8; 4096];
    // SAFETY: all-zero bytes are a valid `passwd` (null pointers, zero
    // ids); getpwuid_r fills it with pointers into `buf`, which outlives
    // every use of them below.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: `pwd`, `buf` (with its true length) and `out` are valid for
    // writes for the whole call; getpwuid_r writes nothing beyond them.
    let rc =
        unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr().cast(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() || pwd.pw_name.is_null() {
        return format!("uid {uid}");
    }
    // SAFETY: on success pw_name points at a NUL-terminated string in `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    format!("uid {uid} ({})", name.to_string_lossy())
}

/// Renames `from` to `to` unless something already has the name `to`
/// (`AlreadyExists` then): a set-aside file never replaces anything.
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| {
            std::ffi::CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
        };
        let (f, t) = (c(from)?, c(to)?);
        // SAFETY: both are NUL-terminated strings (CString) that outlive
        // the call; renameat2 only reads them.
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                f.as_ptr(),
                libc::AT_FDCWD,
                t.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        // Filesystems without RENAME_NOREPLACE: fall back to link + unlink.
        if !matches!(err.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) {
            return Err(err);
        }
    }
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

/// What `statfs` says about the filesystem that holds `path`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FsKind {
    /// The filesystem's usual name (`nfs`, `lustre`, `ext4`, …), or
    /// `None` for a type this table does not know.
    pub name: Option<&'static str>,
    /// The raw `f_type` magic number.
    pub magic: u64,
    /// Whether its `flock` may be granted per node (so two nodes can hold
    /// "the" lock at once): network and cluster filesystems.
    pub node_local_locks: bool,
}

impl std::fmt::Display for FsKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name {
            Some(n) => f.write_str(n),
            None => write!(f, "filesystem type {:#x}", self.magic),
        }
    }
}

/// The filesystem type for a `statfs` magic number (see statfs(2)).
pub(crate) fn classify_fs(magic: u64) -> FsKind {
    // (magic, name, locks may be node-local)
    const TABLE: &[(u64, &str, bool)] = &[
        (0x6969, "nfs", true),
        (0x0BD0_0BD0, "lustre", true),
        (0x4750_4653, "gpfs", true),
        (0xFF53_4D42, "cifs", true),
        (0xFE53_4D42, "smb2", true),
        (0x517B, "smb", true),
        (0x00C3_6400, "ceph", true),
        (0x1983_0326, "beegfs", true),
        (0x5346_414F, "afs", true),
        (0x6B41_4653, "afs", true),
        (0xAAD7_AAEA, "panfs", true),
        (0x7461_636F, "ocfs2", true),
        (0x0102_1997, "9p", true),
        (0x6573_5546, "fuse", true),
        (0xEF53, "ext4", false),
        (0x5846_5342, "xfs", false),
        (0x9123_683E, "btrfs", false),
        (0x0102_1994, "tmpfs", false),
        (0x794C_7630, "overlayfs", false),
        (0x2FC1_2FC1, "zfs", false),
        (0xF2F5_2010, "f2fs", false),
        (0x4D44, "vfat", false),
    ];
    match TABLE.iter().find(|(m, _, _)| *m == magic) {
        Some(&(_, name, node_local_locks)) => FsKind { name: Some(name), magic, node_local_locks },
        None => FsKind { name: None, magic, node_local_locks: false },
    }
}

/// The filesystem that holds `path` (which must exist), by `statfs`.
pub(crate) fn fs_kind(path: &Path) -> io::Result<FsKind> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: all-zero bytes are a valid `statfs` (plain integers).
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and outlives the call; `st` is valid for
    // writes of a whole `statfs`.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // f_type's integer type differs between platforms; the magic numbers
    // are 32-bit values.
    #[allow(clippy::unnecessary_cast)]
    let magic = (st.f_type as i64 as u64) & 0xFFFF_FFFF;
    Ok(classify_fs(magic))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filesystems_whose_locks_may_not_span_nodes_are_named() {
        for (magic, name) in [(0x6969, "nfs"), (0x0BD0_0BD0, "lustre"), (0x4750_4653, "gpfs")] {
            let k = classify_fs(magic);
            assert_eq!((k.name, k.node_local_locks), (Some(name), true), "{magic:#x}");
        }
        let cifs = classify_fs(0xFF53_4D42);
        assert!(cifs.node_local_locks && cifs.to_string() == "cifs");
        assert!(!classify_fs(0xEF53).node_local_locks);
        assert_eq!(classify_fs(0x1234).to_string(), "filesystem type 0x1234");
        // The directory tests run in is on some filesystem statfs names.
        let here = fs_kind(Path::new(".")).unwrap();
        assert_ne!(here.magic, 0);
    }

    #[test]
    fn user_labels_name_known_users() {
        assert!(user_label(0).starts_with("uid 0"), "{}", user_label(0));
        assert_eq!(user_label(u32::MAX - 7), format!("uid {}", u32::MAX - 7));
    }

    #[test]
    fn rename_noreplace_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        let e = rename_noreplace(&a, &b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&b).unwrap(), b"b");
        std::fs::remove_file(&b).unwrap();
        rename_noreplace(&a, &b).unwrap();
        assert_eq!(std::fs::read(&b).unwrap(), b"a");
    }
}
