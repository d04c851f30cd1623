//! The process's active session, as the crash hooks see it: its file, its
//! header, its recorder, and a lock so that two exports never overlap.
//!
//! A session's *final* export happens at most once: the first of `stop()`,
//! drop and a signal to get the export lock writes the file and marks the
//! session finished; every export after that (a signal or a panic that was
//! waiting for the lock, a late checkpoint) writes nothing, so a finished
//! session's complete file is never replaced by the empty recorder it
//! leaves behind. Checkpoints before it (`flush()`, the panic hook) are
//! complete files too, replaced by the later ones.
//!
//! A child made by `fork` inherits the slot; its exports are refused
//! ([`TraceError::ForkedChild`]), so it can never replace the parent's
//! file with its copy of the recorder.
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
    /// The export lock; `true` once the final export has run.
    export_lock: Mutex<bool>,
    /// The process that started the session: a forked child inherits the
    /// slot and the recorder, but never exports them.
    pid: u32,
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
        Core { path, meta, rec, export_lock: Mutex::new(false), pid: std::process::id() }
    }

    /// An error when this process is not the one that started the session
    /// (a child made by `fork`).
    fn not_forked(&self) -> Result<(), TraceError> {
        let child = std::process::id();
        if child == self.pid {
            return Ok(());
        }
        Err(TraceError::ForkedChild { path: self.path.clone(), parent: self.pid, child })
    }

    /// Exports now, as a checkpoint; waits at most `patience` for a
    /// concurrent export. Writes nothing once the session is finished (the
    /// final file stays as it is).
    pub(crate) fn export(&self, patience: Duration) -> Result<&Path, TraceError> {
        self.not_forked()?;
        let finished = self.lock(patience)?;
        if !*finished {
            export::export(&self.path, &self.rec, &self.meta)?;
        }
        Ok(&self.path)
    }

    /// The final export: writes the file unless the session is already
    /// finished, and marks it finished (even when writing fails: what the
    /// recorder holds afterwards is no longer the session). Waits at most
    /// `patience` for a concurrent export, so a signal that arrives while
    /// `stop()` exports waits for that export instead of repeating it.
    pub(crate) fn finish(&self, patience: Duration) -> Result<&Path, TraceError> {
        self.not_forked()?;
        let mut finished = self.lock(patience)?;
        if *finished {
            return Ok(&self.path);
        }
        *finished = true;
        export::export(&self.path, &self.rec, &self.meta)?;
        Ok(&self.path)
    }

    fn lock(&self, patience: Duration) -> Result<MutexGuard<'_, bool>, TraceError> {
        let deadline = Instant::now() + patience;
        loop {
            match self.export_lock.try_lock() {
                Ok(g) => return Ok(g),
                Err(TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
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
        }
    }
}
