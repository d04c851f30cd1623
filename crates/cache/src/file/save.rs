//! A plain save, step by step (see the module docs of `file`, "Saving:
//! spool, then group commit"): write the spool file, wait for the lock or
//! for a lock holder to fold it, gather, fold, and read what became of the
//! spool file.
//!
//! Owns those steps and the report of a plain save. Edits that remove
//! entries (resolving and superseding saves, removals) take the lock
//! first and are the parent module's; this module never runs them.

use super::lock::{Acquired, LockGuard};
use super::spool::{self, SpoolState};
use super::{check_parent_dir, trust, FileStore, MAX_UNLOCKED_SPOOLS};
use crate::codec;
use crate::document::CacheData;
use crate::store::{self, SaveReport};
use crate::CacheError;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Group commit: the lock holder waits until the spool has been quiet this
/// long before folding (see `spool::settle`)...
const GATHER_QUIET: Duration = Duration::from_millis(20);
/// ...but never longer than this.
const GATHER_CAP: Duration = Duration::from_millis(500);

/// How many times a save writes its spool again when it vanished before
/// being folded, before it fails.
const SAVE_ATTEMPTS: usize = 3;

/// How one attempt of a save ended.
enum Saved {
    /// Its entries are in the cache (or, unlocked, in the spool).
    Done(SaveReport),
    /// Its spool file disappeared without being folded: not saved.
    Vanished(PathBuf),
}

/// What a save folds under, once its spool file is written and no lock
/// holder folded it first.
enum SaveLock {
    /// The lock, held until dropped: the save gathers, folds every waiting
    /// spool and deletes the folded ones.
    Held { _guard: LockGuard },
    /// No lock (the filesystem refuses locks, or locking is turned off):
    /// the save folds without deleting any spool.
    Without,
}

impl SaveLock {
    fn held(&self) -> bool {
        matches!(self, SaveLock::Held { .. })
    }
}

/// The report of a plain save: `written` entries saved, `total` in the
/// cache afterwards as far as this save knows.
fn report(written: usize, total: usize, warnings: Vec<String>) -> SaveReport {
    SaveReport { written, total, warnings, superseded: 0 }
}

/// True once `spool_file` no longer waits: folded, set aside or vanished
/// (`settled` tells which); an error reading its state is not "done".
fn folded_elsewhere(spool_file: &Path) -> bool {
    matches!(
        spool::state(spool_file),
        Ok(SpoolState::Folded | SpoolState::SetAside(_) | SpoolState::Vanished)
    )
}

/// What the save flow needs of a spooled file: its settings (path, lock,
/// spool directory) and its fold. A ranktune cache ([`FileStore`]) and a
/// foreign format's file (`foreign::ForeignFile`) both save through this
/// one flow; only the fold differs.
pub(super) trait Spooled {
    /// The file's settings.
    fn store(&self) -> &FileStore;
    /// Folds every waiting spool into the file, deleting (when `locked`)
    /// the folded ones; returns the entries after and the warnings.
    fn fold_waiting(&self, locked: bool) -> Result<(usize, Vec<String>), CacheError>;
}

impl Spooled for FileStore {
    fn store(&self) -> &FileStore {
        self
    }

    fn fold_waiting(&self, locked: bool) -> Result<(usize, Vec<String>), CacheError> {
        let (total, _, warnings) = self.fold(locked, false, None)?;
        Ok((total, warnings))
    }
}

impl FileStore {
    /// [`Store::save`](crate::Store::save) of a store whose path is
    /// resolved.
    pub(super) fn save_resolved(&self, update: &CacheData) -> Result<SaveReport, CacheError> {
        let (update, warnings) = store::prepare(update);
        let written = update.len();
        if written == 0 && update.metadata.environments.is_empty() && update.blocklist.is_empty() {
            return Ok(report(written, 0, warnings));
        }
        check_parent_dir(&self.path)?;
        self.refuse_foreign_file()?;
        save_spooled(self, written, warnings, &|| codec::cache_to_bytes(&update))
    }
}

/// A save of `written` entries, whose spool file holds `bytes()`: saves
/// again (at most [`SAVE_ATTEMPTS`] times) when the spool file vanished
/// before it was folded.
pub(super) fn save_spooled(
    s: &impl Spooled,
    written: usize,
    warnings: Vec<String>,
    bytes: &dyn Fn() -> Vec<u8>,
) -> Result<SaveReport, CacheError> {
    let mut vanished = Vec::new();
    for _ in 0..SAVE_ATTEMPTS {
        match save_once(s, written, bytes, warnings.clone())? {
            Saved::Done(mut report) => {
                report.warnings.extend(vanished.iter().map(|p: &PathBuf| {
                    format!(
                        "spool file {} disappeared before it was folded (something other \
                         than ranktune removed it); saved again",
                        p.display()
                    )
                }));
                return Ok(report);
            }
            Saved::Vanished(p) => vanished.push(p),
        }
    }
    let store = s.store();
    Err(CacheError::Invalid(format!(
        "this save's spool file disappeared before it was folded into {}, {SAVE_ATTEMPTS} \
         times ({}); something other than ranktune removes files in {} — nothing was saved. \
         Stop whatever cleans that directory (a tmp cleaner, another user's script), or use \
         another cache path",
        store.path.display(),
        vanished.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        store.spool_path().display()
    )))
}

/// One attempt of a save: writes the spool file, then waits until it is
/// folded (by this process or a lock holder). [`Saved::Vanished`] when it
/// disappeared without being folded.
fn save_once(
    s: &impl Spooled,
    written: usize,
    bytes: &dyn Fn() -> Vec<u8>,
    mut warnings: Vec<String>,
) -> Result<Saved, CacheError> {
    let store = s.store();
    let (spool_file, _waiter) = spool::write_spool(
        &store.spool_path(),
        &store.path,
        trust::SideModes::of(&store.path),
        bytes,
    )?;
    let Some(lock) = store.lock_for_save(&spool_file, &mut warnings)? else {
        return store.settled(&spool_file, report(written, written, warnings));
    };
    if lock.held() {
        if folded_elsewhere(&spool_file) {
            return store.settled(&spool_file, report(written, written, warnings));
        }
        store.gather();
    } else if matches!(spool::state(&spool_file), Ok(SpoolState::Vanished)) {
        return Ok(Saved::Vanished(spool_file));
    }
    // Folds every waiting spool, this save's among them. On an error, this
    // save's spool file is withdrawn so that the error means "not saved"
    // and nothing lingers (e.g. next to a file of a newer version).
    let total = match s.fold_waiting(lock.held()) {
        Ok((total, fold_warnings)) => {
            warnings.extend(fold_warnings);
            total
        }
        Err(e) => {
            let _ = std::fs::remove_file(&spool_file);
            spool::remove_if_empty(&store.spool_path());
            return Err(e);
        }
    };
    store.after_own_fold(spool_file, report(written, total, warnings))
}

impl FileStore {
    /// Waits for the lock, watching `spool_file`. `None` when a lock holder
    /// folded it meanwhile (nothing left to do but `settled`). Without
    /// locks, refuses the save past [`MAX_UNLOCKED_SPOOLS`]; on an error,
    /// withdraws the spool file so that the error means "not saved".
    fn lock_for_save(
        &self,
        spool_file: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<Option<SaveLock>, CacheError> {
        let outcome = if self.locking {
            self.acquire_lock(|| folded_elsewhere(spool_file))
        } else {
            Ok(Acquired::Unsupported(std::io::Error::other("locking turned off")))
        };
        match outcome {
            Ok(Acquired::Done) => Ok(None),
            Ok(Acquired::Locked(g)) => {
                warnings.extend(trust::warn_if_node_local_locks(&self.path));
                Ok(Some(SaveLock::Held { _guard: g }))
            }
            Ok(Acquired::Unsupported(e)) => {
                self.refuse_too_many_unlocked(spool_file, &e)?;
                warnings.push(self.warn_no_lock(&e.to_string()));
                Ok(Some(SaveLock::Without))
            }
            // Withdraw the spool so that an error means "not saved"; if it
            // is already gone, a lock holder folded it: saved.
            Err(e) => match std::fs::remove_file(spool_file) {
                Err(r) if r.kind() == std::io::ErrorKind::NotFound => Ok(None),
                _ => {
                    spool::remove_if_empty(&self.spool_path());
                    Err(e)
                }
            },
        }
    }

    /// Without locks, past [`MAX_UNLOCKED_SPOOLS`] waiting saves: withdraws
    /// this save's own spool file (the only one an unlocked save may
    /// delete) and refuses the save, with the way out.
    fn refuse_too_many_unlocked(
        &self,
        spool_file: &Path,
        why: &std::io::Error,
    ) -> Result<(), CacheError> {
        let waiting = spool::list(&self.spool_path())?.len();
        if waiting <= MAX_UNLOCKED_SPOOLS {
            return Ok(());
        }
        let _ = std::fs::remove_file(spool_file);
        Err(CacheError::Invalid(format!(
            "cannot lock {} on {} ({why}), and {} saves already wait unfolded in {} (at most \
             {MAX_UNLOCKED_SPOOLS}); refusing to add more. Nothing is lost: a save on a \
             filesystem with locks folds them (copy the cache and its .spool to a local disk, \
             save there, copy back), or use a redis:// cache",
            self.lock_path().display(),
            trust::fs_name(&self.path),
            waiting - 1,
            self.spool_path().display()
        )))
    }

    /// Group commit, under the lock: waits until the spool has been quiet
    /// briefly, so that saves that finish together are folded together.
    fn gather(&self) {
        let t = std::time::Instant::now();
        spool::settle(&self.spool_path(), GATHER_QUIET, GATHER_CAP);
        tracing::debug!("gathered saves for {:?}", t.elapsed());
    }

    /// What this save's own fold did with its spool file: set aside (an
    /// error), vanished before the fold read it (save again), or folded.
    fn after_own_fold(&self, spool_file: PathBuf, report: SaveReport) -> Result<Saved, CacheError> {
        match spool::state(&spool_file) {
            Ok(SpoolState::SetAside(p)) => Err(spool_set_aside(&p)),
            Ok(SpoolState::Vanished) => Ok(Saved::Vanished(spool_file)),
            Ok(SpoolState::Folded) => {
                spool::forget_folded(&spool_file);
                Ok(Saved::Done(report))
            }
            _ => Ok(Saved::Done(report)),
        }
    }

    /// The result of a save whose spool file is no longer waiting: folded
    /// is saved, set aside is an error, vanished is to be saved again.
    fn settled(&self, spool_file: &Path, report: SaveReport) -> Result<Saved, CacheError> {
        match spool::state(spool_file) {
            Ok(SpoolState::Folded) => {
                spool::forget_folded(spool_file);
                Ok(Saved::Done(report))
            }
            Ok(SpoolState::SetAside(p)) => Err(spool_set_aside(&p)),
            Ok(SpoolState::Vanished) => Ok(Saved::Vanished(spool_file.to_path_buf())),
            Ok(SpoolState::Waiting) => Err(CacheError::Invalid(format!(
                "spool file {} reappeared after it was folded; is something else writing to {}?",
                spool_file.display(),
                self.spool_path().display()
            ))),
            Err(source) => Err(CacheError::Io {
                action: "checking spool file",
                path: spool_file.into(),
                source,
            }),
        }
    }
}

/// The error for a save whose spool file was set aside as `aside`.
fn spool_set_aside(aside: &Path) -> CacheError {
    CacheError::Invalid(format!(
        "this save's spool file was damaged before it was folded into the cache and was set \
         aside as {}; nothing was saved, save again",
        aside.display()
    ))
}
