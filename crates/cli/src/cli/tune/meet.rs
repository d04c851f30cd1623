//! Where the local ranks of `ranktune tune --ranks N` meet: a private
//! directory of this job (mode 0700 under `$TMPDIR`), removed when the job
//! ends, so a quick start leaves nothing but the cache (and its lock) in the
//! user's working tree and no other user can read or plant the ranks'
//! messages.
//!
//! It only makes and removes the directory; the ranks find it through
//! `RANKTUNE_COLLECTIVE_DIR` (ranktune-collective's rule).

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// A directory only this user can enter, removed with everything in it when
/// dropped.
pub(super) struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// Creates `$TMPDIR/ranktune-job-<pid>-<n>` with mode 0700 (a fresh name
    /// when one exists already; never an existing directory).
    pub(super) fn create() -> io::Result<PrivateDir> {
        let base = std::env::temp_dir();
        let pid = std::process::id();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut last = None;
        for attempt in 0..16u32 {
            let path = base.join(format!("ranktune-job-{pid}-{:08x}", nanos ^ attempt));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(PrivateDir { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{}: {e}; set TMPDIR to a writable directory", path.display()),
                    ))
                }
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free name")))
    }

    /// The directory.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!("removing the ranks' meeting place {}: {e}", self.path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_and_removed_when_dropped() {
        let dir = PrivateDir::create().unwrap();
        let path = dir.path().to_path_buf();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::write(path.join("x"), b"1").unwrap();
        let other = PrivateDir::create().unwrap();
        assert_ne!(other.path(), path);
        drop(dir);
        assert!(!path.exists());
    }
}
