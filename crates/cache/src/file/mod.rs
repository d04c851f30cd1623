//! The JSON file store: one cache file that every rank of a job saves into
//! at the same time, without losing or corrupting anything.
//!
//! # Files
//!
//! For a cache `C` (e.g. `tune.json`):
//!
//! - `C` — the cache, always a whole document (it is only ever replaced by
//!   `rename`), so readers need no lock;
//! - `C.lock` — the sidecar lock (`flock`), never renamed or deleted; its
//!   content only notes the last holder for the "waiting for lock" message;
//! - `C.spool/` — saves not yet folded into `C`, one small document each;
//! - `.C.tmp-<pid>-<thread>-<n>` — a rewrite in progress (only the lock
//!   holder makes these; any other is a killed writer's and is removed);
//!   see [`ranktune_core::atomic_file`];
//! - `C.corrupt-<stamp>` — a file that did not parse, set aside, never
//!   overwritten.
//!
//! # Saving: spool, then group commit
//!
//! Rewriting the whole file under the lock for every rank costs one full
//! rewrite of an ever-growing file per rank — quadratic in ranks. Instead,
//! [`FileStore::save`]:
//!
//! 1. writes its entries to a new spool file (exclusive temp file, then
//!    rename; no waiting). From here on readers see the entries;
//! 2. waits for the lock, watching its spool file: if the spool file
//!    disappears, the lock holder has folded it into `C` (spools are
//!    deleted only after `C` was renamed into place and its directory
//!    fsynced), so the save is done without taking the lock at all;
//! 3. with the lock, if its spool file is still there, it waits until the
//!    spool has been quiet briefly (ranks that finish together are folded
//!    together; a lone save does not wait), then folds **every** waiting spool: reads `C`, applies the
//!    spools in save order, writes one new `C` (exclusive temp, fsync,
//!    rename, fsync directory), then deletes the folded spools.
//!
//! When 64 ranks save at once, the first lock holder folds everything that
//! has arrived, and the rest find their spool already folded: one or two
//! rewrites instead of 64. A fold holds entries as their text and parses
//! only their keys (the codec's text entries), so it costs about a scan and
//! a copy; and it builds only the sections its spools change, copying the
//! others' bytes from the old file into the new one (`fold.rs`), so its
//! memory follows those sections, not the file.
//!
//! Spool files are not fsynced: a save returns only after a rewrite that
//! includes it was fsynced. A spool lost to a power cut belonged to a save
//! that had not returned; a damaged one does not parse and is set aside.
//!
//! # Crash safety (kill -9 between any two steps)
//!
//! - during step 1: only a dot-named temp file in the spool is left; it is
//!   never read and is removed once old; the save had not returned;
//! - after step 1: the entries are in the spool; readers see them and the
//!   next save folds them (durable from then on);
//! - during the rewrite: `C` is untouched; the lock dies with the process;
//!   the next holder removes the temp file;
//! - after the rename, before the spools are deleted: the spools are
//!   folded again later, which changes nothing (same entries, same order).
//!
//! # Loading
//!
//! [`FileStore::load`] lists and reads the spool first, then `C`, and
//! applies the spools over `C`. A spool that vanishes between listing and
//! reading was folded into `C`, which is read after, so no save that
//! returned before the load began is missed.

mod fold;
mod foreign;
mod lock;
mod read;
mod save;
mod spool;
mod sys;
mod trust;
mod write;

pub use foreign::{ForeignFile, ForeignFormat, ForeignLoaded, ForeignLock};
pub use read::read_cache_bytes;

use crate::codec::{self, EntryText, ParseError, Parsed, Stored};
use crate::document::CacheData;
use crate::entry::{Entry, EntryKey, Section};
use crate::error::io;
use crate::store::{self, Loaded, RemovePredicate, Resolver, SaveReport, Store};
use crate::CacheError;
use lock::{Acquired, LockGuard};
use ranktune_core::atomic_file;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Default for how long a save waits for the lock.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(300);

/// Environment variable that sets the lock timeout, in seconds.
pub const LOCK_TIMEOUT_ENV: &str = "RANKTUNE_LOCK_TIMEOUT";

/// Temp files of killed writers that nobody can be writing any more.
const STALE_TEMP_AGE: Duration = Duration::from_secs(600);

/// The most saves that may wait unfolded in the spool of a cache whose
/// filesystem refuses locks: an unlocked save never deletes a spool (it
/// cannot know that no other unlocked writer is folding from an older
/// snapshot), so past this bound further unlocked saves are refused, with
/// the way out, instead of piling up without end.
pub const MAX_UNLOCKED_SPOOLS: usize = 256;

/// The lock timeout from `RANKTUNE_LOCK_TIMEOUT` (seconds, may be
/// fractional), or [`DEFAULT_LOCK_TIMEOUT`] when unset.
///
/// ```
/// # use ranktune_cache::lock_timeout_from_env;
/// assert!(lock_timeout_from_env().is_ok());
/// ```
pub fn lock_timeout_from_env() -> Result<Duration, CacheError> {
    use ranktune_core::setting::{from_env, process_env, seconds, Seconds};
    // 0 tries the lock once; the most is about 31 years (never, in practice).
    let bounds = Seconds { zero: true, max: Duration::from_secs(1_000_000_000), example: "300" };
    from_env(process_env, LOCK_TIMEOUT_ENV, |t, s| seconds(t, s, bounds))
        .map(|t| t.unwrap_or(DEFAULT_LOCK_TIMEOUT))
        .map_err(|e| CacheError::Invalid(e.to_string()))
}

/// The JSON file backend of [`Store`]. See the module docs for the files it
/// uses and why saving is safe and fast with many ranks.
///
/// ```
/// use ranktune_cache::{CacheData, Entry, EntryKey, FileStore, Section, Store};
/// let dir = tempfile::tempdir().unwrap();
/// let store = FileStore::new(dir.path().join("tune.json"));
/// let mut update = CacheData::default();
/// let key = EntryKey { op: "gemm".into(), runner: "blocked".into(),
///     fingerprint: "f0".into(), bucket: ranktune_cache::sizes_bucket(&[vec![64, 64]]) };
/// update.insert(Section::Rank(0), key.clone(), Entry { runner_index: 0,
///     tactic: serde_json::json!(3), time_us: 12.5, candidates: vec![],
///     checksum: "c".into(), env: "e".into(), created_unix: 0 });
/// store.save(&update).unwrap();
/// assert_eq!(store.load().unwrap().data.get(Section::Rank(0), &key).unwrap().time_us, 12.5);
/// ```
#[derive(Clone, Debug)]
pub struct FileStore {
    path: PathBuf,
    lock_timeout: Duration,
    locking: bool,
    /// The path was reached through a symlink: a file there that does not
    /// parse is not known to be a ranktune cache, so it is never set aside.
    via_link: bool,
    /// The locks a writer takes (a foreign format's file adds its program's
    /// record lock: see [`foreign`]).
    lock_kind: lock::LockKind,
    /// The spool directory is `<path>.<spool_suffix>`.
    spool_suffix: &'static str,
}

/// What to do with a main file that does not parse.
#[derive(Clone, Copy, PartialEq)]
enum Aside {
    /// Report it as an error (read-only inspection).
    Never,
    /// Set it aside, taking the lock for that.
    TakeLock,
    /// Set it aside; the caller already holds the lock (or cannot lock).
    HaveLock,
}

struct MainFile<E> {
    doc: Parsed<E>,
    /// Where an unparseable file went, and the warning that says so.
    moved_aside: Option<(PathBuf, String)>,
}

enum SpoolRead<T> {
    Read(T),
    /// It did not parse and was set aside (or, read-only, skipped).
    Corrupt(String),
    Gone,
    Unsupported(String),
    /// Not a regular file (a directory, FIFO, device, socket or symlink
    /// someone put in the spool): skipped, never read, moved or deleted.
    NotAFile(String),
}

/// A change a fold makes under the lock, after every waiting spool was
/// applied; returns how many entries it changed.
type Edit<'a> = dyn FnMut(&mut CacheData<EntryText>) -> Result<usize, CacheError> + 'a;

/// An edit's removals from one section, given that section's entries
/// alone; returns how many it removed.
type SectionEdit<'a> = dyn Fn(Section, &mut BTreeMap<EntryKey, EntryText>) -> usize + 'a;

impl FileStore {
    /// A store for the cache file at `path`, with the lock timeout
    /// [`DEFAULT_LOCK_TIMEOUT`]. Does no I/O and reads no environment (see
    /// [`FileStore::from_env`] for what the CLI uses).
    pub fn new(path: impl Into<PathBuf>) -> FileStore {
        FileStore {
            path: path.into(),
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            locking: true,
            via_link: false,
            lock_kind: lock::LockKind::Flock,
            spool_suffix: "spool",
        }
    }

    /// A store for `path` configured from the environment: the lock timeout
    /// from `RANKTUNE_LOCK_TIMEOUT`. A malformed value is an error (never
    /// silently the default), so every command that opens a store treats it
    /// the same way. Does no I/O.
    ///
    /// ```
    /// # use ranktune_cache::FileStore;
    /// assert!(FileStore::from_env("tune.json").is_ok());
    /// ```
    pub fn from_env(path: impl Into<PathBuf>) -> Result<FileStore, CacheError> {
        Ok(FileStore::new(path).with_lock_timeout(lock_timeout_from_env()?))
    }

    /// Sets how long a save waits for the lock before failing.
    pub fn with_lock_timeout(mut self, t: Duration) -> FileStore {
        self.lock_timeout = t;
        self
    }

    /// Saves without taking the lock, as happens automatically where the
    /// filesystem refuses locks. The file stays whole (rename is atomic) and
    /// spool files are kept, so readers still see every save; but spools are
    /// never cleaned up, so use this only where locking cannot work.
    pub fn without_locking(mut self) -> FileStore {
        self.locking = false;
        self
    }

    /// The cache file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This store with a symlinked cache path replaced by its target, so a
    /// save rewrites the target and the link stays a link. Links are
    /// followed one hop at a time and only where the kernel's
    /// `protected_symlinks` would (see `trust::resolve`).
    fn resolved(&self) -> Result<Cow<'_, FileStore>, CacheError> {
        let (path, via_link) = trust::resolve(&self.path)?;
        if !via_link {
            return Ok(Cow::Borrowed(self));
        }
        Ok(Cow::Owned(FileStore { path, via_link, ..self.clone() }))
    }

    /// The error for a damaged cache that cannot be moved aside: in a
    /// sticky directory only the file's owner (or the directory's) may
    /// rename it, so name them and what to do.
    fn cannot_set_aside(&self, e: std::io::Error, reason: &str) -> CacheError {
        if e.kind() != std::io::ErrorKind::PermissionDenied {
            return io("setting aside", &self.path)(e);
        }
        let dir = atomic_file::parent_dir(&self.path);
        let owner = std::fs::symlink_metadata(&self.path).map(|m| m.uid()).ok();
        let dir_meta = std::fs::metadata(&dir).ok();
        let sticky = dir_meta.as_ref().is_some_and(|m| m.mode() & 0o1000 != 0);
        let who = owner.map_or_else(|| "someone else".to_string(), sys::user_label);
        let why = if sticky {
            format!(
                "{} is a sticky directory, where only the file's owner ({who}) or the \
                 directory's ({}) may move it, and you are {}",
                dir.display(),
                dir_meta.map_or_else(|| "?".to_string(), |m| sys::user_label(m.uid())),
                sys::user_label(sys::euid())
            )
        } else {
            format!(
                "you ({}) may not rename files in {}; the file is owned by {who}",
                sys::user_label(sys::euid()),
                dir.display()
            )
        };
        CacheError::Corrupt {
            path: self.path.clone(),
            reason: format!(
                "{reason}; it cannot be set aside: {why}. Ask its owner to remove it, or use a \
                 cache path of your own (nothing was written)"
            ),
        }
    }

    /// The sidecar lock file, `<path>.lock`.
    pub fn lock_path(&self) -> PathBuf {
        lock::lock_path(&self.path)
    }

    /// The spool directory, `<path>.spool`.
    pub fn spool_path(&self) -> PathBuf {
        spool::spool_dir(&self.path, self.spool_suffix)
    }

    /// Whether saves wait in the spool, not folded into the cache file yet
    /// (a writer killed between writing its spool file and the fold, e.g.
    /// during the very first save, when the cache file does not exist yet).
    /// Loads see their entries, so a cache of waiting saves alone is a
    /// cache. A spool that cannot be listed counts as none.
    pub fn has_waiting_saves(&self) -> bool {
        spool::list(&self.spool_path()).is_ok_and(|l| !l.is_empty())
    }

    /// Reads the main file, entries held as `E` (`strict`: see
    /// [`codec::read`]); a file that does not parse is handled as `aside`
    /// says.
    fn read_main<E: Stored>(&self, aside: Aside, strict: bool) -> Result<MainFile<E>, CacheError> {
        for _ in 0..5 {
            let Some((bytes, ident)) = read::read_regular(&self.path)? else {
                return Ok(MainFile { doc: Parsed::default(), moved_aside: None });
            };
            let reason = match codec::read(&bytes, strict) {
                Ok(doc) => return Ok(MainFile { doc, moved_aside: None }),
                Err(ParseError::Unsupported(reason)) => {
                    return Err(CacheError::unsupported(&self.path, reason))
                }
                Err(ParseError::Unparseable(reason)) => reason,
            };
            if self.via_link && aside != Aside::Never {
                return Err(self.linked_not_set_aside(&reason));
            }
            let _guard = match aside {
                Aside::Never => {
                    return Err(CacheError::Corrupt { path: self.path.clone(), reason })
                }
                Aside::HaveLock => None,
                Aside::TakeLock if !self.locking => None,
                Aside::TakeLock => match self.acquire_lock(|| false)? {
                    Acquired::Locked(g) => Some(g),
                    _ => None,
                },
            };
            // Set it aside only if it is still the file we read: a writer
            // may have replaced it with a good one meanwhile.
            let same = std::fs::symlink_metadata(&self.path)
                .map(|m| (m.dev(), m.ino()) == ident)
                .unwrap_or(false);
            if !same {
                continue;
            }
            let moved = self.set_main_aside(&reason)?;
            return Ok(MainFile { doc: Parsed::default(), moved_aside: Some(moved) });
        }
        Err(CacheError::Invalid(format!(
            "{} kept changing while it was read; is something else rewriting it?",
            self.path.display()
        )))
    }

    /// The error for a main file that does not parse (`reason`) reached
    /// through a symbolic link: it may not be a cache at all, so it is
    /// never set aside.
    fn linked_not_set_aside(&self, reason: &str) -> CacheError {
        CacheError::Corrupt {
            path: self.path.clone(),
            reason: format!(
                "{reason}; it was reached through a symbolic link, so it may not be a ranktune \
                 cache and is left alone: fix or remove it, or point the link elsewhere"
            ),
        }
    }

    /// Moves the main file, which does not parse (`reason`), to
    /// `C.corrupt-<UTC stamp>`, never over anything; the caller holds the
    /// lock (or cannot lock). Returns where it went and the warning that
    /// says so.
    fn set_main_aside(&self, reason: &str) -> Result<(PathBuf, String), CacheError> {
        let aside_path = self.aside_path();
        if let Err(e) = sys::rename_noreplace(&self.path, &aside_path) {
            return Err(self.cannot_set_aside(e, reason));
        }
        let dir = atomic_file::parent_dir(&self.path);
        atomic_file::sync_dir(&dir).map_err(io("fsyncing directory", &dir))?;
        let msg = format!(
            "{} does not parse ({reason}); moved it to {} and continuing with an empty cache",
            self.path.display(),
            aside_path.display()
        );
        Ok((aside_path, msg))
    }

    /// `C.corrupt-<stamp>[-n]`, built from the path's bytes (a directory
    /// whose name is not UTF-8 works too).
    fn aside_path(&self) -> PathBuf {
        let stamp = write::utc_stamp(SystemTime::now());
        let mut base = self.path.as_os_str().to_owned();
        base.push(format!(".corrupt-{stamp}"));
        let mut candidate = PathBuf::from(&base);
        let mut n = 1;
        while std::fs::symlink_metadata(&candidate).is_ok() {
            let mut next = base.clone();
            next.push(format!("-{n}"));
            candidate = PathBuf::from(next);
            n += 1;
        }
        candidate
    }

    fn read_spool<E: Stored>(
        &self,
        path: &Path,
        set_aside: bool,
    ) -> Result<SpoolRead<Parsed<E>>, CacheError> {
        let bytes = match read::read_spool_file(path)? {
            read::InSpool::File(bytes) => bytes,
            read::InSpool::Gone => return Ok(SpoolRead::Gone),
            read::InSpool::NotAFile(kind) => {
                return Ok(SpoolRead::NotAFile(format!(
                    "{} is {kind}, not a spool file; ranktune skips it and leaves it alone (it \
                     did not put it there): remove it",
                    path.display()
                )))
            }
        };
        match codec::read(&bytes, false) {
            Ok(p) => Ok(SpoolRead::Read(p)),
            Err(ParseError::Unsupported(r)) => {
                Ok(SpoolRead::Unsupported(format!("spool file {} left alone: {r}", path.display())))
            }
            Err(ParseError::Unparseable(r)) => {
                let mut msg = format!("spool file {} does not parse ({r})", path.display());
                if set_aside {
                    let aside = spool::set_aside(path)?;
                    msg.push_str(&format!("; moved it to {}", aside.display()));
                }
                Ok(SpoolRead::Corrupt(msg))
            }
        }
    }

    fn load_with(&self, aside: Aside) -> Result<Loaded, CacheError> {
        self.load_selected(aside, &|_| true)
    }

    /// Loads the sections `select` picks (plus what lies outside the
    /// sections), never building the others: see `fold.rs`.
    fn load_selected(
        &self,
        aside: Aside,
        select: &dyn Fn(Section) -> bool,
    ) -> Result<Loaded, CacheError> {
        // Spools first, then the main file: see the module docs.
        let mut spools = Vec::new();
        let mut warnings = Vec::new();
        let mut bad_entries = 0;
        // A spool directory someone else planted is not read: its saves are
        // not the cache's (a save there is refused, so nothing of ours waits).
        let listed = spool::list_checked(
            &self.spool_path(),
            &self.path,
            trust::SideModes::of(&self.path),
            spool::SpoolUse::Read,
        )
        .unwrap_or_else(|e| {
            warnings.push(format!("{e}; loading without it"));
            Vec::new()
        });
        for path in listed {
            match self.read_spool::<Entry>(&path, false)? {
                SpoolRead::Read(mut p) => {
                    p.data.sections.retain(|s, _| select(*s));
                    spools.push(p);
                }
                SpoolRead::Gone => {}
                SpoolRead::Corrupt(msg)
                | SpoolRead::Unsupported(msg)
                | SpoolRead::NotAFile(msg) => warnings.push(msg),
            }
        }
        let main = self.read_main_selected::<Entry>(aside, select)?;
        let mut data = main.doc.data;
        let mut all = Vec::new();
        let moved_aside = main.moved_aside.map(|(path, msg)| {
            all.push(msg);
            path
        });
        all.extend(main.doc.warnings.into_iter().map(|w| self.named(w)));
        all.append(&mut warnings);
        bad_entries += main.doc.bad_entries;
        for s in spools {
            all.extend(s.warnings);
            bad_entries += s.bad_entries;
            data.apply(s.data);
        }
        Ok(Loaded { data, warnings: all, bad_entries, moved_aside })
    }

    fn named(&self, w: String) -> String {
        if w.starts_with(&*self.path.to_string_lossy()) {
            w
        } else {
            format!("{}: {w}", self.path.display())
        }
    }

    /// Folds every spool into a new main file, then applies `edit`, under
    /// the lock when `locked` (then the folded spools are deleted). Entries
    /// stay text ([`EntryText`]); `strict` also drops malformed entries.
    /// Returns (entries after, entries the edit changed, warnings); warnings
    /// are returned, not logged.
    fn fold(
        &self,
        locked: bool,
        strict: bool,
        edit: Option<&mut Edit<'_>>,
    ) -> Result<(usize, usize, Vec<String>), CacheError> {
        self.fold_probed(locked, strict, edit, None)
    }

    /// [`Self::fold`]; with `probe` (which sections `edit` changes, see
    /// [`fold::Probed`], and the sections it adds to) the edit, too, runs
    /// on the streaming fold.
    fn fold_probed(
        &self,
        locked: bool,
        strict: bool,
        mut edit: Option<&mut Edit<'_>>,
        probe: Option<(&SectionEdit<'_>, &[Section], &std::cell::Cell<usize>)>,
    ) -> Result<(usize, usize, Vec<String>), CacheError> {
        let t0 = std::time::Instant::now();
        let spool_dir = self.spool_path();
        if locked {
            write::remove_stale_temps(&self.path, true, Duration::ZERO);
            spool::remove_stale_temps(&spool_dir, STALE_TEMP_AGE);
        } else {
            write::remove_stale_temps(&self.path, false, STALE_TEMP_AGE);
        }
        // The cache's mode, kept even when it is set aside and rewritten.
        let modes = trust::SideModes::of(&self.path);
        let streamed = match (edit.as_deref_mut(), probe) {
            (None, _) => Some(None),
            (Some(edit), Some((remove, builds, removed))) => {
                Some(Some(fold::Probed { edit, remove, builds, removed }))
            }
            (Some(_), None) => None,
        };
        if let (false, Some(probed)) = (strict, streamed) {
            if let Some(folded) = self.fold_streaming(locked, probed)? {
                tracing::debug!(
                    "streaming fold of {} took {:?}",
                    self.path.display(),
                    t0.elapsed()
                );
                return Ok(folded);
            }
        }
        let main = self.read_main::<EntryText>(Aside::HaveLock, strict)?;
        let t_main = t0.elapsed();
        let Parsed { data: mut doc, warnings: main_warnings, bad_entries } = main.doc;
        let mut warnings: Vec<String> = main.moved_aside.into_iter().map(|(_, m)| m).collect();
        warnings.extend(main_warnings.into_iter().map(|w| self.named(w)));
        let main_entries = doc.stored_len();
        let mut changed = strict && bad_entries > 0;
        let mut folded = Vec::new();
        for path in spool::list_checked(&spool_dir, &self.path, modes, spool::SpoolUse::Fold)? {
            // Without the lock, another process's spool is never moved.
            match self.read_spool::<EntryText>(&path, locked)? {
                SpoolRead::Read(p) => {
                    warnings.extend(p.warnings);
                    changed |= doc.apply(p.data);
                    folded.push(path);
                }
                SpoolRead::Corrupt(msg) => warnings.push(msg),
                SpoolRead::Gone => {}
                SpoolRead::Unsupported(msg) | SpoolRead::NotAFile(msg) => warnings.push(msg),
            }
        }
        let t_spools = t0.elapsed();
        let edited = match edit {
            Some(edit) => edit(&mut doc)?,
            None => 0,
        };
        doc.drop_empty_sections();
        changed |= edited > 0;
        if changed {
            stamp(&mut doc.metadata);
            write::write_atomic(&self.path, &codec::write(&doc), modes.cache)?;
        }
        // Only a lock holder deletes spools: without the lock, another
        // writer may be folding from an older snapshot of the file.
        if locked {
            mark_folded(&folded, &spool_dir)?;
        }
        let total = doc.stored_len();
        tracing::debug!(
            "folded {} spool(s) into {} ({main_entries} entries before, {total} after): \
             read {t_main:?}, spools {:?}, total {:?}",
            folded.len(),
            self.path.display(),
            t_spools - t_main,
            t0.elapsed()
        );
        Ok((total, edited, warnings))
    }

    /// The "cannot lock" warning, for every save's report (returned, not
    /// logged: callers log).
    fn warn_no_lock(&self, why: &str) -> String {
        format!(
            "cannot lock {} on {} ({why}); saving without a lock: the cache file stays \
             whole, and saves are kept in {} (at most {MAX_UNLOCKED_SPOOLS}) until a save on a \
             filesystem with locks folds them; a redis:// cache needs no file locks",
            self.lock_path().display(),
            trust::fs_name(&self.path),
            self.spool_path().display()
        )
    }

    /// Takes this cache's lock (the sidecar `<file>.lock`, with the cache's
    /// modes), waiting at most the lock timeout; `done` says, while it
    /// waits, that the lock is no longer needed.
    fn acquire_lock(&self, done: impl FnMut() -> bool) -> Result<lock::Acquired, CacheError> {
        lock::acquire(
            &self.lock_path(),
            &self.path,
            trust::SideModes::of(&self.path),
            self.lock_kind,
            self.lock_timeout,
            done,
        )
    }

    /// Takes the lock for an edit (remove, resolving save), waiting up to
    /// the timeout. An edit can remove entries (or, folding from an older
    /// snapshot, drop saves that returned), so it never runs without the
    /// lock: where the filesystem cannot lock, it is refused with the way
    /// out.
    fn lock_for_edit(&self, warnings: &mut Vec<String>) -> Result<LockGuard, CacheError> {
        self.try_edit_lock(warnings)?.map_err(|why| self.refuse_unlocked_edit(&why))
    }

    /// Takes the lock for an edit, waiting up to the timeout; `Ok(Err(why))`
    /// where the filesystem cannot lock.
    fn try_edit_lock(
        &self,
        warnings: &mut Vec<String>,
    ) -> Result<Result<LockGuard, String>, CacheError> {
        let outcome = if self.locking {
            self.acquire_lock(|| false)?
        } else {
            Acquired::Unsupported(std::io::Error::other("locking turned off"))
        };
        match outcome {
            Acquired::Locked(g) => {
                warnings.extend(trust::warn_if_node_local_locks(&self.path));
                Ok(Ok(g))
            }
            Acquired::Unsupported(e) => Ok(Err(e.to_string())),
            Acquired::Done => Err(CacheError::Invalid(format!(
                "could not take the lock on {} for an edit; try again",
                self.lock_path().display()
            ))),
        }
    }

    /// The error for an edit (prune, merge -o, remove, a superseding save)
    /// where the filesystem cannot lock.
    fn refuse_unlocked_edit(&self, why: &str) -> CacheError {
        CacheError::Invalid(format!(
            "cannot lock {} on {} ({why}); an edit that can remove entries (prune, merge -o, \
             remove, a shared save) never runs without the lock, since it could drop saves of \
             other processes: nothing was changed. Copy the cache to a local filesystem, edit it \
             there and copy it back while nothing else uses it, mount the filesystem with locks \
             (NFS: without nolock/local_lock; Lustre: -o flock), or use a redis:// cache",
            self.lock_path().display(),
            trust::fs_name(&self.path),
        ))
    }
}

impl Store for FileStore {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    /// Reads the cache without changing anything on disk: no lock, nothing
    /// set aside, nothing logged. A file that does not parse is
    /// [`CacheError::Corrupt`]; bad entries are skipped and listed in
    /// [`Loaded::warnings`]. For `cache show` and `cache check`.
    fn inspect(&self) -> Result<Loaded, CacheError> {
        self.resolved()?.load_with(Aside::Never)
    }

    /// Like [`Store::save`], but where the store already holds an entry
    /// under the same key, `take_new(section, key, stored, new)` decides —
    /// under the lock, against the entry as stored at that moment (with
    /// every waiting save folded in), so a save that lands between a
    /// caller's read and this save is judged by the rule, not overwritten.
    /// `cache merge -o` uses it with the "newest wins" rule. `written` in
    /// the report is the number of entries of `update` that were stored.
    fn save_resolving(
        &self,
        update: &CacheData,
        take_new: &Resolver<'_>,
    ) -> Result<SaveReport, CacheError> {
        let this = self.resolved()?;
        check_parent_dir(&this.path)?;
        this.refuse_foreign_file()?;
        let (update, mut warnings) = store::prepare(update);
        let _guard = this.lock_for_edit(&mut warnings)?;
        let mut written = 0;
        let mut edit = |doc: &mut CacheData<EntryText>| -> Result<usize, CacheError> {
            let mut winners = CacheData::default();
            winners.metadata.environments = update.metadata.environments.clone();
            winners.blocklist = update.blocklist.clone();
            for (section, key, entry) in update.iter() {
                let stored = doc.get(section, key).and_then(EntryText::entry);
                if stored.as_ref().is_none_or(|old| take_new(section, key, old, entry)) {
                    winners.insert(section, key.clone(), EntryText::new(key, entry));
                }
            }
            written = winners.len();
            Ok(usize::from(doc.apply(winners)))
        };
        let (total, _, fold_warnings) = this.fold(true, false, Some(&mut edit))?;
        warnings.extend(fold_warnings);
        Ok(SaveReport { written, total, warnings, superseded: 0 })
    }

    /// Loads the cache plus any saves not yet folded into it. A file that
    /// does not parse is moved aside (see [`Loaded::moved_aside`]) and the
    /// load goes on with an empty cache; bad entries are skipped. Fails on
    /// I/O errors and on files this build must not touch
    /// ([`CacheError::Unsupported`]).
    ///
    /// Warnings are returned in [`Loaded::warnings`], not logged: the caller
    /// logs them, once.
    fn load(&self) -> Result<Loaded, CacheError> {
        self.resolved()?.load_with(Aside::TakeLock)
    }

    /// Like [`Store::load`], reading only `sections` (and what lies outside
    /// the sections): the others are skipped by a scan of the text, never
    /// parsed, so a rank's load costs about its sections, not the file.
    fn load_sections(&self, sections: &[Section]) -> Result<Loaded, CacheError> {
        self.resolved()?.load_selected(Aside::TakeLock, &|s| sections.contains(&s))
    }

    /// Merges `update` into the file: adds or replaces its entries, never
    /// drops others, and records its identities in `metadata.environments`.
    /// Entries with a non-finite or negative time are not saved (warned).
    ///
    /// `total` in the report is the number of entries after the rewrite
    /// when this save did the rewrite; when another process's rewrite
    /// included this save, counting would cost a full read, and `total` is
    /// reported as `written`.
    fn save(&self, update: &CacheData) -> Result<SaveReport, CacheError> {
        let this = self.resolved()?;
        this.save_resolved(update)
    }

    /// Removes `keys` through the same locked path as `save` (folding any
    /// waiting saves first), and drops malformed entries, naming each in the
    /// report's warnings. `written` in the report is the number removed.
    fn remove(&self, keys: &[(Section, EntryKey)]) -> Result<SaveReport, CacheError> {
        self.resolved()?.edit_resolved(&mut |doc: &mut CacheData<EntryText>| {
            let mut n = 0;
            for (section, key) in keys {
                if let Some(entries) = doc.sections.get_mut(section) {
                    n += usize::from(entries.remove(key).is_some());
                }
            }
            Ok(n)
        })
    }

    /// Removes the entries `pred` picks, deciding on each entry as stored
    /// under the lock after every waiting save was folded in: a save that
    /// returned before (or while) this runs is judged by what it saved, so
    /// `cache prune` never removes a fresh entry for being what an older
    /// one was. Also drops malformed entries, like [`Store::remove`].
    fn remove_where(&self, pred: &RemovePredicate<'_>) -> Result<SaveReport, CacheError> {
        self.resolved()?.edit_resolved(&mut |doc: &mut CacheData<EntryText>| {
            let mut n = 0;
            for (section, entries) in doc.sections.iter_mut() {
                entries.retain(|key, text| {
                    let drop = text.entry().is_some_and(|e| pred(*section, key, &e));
                    n += usize::from(drop);
                    !drop
                });
            }
            Ok(n)
        })
    }

    /// [`Store::save`] and the removal of the rank entries `update`'s
    /// `shared` entries supersede, in one rewrite under the lock (after
    /// every waiting save was folded in), so a concurrent save is never lost
    /// and no reader ever sees the shared entry missing or both.
    fn save_superseding(&self, update: &CacheData) -> Result<SaveReport, CacheError> {
        if !update.sections.contains_key(&Section::Shared) {
            return self.save(update);
        }
        let this = self.resolved()?;
        let (update, mut warnings) = store::prepare(update);
        let written = update.len();
        if let Some(parent) = this.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io("creating directory", parent))?;
        }
        let _guard = match this.try_edit_lock(&mut warnings)? {
            Ok(g) => g,
            // Without the lock, nothing may be removed: save the entries
            // plainly and keep the rank entries they supersede (a reader
            // then sees both, which changes no decision).
            Err(why) => {
                let mut report = this.save_resolved(&update)?;
                report.warnings.push(format!(
                    "cannot lock {} ({why}): kept the rank entries these shared entries \
                     supersede; they are removed by the next save where locks work",
                    this.lock_path().display()
                ));
                return Ok(report);
            }
        };
        // The rank entries these shared entries supersede, removed from one
        // section (a cheap look at op and bucket first, the entry only then).
        let superseding: BTreeSet<(&str, &Vec<Vec<crate::Dim>>)> = update
            .sections
            .get(&Section::Shared)
            .map(|s| s.keys().map(|k| (k.op.as_str(), &k.bucket)).collect())
            .unwrap_or_default();
        let remove = |section: Section, entries: &mut BTreeMap<EntryKey, EntryText>| {
            let before = entries.len();
            entries.retain(|key, text| {
                !(superseding.contains(&(key.op.as_str(), &key.bucket))
                    && text
                        .entry()
                        .is_some_and(|e| crate::store::superseded_by(&update, section, key, &e)))
            });
            before - entries.len()
        };
        let superseded = std::cell::Cell::new(0);
        let mut edit = |doc: &mut CacheData<EntryText>| -> Result<usize, CacheError> {
            let n: usize = doc.sections.iter_mut().map(|(s, es)| remove(*s, es)).sum();
            superseded.set(superseded.get() + n);
            let mut new = CacheData::default();
            new.metadata.environments = update.metadata.environments.clone();
            new.blocklist = update.blocklist.clone();
            for (section, key, entry) in update.iter() {
                new.insert(section, key.clone(), EntryText::new(key, entry));
            }
            Ok(n + usize::from(doc.apply(new)))
        };
        // Streamed where the file allows (docs/cache.md, "Memory"): the
        // sections holding a superseded entry are found one at a time and
        // rebuilt one at a time as they are written, so a rank's collective
        // save holds its own sections, not the file.
        let (total, _, fold_warnings) = this.fold_probed(
            true,
            false,
            Some(&mut edit),
            Some((&remove, &[Section::Shared], &superseded)),
        )?;
        let superseded = superseded.get();
        warnings.extend(fold_warnings);
        Ok(SaveReport { written, total, warnings, superseded })
    }
}

impl FileStore {
    /// Before the first write next to a file ranktune has not written yet
    /// (no lock file beside it), checks that the file is one this build may
    /// rewrite, so that a save into a TensorRT-LLM cache or a newer format
    /// fails before any lock file or spool is created next to it. A file
    /// that does not parse is left to the usual path (set aside, then
    /// saved); once a lock file exists, the check is the fold's, under the
    /// lock, and costs nothing here.
    fn refuse_foreign_file(&self) -> Result<(), CacheError> {
        if std::fs::symlink_metadata(self.lock_path()).is_ok()
            || std::fs::symlink_metadata(&self.path).is_err()
        {
            return Ok(());
        }
        // Only the top level decides: no section is built.
        match self.read_main_selected::<Entry>(Aside::Never, &|_| false) {
            Err(e @ CacheError::Unsupported { .. }) => Err(e),
            _ => Ok(()),
        }
    }

    /// Folds every waiting save and applies `edit`, under the lock (with
    /// malformed entries dropped). `written` in the report is what the edit
    /// changed.
    fn edit_resolved(&self, edit: &mut Edit<'_>) -> Result<SaveReport, CacheError> {
        self.refuse_foreign_file()?;
        let mut warnings = Vec::new();
        let _guard = self.lock_for_edit(&mut warnings)?;
        let (total, edited, fold_warnings) = self.fold(true, true, Some(edit))?;
        warnings.extend(fold_warnings);
        Ok(SaveReport { written: edited, total, warnings, superseded: 0 })
    }
}

/// Stamps the metadata of a document about to be rewritten: this build,
/// this host, now.
fn stamp(m: &mut crate::document::Metadata) {
    let now = crate::time::unix_now();
    m.lib_version = env!("CARGO_PKG_VERSION").to_string();
    m.host = ranktune_core::rank::host_name();
    if m.created_unix == 0 {
        m.created_unix = now;
    }
    m.updated_unix = now;
}

/// After a locked rewrite: each folded spool becomes its marker, which
/// tells its save that it was folded (see `spool::folded_marker`), or goes
/// when nobody waits for it; then the spool directory is fsynced, old
/// markers removed, and the directory removed once empty. Only a lock
/// holder calls this.
fn mark_folded(folded: &[PathBuf], spool_dir: &Path) -> Result<(), CacheError> {
    spool::remove_stale_markers(spool_dir, STALE_TEMP_AGE);
    let mut any = false;
    for p in folded {
        any |= spool::mark_folded(p);
    }
    if any {
        atomic_file::sync_dir(spool_dir).map_err(io("fsyncing directory", spool_dir))?;
    }
    spool::remove_if_empty(spool_dir);
    Ok(())
}

/// Writes `data` as a whole cache file at `path`, atomically (temp file,
/// fsync, rename, fsync directory), without locking or merging: for tools
/// that produce a new file (`cache merge -o`, `cache export`, benchmarks).
/// To add entries to a cache that others may be writing, use
/// [`FileStore::save`].
pub fn write_cache_file(path: &Path, data: &CacheData) -> Result<(), CacheError> {
    write::write_atomic(path, &codec::cache_to_bytes(data), None)
}

/// Reads and parses a whole cache file without side effects; the same as
/// [`FileStore::inspect`] but ignoring any spool.
pub fn read_cache_file(path: &Path) -> Result<Parsed, CacheError> {
    let bytes = read::read_cache_bytes(path)?;
    codec::parse_cache(&bytes).map_err(|e| match e {
        ParseError::Unparseable(reason) => CacheError::Corrupt { path: path.into(), reason },
        ParseError::Unsupported(reason) => CacheError::unsupported(path, reason),
    })
}

/// Checks that the directory a cache file (or any file ranktune writes next
/// to caches) would go in exists, before anything is created: ranktune
/// never creates directories for a cache path. Errors name the problem and
/// the fix: a missing directory (`mkdir -p` it), or a path component that is
/// a file, not a directory.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// assert!(ranktune_cache::check_parent_dir(&dir.path().join("c.json")).is_ok());
/// let e = ranktune_cache::check_parent_dir(&dir.path().join("no/c.json")).unwrap_err();
/// assert!(e.to_string().contains("does not exist"), "{e}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_parent_dir(path: &Path) -> Result<(), CacheError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if std::fs::metadata(parent).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    // The nearest ancestor that exists says what is wrong.
    for a in parent.ancestors().filter(|a| !a.as_os_str().is_empty()) {
        match std::fs::metadata(a) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => {
                return Err(CacheError::Invalid(format!(
                    "cannot use {}: {} is a file, not a directory; choose another path",
                    path.display(),
                    a.display()
                )))
            }
            Err(_) => continue,
        }
    }
    Err(CacheError::Invalid(format!(
        "cannot use {}: directory {} does not exist; create it first (mkdir -p {}) or choose \
         another path",
        path.display(),
        parent.display(),
        parent.display()
    )))
}
