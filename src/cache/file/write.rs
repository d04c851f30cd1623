//! Replacing a file atomically: exclusive temp file in the same directory,
//! fsync, rename over, fsync the directory; and cleaning up the temp files
//! of killed writers.
//!
//! This module owns the temp-file naming rule (`<file>.tmp-<pid>-<seq>`), so
//! it alone decides what is a stale temp file. It must never read a temp
//! file as a cache, and never write the target in place.

use super::sys;
use crate::cache::CacheError;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// The directory that holds `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn file_name(path: &Path) -> Result<String, CacheError> {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).ok_or_else(|| {
        CacheError::Invalid(format!(
            "{} does not name a file; give a path like cache.json",
            path.display()
        ))
    })
}

fn temp_prefix(path: &Path) -> Result<String, CacheError> {
    Ok(format!("{}.tmp-", file_name(path)?))
}

/// Writes `bytes` to `path` atomically: readers see the old or the new file,
/// never a part. An existing file's permission bits are kept; a new file
/// gets 0666 less the umask.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
    let dir = parent_dir(path);
    let temp = dir.join(format!(
        "{}{}-{}",
        temp_prefix(path)?,
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let io = |action: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| CacheError::Io { action, path: p, source }
    };
    let mut file = sys::create_exclusive(&temp).map_err(io("creating temp file", &temp))?;
    let result = (|| {
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o7777;
            file.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(io("setting permissions of", &temp))?;
        }
        file.write_all(bytes).map_err(io("writing", &temp))?;
        file.sync_all().map_err(io("fsyncing", &temp))?;
        drop(file);
        std::fs::rename(&temp, path).map_err(io("renaming temp file over", path))?;
        sys::fsync_dir(&dir).map_err(io("fsyncing directory", &dir))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Removes temp files of `path` left by killed writers. With `all` (the
/// caller holds the lock, and only lock holders write temp files) every one
/// goes; without it only those untouched for `min_age`.
pub(crate) fn remove_stale_temps(path: &Path, all: bool, min_age: Duration) -> usize {
    let (dir, prefix) = match temp_prefix(path) {
        Ok(p) => (parent_dir(path), p),
        Err(_) => return 0,
    };
    let Ok(read) = std::fs::read_dir(&dir) else { return 0 };
    let now = SystemTime::now();
    let mut removed = 0;
    for ent in read.flatten() {
        let name = ent.file_name();
        if !name.to_string_lossy().starts_with(&prefix) {
            continue;
        }
        let old_enough = ent
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age >= min_age);
        if (all || old_enough) && std::fs::remove_file(ent.path()).is_ok() {
            tracing::info!("removed stale temp file {}", ent.path().display());
            removed += 1;
        }
    }
    removed
}

/// `2026-11-30T05:40:12Z` style stamp (UTC) for file names set aside.
pub(crate) fn utc_stamp(t: SystemTime) -> String {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant), proleptic Gregorian.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z", rem / 3600, (rem % 3600) / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps() {
        assert_eq!(utc_stamp(SystemTime::UNIX_EPOCH), "19700101T000000Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_012_412);
        assert_eq!(utc_stamp(t), "20261130T042012Z");
    }
}
