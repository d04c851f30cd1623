//! The process's active session, as the crash hooks see it: its file, its
//! header, its recorder, and a lock so that two exports never overlap.
//!
//! `session` sets and clears it; `hooks` looks it up when a panic or a
//! signal arrives and exports it. Kept apart from both so that neither
//! depends on the other. This module owns the one `ACTIVE` slot; it never
//! decides when to export.

use crate::export::{self, Meta};
use crate::recorder::Recorder;
use crate::TraceError;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

/// What the hooks need to export the active session.
pub(crate) struct Core {
    pub(crate) path: PathBuf,
    meta: Meta,
    pub(crate) rec: Arc<Recorder>,
    export_lock: Mutex<()>,
}

static ACTIVE: Mutex<Option<Arc<Core>>> = Mutex::new(None);

/// The active slot itself, locked (for `session` to fill and empty).
pub(crate) fn slot() -> MutexGuard<'static, Option<Arc<Core>>> {
    ACTIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The active session's core, waiting at most `patience` for the lock (the
/// hooks must not hang forever if the panicking thread holds it).
pub(crate) fn active(patience: Duration) -> Option<Arc<Core>> {
    let deadline = Instant::now() + patience;
    loop {
        match ACTIVE.try_lock() {
            Ok(guard) => return guard.clone(),
            Err(TryLockError::Poisoned(p)) => return p.into_inner().clone(),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

impl Core {
    /// The core of a session writing `rec`'s events to `path`.
    pub(crate) fn new(path: PathBuf, meta: Meta, rec: Arc<Recorder>) -> Core {
        Core { path, meta, rec, export_lock: Mutex::new(()) }
    }

    /// Exports now; waits at most `patience` for a concurrent export.
    pub(crate) fn export(&self, patience: Duration) -> Result<&Path, TraceError> {
        let deadline = Instant::now() + patience;
        let _guard = loop {
            match self.export_lock.try_lock() {
                Ok(g) => break g,
                Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(TraceError::Write {
                        path: self.path.clone(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::WouldBlock,
                            "another export of this trace did not finish in time",
                        ),
                    })
                }
            }
        };
        export::export(&self.path, &self.rec, &self.meta)?;
        Ok(&self.path)
    }
}
