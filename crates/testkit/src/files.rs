//! The names of the files a test left in a directory, for asserting that
//! nothing else (temp files, corrupt copies, probes) was left behind; and
//! removing a cache's spool files behind its back, as another user's
//! cleanup would.
//!
//! Owns: listing one directory's entries by name, removing `*.json` files
//! of one directory. Never: recurses or follows entries.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The names of the entries of `dir`, sorted (bytes that are not UTF-8
/// replaced).
///
/// # Panics
/// When `dir` or one of its entries cannot be read, naming `dir`.
pub fn file_names(dir: &Path) -> Vec<String> {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
    let mut names: Vec<String> = entries
        .map(|e| match e {
            Ok(e) => e.file_name().to_string_lossy().into_owned(),
            Err(e) => panic!("listing {}: {e}", dir.display()),
        })
        .collect();
    names.sort();
    names
}

/// Removes the `*.json` files of `spool` (a cache's spool directory) as
/// they appear, until `max` are gone or `until` is set; returns how many it
/// removed. What a tmp cleaner or another user's script does to a directory
/// it does not own.
pub fn remove_spools(spool: &Path, max: usize, until: &AtomicBool) -> usize {
    let mut removed = 0;
    while removed < max && !until.load(Ordering::Relaxed) {
        let names: Vec<String> = std::fs::read_dir(spool)
            .map(|r| r.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
            .unwrap_or_default();
        for name in names {
            if name.ends_with(".json") && std::fs::remove_file(spool.join(&name)).is_ok() {
                removed += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted() {
        let dir = std::env::temp_dir().join(format!("testkit-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("b")).unwrap();
        std::fs::write(dir.join("a.json"), b"").unwrap();
        let names = file_names(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(names, ["a.json", "b"]);
    }
}
