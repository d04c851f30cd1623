//! The spool: `<file>.spool/`, where each save drops its entries before
//! (and instead of, when someone else folds them) rewriting the cache.
//!
//! A spool file is a small cache document named
//! `<nanos>-<pid>-<seq>.json` so that names sort in save order; it appears
//! atomically (written to a dot-named temp file in the spool, then
//! renamed). This module owns the naming and listing
//! rules; it must never fold spools into the cache (that is the store's
//! job, under the lock).

use super::sys;
use crate::cache::CacheError;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

static SEQ: AtomicU64 = AtomicU64::new(0);
static LAST_NANOS: Mutex<u128> = Mutex::new(0);

/// The spool directory that belongs to `cache`: `<cache>.spool`.
pub(crate) fn spool_dir(cache: &Path) -> PathBuf {
    let mut s = cache.as_os_str().to_owned();
    s.push(".spool");
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

fn io(action: &'static str, p: &Path) -> impl FnOnce(std::io::Error) -> CacheError {
    let path = p.to_path_buf();
    move |source| CacheError::Io { action, path, source }
}

/// Writes one spool file with the bytes `bytes()` makes (atomically, not
/// durably: see the comment inside) and returns its path.
pub(crate) fn write_spool(
    dir: &Path,
    bytes: impl FnOnce() -> Vec<u8>,
) -> Result<PathBuf, CacheError> {
    match std::fs::DirBuilder::new().create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("creating spool directory", dir)(e)),
    }
    let pid = std::process::id();
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let nanos = next_nanos();
    let temp = dir.join(format!(".{pid}-{seq}-{nanos}.tmp"));
    let fin = dir.join(format!("{nanos:020}-{pid:010}-{seq:06}.json"));
    let mut file = sys::create_exclusive(&temp).map_err(io("creating spool file", &temp))?;
    // No fsync here: a save returns only once its spool has been folded
    // into the cache file, and that rewrite is fsynced. A spool lost or
    // damaged by a power cut belonged to a save that had not returned (and
    // a damaged one is set aside, never folded).
    //
    // The temp file exists before the entries are serialized, so a lock
    // holder gathering a burst of saves (see `settle`) sees this one coming.
    let result = (|| {
        file.write_all(&bytes()).map_err(io("writing", &temp))?;
        drop(file);
        std::fs::rename(&temp, &fin).map_err(io("renaming spool file to", &fin))
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    Ok(fin)
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
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.') && n.ends_with(".json"))
        .collect();
    names.sort();
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// Removes spool temp files of writers killed mid-write (untouched for
/// `min_age`: a live writer finishes its temp file in well under that).
pub(crate) fn remove_stale_temps(dir: &Path, min_age: Duration) {
    let Ok(read) = std::fs::read_dir(dir) else { return };
    let now = SystemTime::now();
    for ent in read.flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        if !(name.starts_with('.') && name.ends_with(".tmp")) {
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
/// only the first few. A lone save pays one `quiet` period.
pub(crate) fn settle(dir: &Path, quiet: Duration, cap: Duration) {
    let start = std::time::Instant::now();
    let scan = || -> (usize, usize) {
        let Ok(read) = std::fs::read_dir(dir) else { return (0, 0) };
        let now = SystemTime::now();
        let (mut done, mut writing) = (0, 0);
        for ent in read.flatten() {
            let name = ent.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".json") && !name.starts_with('.') {
                done += 1;
            } else if name.starts_with('.') && name.ends_with(".tmp") {
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
    let (mut last, _) = scan();
    while start.elapsed() + quiet <= cap {
        std::thread::sleep(quiet);
        let (done, writing) = scan();
        if done == last && writing == 0 {
            return;
        }
        last = done;
    }
}
