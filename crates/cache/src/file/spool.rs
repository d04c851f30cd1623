//! The spool: `<file>.spool/`, where each save drops its entries before
//! (and instead of, when someone else folds them) rewriting the cache.
//!
//! A spool file is a small cache document named
//! `<nanos>-<pid>-<seq>.json` so that names sort in save order; it appears
//! atomically (published through [`ranktune_core::atomic_file`]: a dot-named temp
//! file in the spool, then renamed). This module owns the naming and listing
//! rules; it must never fold spools into the cache (that is the store's
//! job, under the lock), and never remove or move anything in the spool
//! that is not a spool file it can read (a directory, a FIFO, a device or a
//! symlink someone put there is not ours).

use super::sys;
use super::trust::{self, SideModes};
use crate::error::io;
use crate::CacheError;
use ranktune_core::atomic_file::{self, Publish, PublishError, Step};
use ranktune_core::fork_guard::CloseOnFork;
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

static SEQ: AtomicU64 = AtomicU64::new(0);
static LAST_NANOS: Mutex<u128> = Mutex::new(0);

/// The spool directory that belongs to `cache`: `<cache>.<suffix>`
/// (`spool` for a ranktune cache; a foreign format's file has its own, see
/// `foreign`).
pub(crate) fn spool_dir(cache: &Path, suffix: &str) -> PathBuf {
    let mut s = cache.as_os_str().to_owned();
    s.push(".");
    s.push(suffix);
    PathBuf::from(s)
}

/// Wall-clock nanoseconds, strictly increasing within this process (so one
/// process's saves keep their order even if the clock steps back).
fn next_nanos() -> u128 {
    let now =
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut last = LAST_NANOS.lock().unwrap_or_else(|p| p.into_inner());
    *last = now.max(*last + 1);
    *last
}

/// Where damaged spool files are set aside: `<spool>/corrupt/`, under
/// their own name, so that the save that wrote one can tell "set aside"
/// from "folded" (see [`state`]).
pub(crate) fn corrupt_dir(dir: &Path) -> PathBuf {
    dir.join("corrupt")
}

/// Moves the damaged spool file `path` into [`corrupt_dir`], keeping its
/// name; returns where it went.
pub(crate) fn set_aside(path: &Path) -> Result<PathBuf, CacheError> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(CacheError::Invalid(format!("{} is not a spool file", path.display())));
    };
    let to_dir = corrupt_dir(dir);
    match std::fs::DirBuilder::new().create(&to_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("creating directory", &to_dir)(e)),
    }
    let to = to_dir.join(name);
    std::fs::rename(path, &to).map_err(io("setting aside", path))?;
    Ok(to)
}

/// The marker a folded spool file becomes: `<spool file>.folded`. The lock
/// holder renames each spool it folded to its marker (after the rewrite
/// that includes it is durable) instead of deleting it, so the save that
/// wrote it can tell "folded" from "vanished" (removed by something else
/// before it was folded). That save removes its marker; markers of saves
/// that died are removed by a later fold once old (see
/// [`remove_stale_markers`]).
pub(crate) fn folded_marker(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".folded");
    PathBuf::from(s)
}

/// Done with the folded spool file `path`: deleted when no save waits for
/// it (nobody holds its shared lock: the save returned or died), else
/// renamed to its marker (see [`folded_marker`]). Returns whether it went.
pub(crate) fn mark_folded(path: &Path) -> bool {
    let waited_for = match sys::open_read_nofollow_nonblock(path) {
        Ok(f) => !matches!(sys::try_lock_exclusive(&f), Ok(sys::TryLock::Acquired)),
        Err(_) => true,
    };
    if waited_for {
        std::fs::rename(path, folded_marker(path)).is_ok()
    } else {
        std::fs::remove_file(path).is_ok()
    }
}

/// Removes this save's folded marker, and the spool directory if that
/// leaves it empty.
pub(crate) fn forget_folded(path: &Path) {
    let _ = std::fs::remove_file(folded_marker(path));
    if let Some(dir) = path.parent() {
        remove_if_empty(dir);
    }
}

/// Where a save's spool file stands.
#[derive(Debug)]
pub(crate) enum SpoolState {
    /// Still waiting to be folded.
    Waiting,
    /// A lock holder folded it into the cache (it became its marker only
    /// after the rewrite that includes it was durable).
    Folded,
    /// It did not parse and was set aside there; it was not saved.
    SetAside(PathBuf),
    /// Gone without being folded or set aside: something other than
    /// ranktune removed it, so its entries never reached the cache.
    Vanished,
}

/// The state of the spool file `path`. Only `NotFound` counts as gone; any
/// other error (e.g. permission denied) is returned, never taken as folded.
/// The marker and the corrupt directory are looked at after the spool
/// file, and the renames into them are atomic, so a folded or set-aside
/// file is never taken for a vanished one.
pub(crate) fn state(path: &Path) -> std::io::Result<SpoolState> {
    let exists = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    };
    if exists(path)? {
        return Ok(SpoolState::Waiting);
    }
    if exists(&folded_marker(path))? {
        return Ok(SpoolState::Folded);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(SpoolState::Vanished);
    };
    let aside = corrupt_dir(dir).join(name);
    if exists(&aside)? {
        return Ok(SpoolState::SetAside(aside));
    }
    Ok(SpoolState::Vanished)
}

/// Removes folded markers (see [`folded_marker`]) whose save did not
/// collect them within `min_age` of the fold (the save died, or was
/// stopped): a live save collects its marker within milliseconds.
pub(crate) fn remove_stale_markers(dir: &Path, min_age: Duration) {
    use std::os::unix::fs::MetadataExt;
    let Ok(read) = std::fs::read_dir(dir) else { return };
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    for ent in read.flatten() {
        if !ent.file_name().as_encoded_bytes().ends_with(b".json.folded") {
            continue;
        }
        // ctime: when the rename made it a marker.
        let Ok(meta) = ent.metadata() else { continue };
        let age = now.as_secs().saturating_sub(u64::try_from(meta.ctime()).unwrap_or(0));
        if meta.is_file() && age >= min_age.as_secs() {
            let _ = std::fs::remove_file(ent.path());
        }
    }
}

/// Removes the spool directory when it is empty (`rmdir`, which fails on
/// anything in it: a waiting save, a temp file being written, `corrupt/`),
/// so that no empty `<cache>.spool/` stays next to a cache. Safe at any
/// time: readers take a missing spool for an empty one, and a writer whose
/// directory vanished between creating it and writing its file creates it
/// again (see [`write_spool`]).
pub(crate) fn remove_if_empty(dir: &Path) {
    let _ = std::fs::remove_dir(dir);
}

/// Writes one spool file with the bytes `bytes()` makes (atomically, not
/// durably: see the comment inside) and returns its path. The directory is
/// created when missing, and again if a lock holder removed it as empty
/// (see [`remove_if_empty`]) before this file appeared in it.
pub(crate) fn write_spool(
    dir: &Path,
    cache: &Path,
    modes: SideModes,
    bytes: impl FnOnce() -> Vec<u8>,
) -> Result<(PathBuf, Waiter), CacheError> {
    let mut make = Some(bytes);
    let mut made = Vec::new();
    let mut tries = 0;
    loop {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new().mode(modes.dir()).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Someone's spool: used only if it is ours to trust.
                let meta =
                    std::fs::symlink_metadata(dir).map_err(io("checking spool directory", dir))?;
                trust::check_side(dir, &meta, "spool directory", cache, modes)?;
            }
            Err(e) => return Err(io("creating spool directory", dir)(e)),
        }
        match write_spool_once(dir, &mut make, &mut made, modes) {
            Err(CacheError::Io { action: "creating spool file", source, .. })
                if source.kind() == std::io::ErrorKind::NotFound && tries < 100 =>
            {
                tries += 1;
            }
            Err(e) => {
                // A failed write (a full disk, a quota) withdrew its temp
                // file; an emptied directory goes with it, so a failed save
                // leaves nothing new beside the cache.
                remove_if_empty(dir);
                return Err(e);
            }
            ok => return ok,
        }
    }
}

/// One attempt: the bytes are made (by `make`, once, into `made`) only once
/// the temp file exists.
fn write_spool_once<F: FnOnce() -> Vec<u8>>(
    dir: &Path,
    make: &mut Option<F>,
    made: &mut Vec<u8>,
    modes: SideModes,
) -> Result<(PathBuf, Waiter), CacheError> {
    let pid = std::process::id();
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let nanos = next_nanos();
    let fin = dir.join(format!("{nanos:020}-{pid:010}-{seq:06}.json"));
    // Not durable: a save returns only once its spool has been folded into
    // the cache file, and that rewrite is fsynced. A spool lost or damaged
    // by a power cut belonged to a save that had not returned (and a
    // damaged one is set aside, never folded).
    //
    // The temp file exists before the entries are serialized, so a lock
    // holder gathering a burst of saves (see `settle`) sees this one coming.
    let waiter = Publish::new(&fin)
        .write_with(|temp| {
            // The save holds a shared lock on its spool file while it
            // waits, so a folder can tell whether anyone still waits for it.
            // Its own open file description (not a dup of the temp file's),
            // guarded from forks: the shared lock belongs to it alone, so a
            // child made by `fork` during the save cannot keep it.
            let held = std::fs::File::open(temp.path()).map_err(io("opening", temp.path()))?;
            let fork = CloseOnFork::register(held.as_raw_fd());
            let _ = sys::try_lock_shared(&held);
            // No more open than the cache (a new cache: the umask).
            if let Some(mode) = modes.cache {
                use std::os::unix::fs::PermissionsExt;
                held.set_permissions(std::fs::Permissions::from_mode(mode))
                    .map_err(io("setting permissions of", temp.path()))?;
            }
            if let Some(make) = make.take() {
                *made = make();
            }
            temp.write_all(made).map_err(io("writing", temp.path()))?;
            Ok::<_, CacheError>(Waiter { _fork: fork, _held: held })
        })
        .map_err(|e| match e {
            PublishError::Io { step: Step::CreateTemp, path, source } => {
                CacheError::Io { action: "creating spool file", path, source }
            }
            PublishError::Io { step: Step::Rename, path, source } => {
                CacheError::Io { action: "renaming spool file to", path, source }
            }
            e => CacheError::from(e),
        })?;
    Ok((fin, waiter))
}

/// A save waiting for its spool file to be folded: holds a shared `flock`
/// on the file (released when dropped, explicitly, so that a child forked
/// before the registration cannot keep it: see `LockGuard`), which tells a
/// folder to leave a marker (see [`folded_marker`]) rather than delete the
/// file.
#[derive(Debug)]
pub(crate) struct Waiter {
    // Unregistered before the file closes (fields drop in order).
    _fork: CloseOnFork,
    _held: std::fs::File,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        sys::unlock(&self._held);
    }
}

/// Whether `name` in the spool directory is a temp file of a spool write in
/// progress (or of a killed writer); before [`ranktune_core::atomic_file`] these
/// were `.<pid>-<seq>-<nanos>.tmp`.
fn is_temp(name: &OsStr) -> bool {
    if atomic_file::is_temp_name(name) {
        return true;
    }
    let name = name.to_string_lossy();
    name.starts_with('.') && name.ends_with(".tmp")
}

/// The spool files waiting to be folded, in save order. A missing spool
/// directory is an empty spool.
pub(crate) fn list(dir: &Path) -> Result<Vec<PathBuf>, CacheError> {
    let read = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("listing spool directory", dir)(e)),
    };
    let mut names: Vec<String> = read
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| is_spool_name(n))
        .filter_map(|n| n.into_string().ok())
        .collect();
    names.sort();
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// What a caller does with the spool it lists, which decides the rule its
/// directory must pass before anything in it is used: another user's spool
/// directory could hand a fold or a load entries of their choosing, in an
/// order of their choosing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpoolUse {
    /// Folds and removes its files, as the savers use it: the side-file
    /// rules (`trust::check_side`).
    Fold,
    /// Only reads it (a load, which changes nothing on disk):
    /// `trust::check_spool_to_read`.
    Read,
}

/// [`list`], once the spool directory (when there is one) passed the rule
/// of its use.
pub(crate) fn list_checked(
    dir: &Path,
    cache: &Path,
    modes: SideModes,
    usage: SpoolUse,
) -> Result<Vec<PathBuf>, CacheError> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("checking spool directory", dir)(e)),
    };
    match usage {
        SpoolUse::Fold => trust::check_side(dir, &meta, "spool directory", cache, modes)?,
        SpoolUse::Read => trust::check_spool_to_read(dir, &meta, cache, modes)?,
    }
    list(dir)
}

/// Whether `name` in the spool directory is named like a spool file (not
/// hidden, `.json`). What is there under such a name is checked when it is
/// read: only regular files are spool files.
fn is_spool_name(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    !name.starts_with('.') && name.ends_with(".json")
}

/// Removes spool temp files of writers killed mid-write (untouched for
/// `min_age`: a live writer finishes its temp file in well under that).
pub(crate) fn remove_stale_temps(dir: &Path, min_age: Duration) {
    let Ok(read) = std::fs::read_dir(dir) else { return };
    let now = SystemTime::now();
    for ent in read.flatten() {
        if !is_temp(&ent.file_name()) {
            continue;
        }
        let age =
            ent.metadata().and_then(|m| m.modified()).ok().and_then(|t| now.duration_since(t).ok());
        if age.is_some_and(|a| a >= min_age) && std::fs::remove_file(ent.path()).is_ok() {
            tracing::info!("removed stale spool temp file {}", ent.path().display());
        }
    }
}

/// Group-commit delay: waits until no spool file is being written and no
/// new one appeared for `quiet`, at most `cap` in all, so that one rewrite
/// takes in a whole burst of saves (ranks finishing together) rather than
/// only the first few. A lone save — its own spool file the only one
/// waiting, none being written — does not wait: there is nothing to gather,
/// and a tune saving after every bucket would pay `quiet` per bucket. A
/// burst that starts just after it is folded by the next lock holder.
pub(crate) fn settle(dir: &Path, quiet: Duration, cap: Duration) {
    let start = std::time::Instant::now();
    let scan = || -> (usize, usize) {
        let Ok(read) = std::fs::read_dir(dir) else { return (0, 0) };
        let now = SystemTime::now();
        let (mut done, mut writing) = (0, 0);
        for ent in read.flatten() {
            let name = ent.file_name();
            if is_spool_name(&name) {
                done += 1;
            } else if is_temp(&name) {
                // A temp file untouched for a second is a dead writer's.
                let fresh = ent
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| now.duration_since(t).ok())
                    .is_none_or(|age| age < Duration::from_secs(1));
                writing += usize::from(fresh);
            }
        }
        (done, writing)
    };
    let (mut last, writing) = scan();
    if last <= 1 && writing == 0 {
        return;
    }
    while start.elapsed() + quiet <= cap {
        std::thread::sleep(quiet);
        let (done, writing) = scan();
        if done == last && writing == 0 {
            return;
        }
        last = done;
    }
}
