//! The sidecar lock `<file>.lock`: taking it with a timeout, saying once
//! that we wait and for whom, and releasing it on drop.
//!
//! The lock file is never renamed or deleted (so every process always locks
//! the same inode); its content is only a note of the last holder, for the
//! "waiting for lock" message. This module must never touch the cache file.

use super::sys::{self, TryLock};
use super::trust::{self, SideModes};
use crate::CacheError;
use ranktune_core::fork_guard::CloseOnFork;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Brief waits are normal while another rank folds a batch of saves; only
/// waits longer than this are announced.
const QUIET_WAIT: Duration = Duration::from_millis(500);

/// An exclusive lock, released when dropped: unlocked explicitly, then
/// closed. A child made by `fork` while it is held does not share it (see
/// `ranktune_core::fork_guard`), and one forked between the lock file's
/// open and its registration, which shares the open file description, does
/// not keep it either: the unlock releases the description's lock.
#[derive(Debug)]
pub(crate) struct LockGuard {
    // Unregistered before the file closes (fields drop in order).
    _fork: CloseOnFork,
    _file: File,
    kind: LockKind,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.kind == LockKind::FlockAndRecord {
            sys::record_unlock(&self._file);
        }
        sys::unlock(&self._file);
    }
}

/// Which locks a writer takes on the lock file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockKind {
    /// `flock`: every ranktune writer of a ranktune cache.
    Flock,
    /// `flock` and a whole-file record lock (see
    /// `sys::try_record_lock_exclusive`): a file another program also
    /// saves under its `fcntl.lockf` on the same lock file (TensorRT-LLM's
    /// cache). Both are taken without blocking and together, or neither is
    /// held while waiting.
    FlockAndRecord,
}

/// How a lock attempt ended.
#[derive(Debug)]
pub(crate) enum Acquired {
    /// We hold the lock.
    Locked(LockGuard),
    /// `done()` said there is nothing left to do (our save was folded by
    /// the lock holder) before we got the lock.
    Done,
    /// The filesystem cannot lock; carries the reason.
    Unsupported(std::io::Error),
}

/// The lock file that belongs to `cache`: `<cache>.lock`.
pub(crate) fn lock_path(cache: &Path) -> PathBuf {
    let mut s = cache.as_os_str().to_owned();
    s.push(".lock");
    PathBuf::from(s)
}

/// Who holds the lock, for the messages: a process holding the other
/// program's record lock (`lockf`) is named by the kernel; otherwise the
/// note the last ranktune holder left in the lock file.
fn holder(lock: &Path, file: &File, kind: LockKind) -> String {
    if kind == LockKind::FlockAndRecord {
        if let Some(pid) = sys::record_holder(file) {
            return format!("pid {pid}, through a lockf record lock (as TensorRT-LLM takes it)");
        }
    }
    match std::fs::read_to_string(lock) {
        Ok(s) if !s.trim().is_empty() => s.trim().to_string(),
        _ => "an unknown process".to_string(),
    }
}

/// One attempt at the locks `kind` names: the record lock only once the
/// `flock` is held, and the `flock` let go again when the record lock is
/// busy, so nothing is held while waiting.
fn try_both(file: &File, kind: LockKind) -> std::io::Result<TryLock> {
    let first = sys::try_lock_exclusive(file)?;
    if kind == LockKind::Flock || !matches!(first, TryLock::Acquired) {
        return Ok(first);
    }
    let second = sys::try_record_lock_exclusive(file);
    if !matches!(second, Ok(TryLock::Acquired)) {
        sys::unlock(file);
    }
    second
}

/// Takes the lock on `lock`, polling with backoff until `timeout`. Between
/// attempts it calls `done()`; when that returns true the wait ends with
/// [`Acquired::Done`].
pub(crate) fn acquire(
    lock: &Path,
    cache: &Path,
    modes: SideModes,
    kind: LockKind,
    timeout: Duration,
    mut done: impl FnMut() -> bool,
) -> Result<Acquired, CacheError> {
    let opened = sys::open_rw_nofollow_mode(lock, modes.file());
    let (fork, mut file) = match opened {
        // Guarded from the moment it is open: a fork between the open and
        // the lock would share the description the lock then belongs to.
        Ok(f) => (CloseOnFork::register(f.as_raw_fd()), f),
        Err(source) => {
            // A symlink, or another user's file we cannot write: say whose.
            if let Ok(meta) = std::fs::symlink_metadata(lock) {
                trust::check_side(lock, &meta, "lock file", cache, modes)?;
            }
            return Err(CacheError::Io { action: "opening lock file", path: lock.into(), source });
        }
    };
    let meta = file.metadata().map_err(|source| CacheError::Io {
        action: "checking lock file",
        path: lock.into(),
        source,
    })?;
    trust::check_side(lock, &meta, "lock file", cache, modes)?;
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    let mut announced = false;
    loop {
        match try_both(&file, kind) {
            Ok(TryLock::Acquired) => {
                // A note for waiters; failing to write it changes nothing.
                let note =
                    format!("pid {} on {}\n", std::process::id(), ranktune_core::rank::host_name());
                let _ = file
                    .set_len(0)
                    .and_then(|()| file.seek(SeekFrom::Start(0)))
                    .and_then(|_| file.write_all(note.as_bytes()));
                return Ok(Acquired::Locked(LockGuard { _fork: fork, _file: file, kind }));
            }
            Ok(TryLock::Unsupported(e)) => return Ok(Acquired::Unsupported(e)),
            Ok(TryLock::Busy) => {}
            Err(source) => {
                return Err(CacheError::Io { action: "locking", path: lock.into(), source })
            }
        }
        if done() {
            return Ok(Acquired::Done);
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(CacheError::LockTimeout {
                path: lock.into(),
                waited_secs: waited.as_secs_f64(),
                holder: holder(lock, &file, kind),
            });
        }
        if !announced && waited >= QUIET_WAIT.min(timeout / 2) {
            announced = true;
            tracing::warn!(
                "waiting for lock on {} (held by {}); giving up after {:.1}s (RANKTUNE_LOCK_TIMEOUT)",
                lock.display(),
                holder(lock, &file, kind),
                timeout.as_secs_f64()
            );
        }
        std::thread::sleep(pause.min(timeout.saturating_sub(waited)));
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}
