//! Replacing the cache file atomically and durably (through
//! [`ranktune_core::atomic_file`]), and cleaning up the temp files of killed writers.
//!
//! This module owns the cache's use of the publish (durable, permissions
//! kept, never over a device or FIFO), the conversion of its errors into
//! [`CacheError`] (a `From` impl, public), and the rule for which temp files
//! of the cache are stale.
//! It must never read a temp file as a cache, and never write the target in
//! place.

use crate::CacheError;
use ranktune_core::atomic_file::{self, Publish, PublishError};
use std::path::Path;
use std::time::{Duration, SystemTime};

fn file_name(path: &Path) -> Result<String, CacheError> {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).ok_or_else(|| no_file_name(path))
}

fn no_file_name(path: &Path) -> CacheError {
    CacheError::Invalid(format!(
        "{} does not name a file; give a path like cache.json",
        path.display()
    ))
}

/// The temp files of ranktune before [`ranktune_core::atomic_file`] were
/// `<file>.tmp-<pid>-<seq>`; stale ones are still cleaned up.
fn legacy_temp_prefix(path: &Path) -> Result<String, CacheError> {
    Ok(format!("{}.tmp-", file_name(path)?))
}

/// Writes `bytes` to `path` atomically and durably: readers see the old or
/// the new file, never a part, and once this returns the new file survives
/// a crash. An existing file's permission bits are kept; a new file gets
/// 0666 less the umask. Refuses to replace anything but a regular file or a
/// symlink (which a rename replaces without touching its target).
///
/// `mode`: the permission bits for the new file when there is no file to
/// keep them from (the cache was set aside), so the cache keeps its mode.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<(), CacheError> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    Publish::new(path)
        .durable()
        .keep_permissions()
        .regular_target_only()
        .write_with(|temp| {
            if let (Some(mode), Err(_)) = (mode, std::fs::metadata(path)) {
                temp.file()
                    .set_permissions(std::fs::Permissions::from_mode(mode))
                    .map_err(crate::error::io("setting permissions of", temp.path()))?;
            }
            temp.write_all(bytes).map_err(crate::error::io("writing", temp.path()))
        })
        .map_err(CacheError::from)
}

/// Like [`write_atomic`], with the content written by `write` in pieces,
/// so that a big file is never held whole in memory.
pub(crate) fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), CacheError> {
    Publish::new(path)
        .durable()
        .keep_permissions()
        .regular_target_only()
        .write_with(|temp| {
            let at = temp.path().to_path_buf();
            write(temp).map_err(|source| CacheError::Io { action: "writing", path: at, source })
        })
        .map_err(CacheError::from)
}

/// The [`CacheError`] for a failed publish: the step's action and path for
/// an OS error, the store's own messages for a bad target, and the writer's
/// error as it is. Lets anyone who publishes a file next to caches (e.g. an
/// export) report failures in the store's words.
impl From<PublishError<CacheError>> for CacheError {
    fn from(e: PublishError<CacheError>) -> CacheError {
        match e {
            PublishError::Io { step, path, source } => {
                CacheError::Io { action: step.action(), path, source }
            }
            PublishError::NoFileName { path } => no_file_name(&path),
            PublishError::NotReplaceable { path, file_type } => {
                match super::read::require_regular(&path, file_type) {
                    Err(e) => e,
                    Ok(()) => CacheError::Invalid(format!(
                        "{} changed while it was replaced; save again",
                        path.display()
                    )),
                }
            }
            PublishError::Writer(e) => e,
            other => CacheError::Invalid(other.to_string()),
        }
    }
}

/// See the conversion of `PublishError<CacheError>`.
impl From<PublishError> for CacheError {
    fn from(e: PublishError) -> CacheError {
        CacheError::from(e.widen::<CacheError>())
    }
}

/// Removes temp files of `path` left by killed writers. With `all` (the
/// caller holds the lock, and only lock holders write temp files) every one
/// goes; without it only those untouched for `min_age`.
pub(crate) fn remove_stale_temps(path: &Path, all: bool, min_age: Duration) -> usize {
    let (dir, legacy) = match legacy_temp_prefix(path) {
        Ok(p) => (atomic_file::parent_dir(path), p),
        Err(_) => return 0,
    };
    let Ok(read) = std::fs::read_dir(&dir) else { return 0 };
    let now = SystemTime::now();
    let mut removed = 0;
    for ent in read.flatten() {
        let name = ent.file_name();
        if !atomic_file::is_temp_of(path, &name) && !name.to_string_lossy().starts_with(&legacy) {
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
    let secs = crate::time::unix_secs(t);
    let rem = secs % 86_400;
    let (y, m, d) = crate::time::civil_from_days((secs / 86_400) as i64);
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
