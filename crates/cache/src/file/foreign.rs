//! Another program's cache file, saved and loaded through this store's own
//! machinery: TensorRT-LLM's autotuner cache, which the `ranktune.trtllm`
//! drop-in saves while unpatched ranks of TensorRT-LLM save the same file
//! under their `fcntl.lockf` on the same `<file>.lock`.
//!
//! The format (crate `ranktune-formats`) says only how its saves fold into
//! the file's text ([`ForeignFormat`]). Everything else is this store's, so
//! a fix there reaches the drop-in too: which paths are trusted (every link
//! on the path judged as `protected_symlinks` would, whatever the sysctl;
//! the lock file and the spool directory the caller's own), the lock (its
//! timeout, "waiting for lock" message, fork guard and close-on-fork, plus
//! the other program's record lock), the spool (naming in save order,
//! listing, validation, group commit, set-aside of a damaged spool file,
//! removal once folded), the set-aside of a file that is not of the format
//! (`C.corrupt-<UTC stamp>`, never through a link), and the atomic write.
//!
//! This module must never read the format itself: it hands bytes to the
//! [`ForeignFormat`] and writes what it returns.

use super::lock::{Acquired, LockGuard, LockKind};
use super::save::{self, Spooled};
use super::{mark_folded, read, spool, trust, write, FileStore, STALE_TEMP_AGE};
use crate::error::io;
use crate::store::SaveReport;
use crate::CacheError;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A file format whose saves go through the store's spool and fold.
///
/// A save is written as one spool file (bytes the format makes, e.g. with
/// the entries of one rank); under the lock, [`ForeignFormat::fold`] merges
/// every waiting spool, in save order, into the file's text.
pub trait ForeignFormat {
    /// The spool directory's suffix: saves wait in `<file>.<suffix>/`.
    fn spool_suffix(&self) -> &'static str;
    /// Checks one spool file's bytes; `Err(reason)` when it is damaged (it
    /// is then set aside, never folded).
    fn check_spool(&self, bytes: &[u8]) -> Result<(), String>;
    /// The file `old` (`None`: there is none yet) with the saves `spools`
    /// (each passed [`ForeignFormat::check_spool`]) applied in order: the
    /// new file's bytes and the number of entries it holds.
    /// `Err(reason)` when `old` is not a file of this format: it is set
    /// aside and the saves fold into a new file.
    fn fold(&self, old: Option<&[u8]>, spools: &[Vec<u8>]) -> Result<(Vec<u8>, usize), String>;
}

/// A file in a [`ForeignFormat`], saved and loaded with the store's locks,
/// trust rules, spool and set-aside (see the module docs).
///
/// ```
/// use ranktune_cache::{ForeignFile, ForeignFormat};
/// /// One line per save, appended in save order.
/// struct Lines;
/// impl ForeignFormat for Lines {
///     fn spool_suffix(&self) -> &'static str { "lines-spool" }
///     fn check_spool(&self, b: &[u8]) -> Result<(), String> {
///         if b.ends_with(b"\n") { Ok(()) } else { Err("no newline".into()) }
///     }
///     fn fold(&self, old: Option<&[u8]>, spools: &[Vec<u8>]) -> Result<(Vec<u8>, usize), String> {
///         let mut text = old.unwrap_or_default().to_vec();
///         spools.iter().for_each(|s| text.extend_from_slice(s));
///         let n = text.iter().filter(|&&b| b == b'\n').count();
///         Ok((text, n))
///     }
/// }
/// let dir = tempfile::tempdir()?;
/// let file = ForeignFile::new(dir.path().join("log.txt"), Lines);
/// file.save(b"one\n".to_vec(), 1)?;
/// file.save(b"two\n".to_vec(), 1)?;
/// assert_eq!(file.load()?.unwrap().bytes, b"one\ntwo\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ForeignFile<F> {
    store: FileStore,
    format: F,
    make_dirs: bool,
}

/// What [`ForeignFile::load`] read: the file with the saves still waiting
/// in its spool folded in (in memory), and the warnings about what it met.
#[derive(Debug)]
pub struct ForeignLoaded {
    /// The file's bytes as the next fold would write them.
    pub bytes: Vec<u8>,
    /// What was skipped or set aside, in words (returned, not logged).
    pub warnings: Vec<String>,
}

/// The file's lock, held until dropped ([`ForeignFile::lock`]).
#[derive(Debug)]
pub struct ForeignLock {
    _guard: LockGuard,
}

impl<F: ForeignFormat> ForeignFile<F> {
    /// The file at `path` in `format`, with the default lock timeout.
    /// Does no I/O.
    pub fn new(path: impl Into<PathBuf>, format: F) -> ForeignFile<F> {
        let mut store = FileStore::new(path);
        store.lock_kind = LockKind::FlockAndRecord;
        store.spool_suffix = format.spool_suffix();
        ForeignFile { store, format, make_dirs: false }
    }

    /// [`ForeignFile::new`] with the lock timeout from
    /// `RANKTUNE_LOCK_TIMEOUT` (a malformed value is an error, as for every
    /// ranktune cache).
    pub fn from_env(path: impl Into<PathBuf>, format: F) -> Result<ForeignFile<F>, CacheError> {
        let timeout = super::lock_timeout_from_env()?;
        Ok(ForeignFile::new(path, format).with_lock_timeout(timeout))
    }

    /// Sets how long a save, a load or [`ForeignFile::lock`] waits for the
    /// lock before failing.
    pub fn with_lock_timeout(mut self, t: Duration) -> ForeignFile<F> {
        self.store.lock_timeout = t;
        self
    }

    /// A save creates the file's missing directories (as the program
    /// whose file it is does), after every link on the path was judged.
    pub fn creating_dirs(mut self) -> ForeignFile<F> {
        self.make_dirs = true;
        self
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.store.path
    }

    /// The lock file, `<path>.lock` (the other program's lock file too).
    pub fn lock_path(&self) -> PathBuf {
        self.store.lock_path()
    }

    /// The spool directory, `<path>.<suffix>`.
    pub fn spool_path(&self) -> PathBuf {
        self.store.spool_path()
    }

    /// This file with its path's links resolved (see `trust::resolve`).
    fn resolved(&self) -> Result<ForeignView<'_, F>, CacheError> {
        let (path, via_link) = trust::resolve(&self.store.path)?;
        Ok(ForeignView {
            store: FileStore { path, via_link, ..self.store.clone() },
            format: &self.format,
        })
    }

    /// Saves one spool file's worth (`spool_bytes`, holding `written`
    /// entries): the store's save (spool, then the lock or a lock holder's
    /// fold, group commit; see the module docs of `file`). Returns once a
    /// rewrite holding it is durable.
    pub fn save(&self, spool_bytes: Vec<u8>, written: usize) -> Result<SaveReport, CacheError> {
        let this = self.resolved()?;
        if self.make_dirs {
            if let Some(parent) = this.store.path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(io("creating directory", parent))?;
            }
        }
        super::check_parent_dir(&this.store.path)?;
        save::save_spooled(&this, written, Vec::new(), &|| spool_bytes.clone())
    }

    /// Reads the file under the lock, with the saves still waiting in the
    /// spool folded in (in memory; nothing is written). `None` when there
    /// is neither a file nor a waiting save. A file that is not of the
    /// format is set aside (a warning says where) and reads as empty.
    pub fn load(&self) -> Result<Option<ForeignLoaded>, CacheError> {
        let this = self.resolved()?;
        let _guard = match this.store.acquire_lock(|| false)? {
            Acquired::Locked(g) => Some(g),
            _ => None,
        };
        let Waiting { spools, mut warnings, .. } = this.read_spools(false)?;
        let old = read::read_regular(&this.store.path)?.map(|(bytes, _)| bytes);
        if old.is_none() && spools.is_empty() {
            return Ok(None);
        }
        let (bytes, _) = this.fold_text(old.as_deref(), &spools, &mut warnings)?;
        Ok(Some(ForeignLoaded { bytes, warnings }))
    }

    /// Takes the file's lock (ranktune's and the other program's), waiting
    /// at most the lock timeout; held until the result is dropped.
    pub fn lock(&self) -> Result<ForeignLock, CacheError> {
        let this = self.resolved()?;
        match this.store.acquire_lock(|| false)? {
            Acquired::Locked(g) => Ok(ForeignLock { _guard: g }),
            Acquired::Unsupported(e) => Err(CacheError::Invalid(format!(
                "cannot lock {} on {} ({e}); use a file on a filesystem with locks",
                this.store.lock_path().display(),
                trust::fs_name(&this.store.path)
            ))),
            Acquired::Done => Err(CacheError::Invalid(format!(
                "could not take the lock on {}; try again",
                this.store.lock_path().display()
            ))),
        }
    }
}

/// The saves waiting in the spool: their bytes and paths (in save order),
/// and the warnings about what was skipped.
struct Waiting {
    spools: Vec<Vec<u8>>,
    paths: Vec<PathBuf>,
    warnings: Vec<String>,
}

/// A [`ForeignFile`] whose path is resolved: what the save flow runs on.
struct ForeignView<'a, F> {
    store: FileStore,
    format: &'a F,
}

impl<F: ForeignFormat> ForeignView<'_, F> {
    /// The waiting spool files' bytes (in save order) and paths; a damaged
    /// one is set aside when `set_aside` (the lock is held), else skipped;
    /// anything that is not a regular file is skipped and left alone.
    fn read_spools(&self, set_aside: bool) -> Result<Waiting, CacheError> {
        let modes = trust::SideModes::of(&self.store.path);
        let (mut spools, mut paths, mut warnings) = (Vec::new(), Vec::new(), Vec::new());
        let (dir, cache) = (self.store.spool_path(), &self.store.path);
        // A fold (the lock held) uses the spool as the saves do; a load
        // only reads it, and changes nothing.
        let usage = if set_aside { spool::SpoolUse::Fold } else { spool::SpoolUse::Read };
        let listed = spool::list_checked(&dir, cache, modes, usage)?;
        for path in listed {
            let bytes = match read::read_spool_file(&path)? {
                read::InSpool::File(bytes) => bytes,
                read::InSpool::Gone => continue,
                read::InSpool::NotAFile(kind) => {
                    warnings.push(format!(
                        "{} is {kind}, not a spool file; ranktune skips it and leaves it alone \
                         (it did not put it there): remove it",
                        path.display()
                    ));
                    continue;
                }
            };
            if let Err(reason) = self.format.check_spool(&bytes) {
                let mut msg = format!("spool file {} does not parse ({reason})", path.display());
                if set_aside {
                    let aside = spool::set_aside(&path)?;
                    msg.push_str(&format!("; moved it to {}", aside.display()));
                }
                warnings.push(msg);
                continue;
            }
            spools.push(bytes);
            paths.push(path);
        }
        Ok(Waiting { spools, paths, warnings })
    }

    /// The format's fold of `spools` into `old`; a file that is not of the
    /// format is set aside first (never one reached through a link).
    fn fold_text(
        &self,
        old: Option<&[u8]>,
        spools: &[Vec<u8>],
        warnings: &mut Vec<String>,
    ) -> Result<(Vec<u8>, usize), CacheError> {
        match self.format.fold(old, spools) {
            Ok(folded) => Ok(folded),
            Err(reason) => {
                if self.store.via_link {
                    return Err(self.store.linked_not_set_aside(&reason));
                }
                let (_, msg) = self.store.set_main_aside(&reason)?;
                warnings.push(msg);
                self.format.fold(None, spools).map_err(|reason| {
                    CacheError::Invalid(format!(
                        "cannot fold the waiting saves into a new {}: {reason}",
                        self.store.path.display()
                    ))
                })
            }
        }
    }
}

impl<F: ForeignFormat> Spooled for ForeignView<'_, F> {
    fn store(&self) -> &FileStore {
        &self.store
    }

    fn fold_waiting(&self, locked: bool) -> Result<(usize, Vec<String>), CacheError> {
        let path = &self.store.path;
        let spool_dir = self.store.spool_path();
        if locked {
            write::remove_stale_temps(path, true, Duration::ZERO);
            spool::remove_stale_temps(&spool_dir, STALE_TEMP_AGE);
        } else {
            write::remove_stale_temps(path, false, STALE_TEMP_AGE);
        }
        let modes = trust::SideModes::of(path);
        // Without the lock, another process's spool is never moved.
        let Waiting { spools, paths: folded, mut warnings } = self.read_spools(locked)?;
        let old = read::read_regular(path)?.map(|(bytes, _)| bytes);
        let (bytes, total) = self.fold_text(old.as_deref(), &spools, &mut warnings)?;
        write::write_atomic(path, &bytes, modes.cache)?;
        // Only a lock holder deletes spools: without the lock, another
        // writer may be folding from an older snapshot of the file.
        if locked {
            mark_folded(&folded, &spool_dir)?;
        }
        Ok((total, warnings))
    }
}
