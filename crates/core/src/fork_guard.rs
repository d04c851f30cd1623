//! Descriptors that must not survive into a child made by `fork`.
//!
//! A `flock` belongs to the open file description, and a child made by
//! `fork` (Python's `multiprocessing` on Linux, DataLoader workers, a
//! `subprocess` before its `exec`) shares every descriptor of its parent:
//! a child forked while a save holds the cache's lock keeps that lock for
//! its whole life, and every rank's save waits for it. Linux has no
//! close-on-fork flag, so this module keeps a small lock-free table of the
//! descriptors registered with [`CloseOnFork::register`] and, in every
//! forked child (a `pthread_atfork` child handler, installed once),
//! replaces each with `/dev/null` — `dup2` is async-signal-safe, as a
//! child handler must be — which drops the child's share of the lock.
//!
//! It owns the table and the handler; it never opens, locks or closes the
//! registered files (their owners do).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

/// How many descriptors can be guarded at once; beyond that a registration
/// guards nothing (say so in `is_guarded`). Locks held at once by one
/// process are few: one per cache being saved, one per waiting spool file.
const SLOTS: usize = 256;

static FDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];
static DEVNULL: AtomicI32 = AtomicI32::new(-1);
static INSTALL: Once = Once::new();

extern "C" fn in_child() {
    let null = DEVNULL.load(Ordering::Acquire);
    if null < 0 {
        return;
    }
    for slot in &FDS {
        let fd = slot.load(Ordering::Acquire);
        if fd >= 0 {
            // SAFETY: dup2 on two descriptor numbers; async-signal-safe.
            unsafe { libc::dup2(null, fd) };
        }
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: a constant NUL-terminated path; the descriptor is kept for
        // the life of the process (close-on-exec).
        let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if null >= 0 {
            DEVNULL.store(null, Ordering::Release);
            // SAFETY: registers a handler that only calls dup2.
            unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        }
    });
}

/// Keeps a descriptor out of forked children while it lives: in a child
/// made by `fork`, the descriptor number points at `/dev/null` instead of
/// the file. Drop it before closing the descriptor.
///
/// ```
/// use std::os::fd::AsRawFd;
/// let file = std::fs::File::open("/dev/null").unwrap();
/// let guard = ranktune_core::fork_guard::CloseOnFork::register(file.as_raw_fd());
/// assert!(guard.is_guarded());
/// drop(guard);
/// drop(file);
/// ```
#[derive(Debug)]
pub struct CloseOnFork {
    slot: Option<usize>,
}

impl CloseOnFork {
    /// Guards `fd` until the returned value is dropped.
    pub fn register(fd: RawFd) -> CloseOnFork {
        install();
        if DEVNULL.load(Ordering::Acquire) < 0 || fd < 0 {
            return CloseOnFork { slot: None };
        }
        for (i, slot) in FDS.iter().enumerate() {
            if slot.compare_exchange(-1, fd, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                return CloseOnFork { slot: Some(i) };
            }
        }
        CloseOnFork { slot: None }
    }

    /// Whether the descriptor is guarded (false when `/dev/null` could not be
    /// opened or the table is full).
    pub fn is_guarded(&self) -> bool {
        self.slot.is_some()
    }
}

impl Drop for CloseOnFork {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            FDS[i].store(-1, Ordering::Release);
        }
    }
}
