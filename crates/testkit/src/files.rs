//! The names of the files a test left in a directory, for asserting that
//! nothing else (temp files, corrupt copies, probes) was left behind.
//!
//! Owns: listing one directory's entries by name. Never: recurses, follows
//! or filters entries (the test decides what it looks for).

use std::path::Path;

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
