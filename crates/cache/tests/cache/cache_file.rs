//! The file store's single-process behaviour: merge semantics, byte-identical
//! output, permissions, temp files, identities, lock timeout.

use ranktune_cache::{CacheData, CacheError, Entry, EntryKey, FileStore, Identity, Section, Store};
use ranktune_testkit::cache_fixtures::{self as fixtures, in_section as update};
use ranktune_testkit::{file_names, remove_spools};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

fn key(op: &str, n: u64) -> EntryKey {
    fixtures::key(op, &[&[n, 64]])
}

fn entry(tactic: i64, time_us: f64, env: &str) -> Entry {
    Entry { time_us, env: env.into(), ..fixtures::entry(serde_json::json!(tactic)) }
}

#[test]
fn save_merges_and_never_drops() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("c.json"));
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 5.0, "e"))])).unwrap();
    store.save(&update(Section::Rank(1), &[(key("gemm", 1), entry(2, 6.0, "e"))])).unwrap();
    store.save(&update(Section::Rank(0), &[(key("gemm", 2), entry(3, 7.0, "e"))])).unwrap();
    // Updating an existing key replaces it.
    let report =
        store.save(&update(Section::Shared, &[(key("softmax", 1), entry(4, 8.0, "e"))])).unwrap();
    assert_eq!(report.written, 1);
    assert_eq!(report.total, 4);
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(9, 4.0, "e"))])).unwrap();
    let loaded = store.load().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let d = loaded.data;
    assert_eq!(d.len(), 4);
    assert_eq!(d.get(Section::Rank(0), &key("gemm", 1)).unwrap().tactic, 9);
    assert_eq!(d.get(Section::Rank(1), &key("gemm", 1)).unwrap().tactic, 2);
    assert_eq!(d.get(Section::Rank(0), &key("gemm", 2)).unwrap().tactic, 3);
    assert_eq!(d.get(Section::Shared, &key("softmax", 1)).unwrap().tactic, 4);
    // Only the cache and its lock remain: the emptied spool is removed.
    assert_eq!(file_names(dir.path()), ["c.json", "c.json.lock"]);
}

#[test]
fn same_content_gives_identical_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    let items: Vec<_> =
        (0..20).rev().map(|i| (key("gemm", i), entry(i as i64, 1.0, "e"))).collect();
    store.save(&update(Section::Rank(3), &items)).unwrap();
    let first = std::fs::read(&path).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    store.save(&update(Section::Rank(3), &items)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), first, "same content must not change the file");
    // A second file written from scratch in another order has the same entries
    // section byte for byte (metadata times aside).
    let other = dir.path().join("d.json");
    let rev: Vec<_> = items.iter().rev().cloned().collect();
    FileStore::new(&other).save(&update(Section::Rank(3), &rev)).unwrap();
    let strip = |b: Vec<u8>| {
        String::from_utf8(b)
            .unwrap()
            .lines()
            .filter(|l| !l.contains("_unix\""))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(std::fs::read(&other).unwrap()), strip(first));
}

#[test]
fn file_is_readable_json_one_entry_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    let items: Vec<_> = (0..3).map(|i| (key("gemm", i), entry(i as i64, 1.0, "e"))).collect();
    store.save(&update(Section::Rank(0), &items)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["format"], "ranktune-cache");
    assert_eq!(v["version"], "1.0");
    assert_eq!(v["rank_0"].as_array().unwrap().len(), 3);
    assert_eq!(text.lines().filter(|l| l.trim_start().starts_with("{\"op\":")).count(), 3);
}

#[test]
fn records_identities_of_saved_entries() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("c.json"));
    let id = Identity::current();
    let digest = id.digest();
    // The current identity is recorded even if the update does not carry it.
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 5.0, &digest))])).unwrap();
    // Another identity is recorded from the update's metadata.
    let mut other = id.clone();
    other.cores += 100;
    let mut u = update(Section::Rank(1), &[(key("gemm", 1), entry(1, 5.0, &other.digest()))]);
    u.metadata.environments.insert(other.digest(), other.clone());
    store.save(&u).unwrap();
    let m = store.load().unwrap().data.metadata;
    assert_eq!(m.environments.get(&digest), Some(&id));
    assert_eq!(m.environments.get(&other.digest()), Some(&other));
    assert_eq!(m.lib_version, env!("CARGO_PKG_VERSION"));
    assert!(m.created_unix > 0 && m.updated_unix >= m.created_unix);
}

#[test]
fn invalid_entries_are_not_saved() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("c.json"));
    let r = store
        .save(&update(
            Section::Rank(0),
            &[
                (key("gemm", 1), entry(1, f64::NAN, "e")),
                (key("gemm", 2), entry(1, -1.0, "e")),
                (key("gemm", 3), entry(1, 2.0, "e")),
            ],
        ))
        .unwrap();
    assert_eq!(r.written, 1);
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("gemm") && r.warnings[0].contains("NaN"), "{:?}", r.warnings);
    assert_eq!(store.load().unwrap().data.len(), 1);
}

#[test]
fn remove_keeps_everything_else() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("c.json"));
    let items: Vec<_> = (0..5).map(|i| (key("gemm", i), entry(1, 1.0, "e"))).collect();
    store.save(&update(Section::Rank(0), &items)).unwrap();
    store.save(&update(Section::Rank(1), &items)).unwrap();
    let r = store
        .remove(&[(Section::Rank(0), key("gemm", 2)), (Section::Rank(5), key("x", 1))])
        .unwrap();
    assert_eq!(r.written, 1);
    assert_eq!(r.total, 9);
    let d = store.load().unwrap().data;
    assert!(d.get(Section::Rank(0), &key("gemm", 2)).is_none());
    assert!(d.get(Section::Rank(1), &key("gemm", 2)).is_some());
}

#[test]
fn new_files_respect_umask_and_existing_modes_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    // SAFETY: umask only reads and sets the process mask.
    let mask = unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    };
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666 & !(mask as u32), "new file mode {mode:o}, umask {mask:o}");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    store.save(&update(Section::Rank(0), &[(key("gemm", 2), entry(1, 1.0, "e"))])).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

#[test]
fn stale_temp_files_are_ignored_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    // A killed writer's half-written temp file, and one that is a symlink.
    std::fs::write(dir.path().join("c.json.tmp-999999-0"), b"{\"format\": \"ranktune-ca").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("c.json.tmp-999999-1")).unwrap();
    let loaded = store.load().unwrap();
    assert_eq!(loaded.data.len(), 1);
    assert!(loaded.warnings.is_empty());
    store.save(&update(Section::Rank(0), &[(key("gemm", 2), entry(1, 1.0, "e"))])).unwrap();
    assert_eq!(file_names(dir.path()), ["c.json", "c.json.lock"]);
    assert_eq!(store.load().unwrap().data.len(), 2);
}

#[test]
fn missing_parent_directory_is_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("a/b/c.json"));
    assert!(store.load().unwrap().data.is_empty());
    let err =
        store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("does not exist") && msg.contains("mkdir -p"), "{msg}");
    assert!(file_names(dir.path()).is_empty(), "nothing may be created");
    // A regular file where a directory should be is named as such.
    std::fs::write(dir.path().join("a"), b"").unwrap();
    let err =
        store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap_err();
    assert!(err.to_string().contains("is a file, not a directory"), "{err}");
    // Once the directory exists, the save works.
    std::fs::remove_file(dir.path().join("a")).unwrap();
    std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    assert_eq!(store.load().unwrap().data.len(), 1);
}

#[test]
fn unfolded_spools_are_read_and_without_locking_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path).without_locking();
    for r in 0..3 {
        let r2 =
            store.save(&update(Section::Rank(r), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
        assert!(r2.warnings.iter().any(|w| w.contains("cannot lock")), "{:?}", r2.warnings);
    }
    // Spools are kept without a lock, and readers see every save.
    assert_eq!(file_names(&dir.path().join("c.json.spool")).len(), 3);
    assert_eq!(store.load().unwrap().data.len(), 3);
    // A locked save later folds them and cleans up.
    FileStore::new(&path)
        .save(&update(Section::Rank(9), &[(key("x", 1), entry(1, 1.0, "e"))]))
        .unwrap();
    assert!(!dir.path().join("c.json.spool").exists(), "the emptied spool is removed");
    assert_eq!(FileStore::new(&path).load().unwrap().data.len(), 4);
}

#[test]
fn lock_timeout_names_the_path_and_withdraws_the_save() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let lock_path = dir.path().join("c.json.lock");
    // Hold the lock through another open file description.
    let holder = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&holder), libc::LOCK_EX) }, 0);
    let store = FileStore::new(&path).with_lock_timeout(Duration::from_millis(300));
    let err =
        store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap_err();
    assert!(matches!(err, CacheError::LockTimeout { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&lock_path.display().to_string()) && msg.contains("RANKTUNE_LOCK_TIMEOUT"),
        "{msg}"
    );
    // An error means not saved: the spool was withdrawn.
    assert!(store.load().unwrap().data.is_empty());
    drop(holder);
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    assert_eq!(store.load().unwrap().data.len(), 1);
}

#[test]
fn a_symlinked_cache_path_stays_a_link() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    let link = dir.path().join("c.json");
    std::os::unix::fs::symlink("real/c.json", &link).unwrap();
    let store = FileStore::new(&link);
    // Dangling at first, then existing.
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    store.save(&update(Section::Rank(1), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(FileStore::new(dir.path().join("real/c.json")).load().unwrap().data.len(), 2);
    assert_eq!(store.load().unwrap().data.len(), 2);
}

/// Where the filesystem refuses locks (simulated with `without_locking`,
/// the same path an `ENOLCK` from `flock` takes), an edit that can remove
/// entries is refused and leaves every spool and entry in place.
#[test]
fn edits_that_remove_entries_never_run_without_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let unlocked = FileStore::new(&path).without_locking();
    for r in 0..3 {
        unlocked.save(&update(Section::Rank(r), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    }
    let spools = || file_names(&dir.path().join("c.json.spool"));
    assert_eq!(spools().len(), 3);
    let check = |err: CacheError| {
        let msg = err.to_string();
        assert!(msg.contains("never runs without the lock") && msg.contains("redis://"), "{msg}");
        assert!(msg.contains(" on "), "names the filesystem: {msg}");
    };
    check(unlocked.remove_where(&|_, _, _| true).unwrap_err());
    check(unlocked.remove(&[(Section::Rank(0), key("gemm", 1))]).unwrap_err());
    let newer = update(Section::Rank(0), &[(key("gemm", 1), entry(2, 0.5, "e"))]);
    check(unlocked.save_resolving(&newer, &|_, _, _, _| true).unwrap_err());
    // Nothing was removed: every save that returned is still there.
    assert_eq!(spools().len(), 3);
    let d = FileStore::new(&path).inspect().unwrap().data;
    assert_eq!(d.len(), 3);
    assert_eq!(d.get(Section::Rank(0), &key("gemm", 1)).unwrap().tactic, 1);
    // A superseding save (what `tune` does) still saves, removing nothing.
    let shared = update(Section::Shared, &[(key("gemm", 1), entry(7, 0.5, "e"))]);
    let report = unlocked.save_superseding(&shared).unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("kept the rank entries")), "{report:?}");
    assert_eq!(FileStore::new(&path).inspect().unwrap().data.len(), 4);
    assert_eq!(spools().len(), 4, "an unlocked save deletes no spool");
}

/// Unlocked saves keep their spools (deleting one is unsafe without the
/// lock), so their number is bounded: past `MAX_UNLOCKED_SPOOLS` a save is
/// refused, not saved, and names the way out.
#[test]
fn unfolded_spools_without_a_lock_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let unlocked = FileStore::new(&path).without_locking();
    let max = ranktune_cache::MAX_UNLOCKED_SPOOLS as u64;
    for i in 0..max {
        unlocked.save(&update(Section::Rank(0), &[(key("gemm", i), entry(1, 1.0, "e"))])).unwrap();
    }
    let err = unlocked
        .save(&update(Section::Rank(0), &[(key("gemm", max), entry(1, 1.0, "e"))]))
        .unwrap_err();
    assert!(err.to_string().contains("refusing to add more"), "{err}");
    assert_eq!(file_names(&dir.path().join("c.json.spool")).len() as u64, max);
    // A save where locks work folds them all; nothing was lost.
    FileStore::new(&path)
        .save(&update(Section::Rank(1), &[(key("x", 1), entry(1, 1.0, "e"))]))
        .unwrap();
    assert_eq!(FileStore::new(&path).load().unwrap().data.len() as u64, max + 1);
    assert!(!dir.path().join("c.json.spool").exists());
}

/// Holds `c.json.lock` through another open file description until dropped.
fn hold_lock(lock_path: &std::path::Path) -> std::fs::File {
    let holder = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path)
        .unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&holder), libc::LOCK_EX) }, 0);
    holder
}

/// A save whose spool file is removed (by an `rm`, another user's cleanup)
/// before it was folded knows it: it writes the entries again, and reports
/// success only once they are in the file.
#[test]
fn a_save_whose_spool_vanished_saves_again() {
    use std::sync::atomic::AtomicBool;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let holder = hold_lock(&dir.path().join("c.json.lock"));
    let store = FileStore::new(&path).with_lock_timeout(Duration::from_secs(30));
    let done = AtomicBool::new(false);
    let report = std::thread::scope(|s| {
        let saver = s.spawn(|| {
            let r = store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))]));
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            r
        });
        // The save waits for the lock; its spool file is removed once.
        assert_eq!(remove_spools(&dir.path().join("c.json.spool"), 1, &done), 1);
        std::thread::sleep(Duration::from_millis(100));
        drop(holder);
        saver.join().unwrap()
    });
    let report = report.unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("disappeared")), "{report:?}");
    let d = FileStore::new(&path).inspect().unwrap().data;
    assert_eq!(d.len(), 1, "the save reported success, so its entry must be in the file");
    assert_eq!(file_names(dir.path()), ["c.json", "c.json.lock"]);
}

/// When the spool keeps vanishing, the save fails loudly instead of
/// reporting entries it never saved.
#[test]
fn a_save_whose_spool_keeps_vanishing_fails_loudly() {
    use std::sync::atomic::AtomicBool;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let _holder = hold_lock(&dir.path().join("c.json.lock"));
    let store = FileStore::new(&path).with_lock_timeout(Duration::from_secs(30));
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        let saver = s.spawn(|| {
            let r = store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))]));
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            r
        });
        remove_spools(&dir.path().join("c.json.spool"), usize::MAX, &done);
        saver.join().unwrap()
    });
    let err = result.unwrap_err().to_string();
    assert!(err.contains("disappeared") && err.contains("nothing was saved"), "{err}");
    assert!(FileStore::new(&path).inspect().unwrap().data.is_empty());
}

/// A version string that is not MAJOR.MINOR is a format this build does not
/// know: refused as unsupported and left in place, never set aside.
#[test]
fn an_odd_version_string_is_unsupported_and_left_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let odd = text.replacen("\"version\": \"1.0\"", "\"version\": \"1.0.1\"", 1);
    assert_ne!(odd, text, "the file names its version");
    std::fs::write(&path, &odd).unwrap();
    let err = store.load().unwrap_err();
    assert!(matches!(err, CacheError::Unsupported { .. }), "{err:?}");
    let err =
        store.save(&update(Section::Rank(0), &[(key("gemm", 2), entry(1, 1.0, "e"))])).unwrap_err();
    assert!(matches!(err, CacheError::Unsupported { .. }), "{err:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), odd);
    assert!(!file_names(dir.path()).iter().any(|n| n.contains("corrupt")));
}

/// A corrupt cache in a directory whose name is not UTF-8 is set aside
/// under a path built from the bytes, and later saves work.
#[test]
fn a_corrupt_cache_in_a_non_utf8_directory_is_set_aside() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&odd).unwrap();
    let path = odd.join("c.json");
    std::fs::write(&path, b"{ not json").unwrap();
    let store = FileStore::new(&path);
    let loaded = store.load().unwrap();
    let aside = loaded.moved_aside.expect("set aside");
    assert_eq!(aside.parent(), Some(odd.as_path()));
    assert_eq!(std::fs::read(&aside).unwrap(), b"{ not json");
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    assert_eq!(store.load().unwrap().data.len(), 1);
}

/// A link another user planted in a sticky world-writable directory is not
/// followed (the kernel's protected_symlinks rule); the file it points at
/// is untouched. Needs to create a link owned by another user: runs as root
/// (this machine's CI) and skips loudly otherwise.
#[test]
fn a_planted_link_in_a_sticky_directory_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let link = shared.join("tune.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    if std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).is_err() {
        eprintln!("SKIPPED: cannot give a link to another user (needs root)");
        return;
    }
    let store = FileStore::new(&link);
    let err =
        store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("protected_symlinks") && msg.contains("uid 65534"), "{msg}");
    assert!(store.load().is_err());
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert_eq!(file_names(dir.path()), ["shared", "victim.txt"]);
    assert_eq!(file_names(&shared), ["tune.json"]);
}

/// Through a link the kernel follows, a file that is not a ranktune cache
/// is never moved aside or replaced.
#[test]
fn a_non_cache_file_reached_through_a_link_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("notes.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let link = dir.path().join("tune.json");
    std::os::unix::fs::symlink("notes.txt", &link).unwrap();
    let store = FileStore::new(&link);
    let err =
        store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(store.load().is_err());
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(!file_names(dir.path()).iter().any(|n| n.contains("corrupt")));
}

fn mode_of(p: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Everything made next to a private cache is private too, and the cache
/// keeps its mode when it is set aside and rewritten.
#[test]
fn files_next_to_a_private_cache_are_no_more_open_than_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    FileStore::new(&path)
        .save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))]))
        .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(dir.path().join("c.json.lock")).unwrap();
    // Unlocked saves keep their spool files: look at their modes.
    let unlocked = FileStore::new(&path).without_locking();
    unlocked.save(&update(Section::Rank(1), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    let spool = dir.path().join("c.json.spool");
    assert_eq!(mode_of(&spool), 0o700);
    for n in file_names(&spool) {
        assert_eq!(mode_of(&spool.join(&n)), 0o600, "{n}");
    }
    let store = FileStore::new(&path);
    store.save(&update(Section::Rank(2), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    assert_eq!(mode_of(&dir.path().join("c.json.lock")), 0o600);
    assert_eq!(mode_of(&path), 0o600);
    // Set aside and rewritten: still 0600.
    std::fs::write(&path, b"{ not json").unwrap();
    let loaded = store.load().unwrap();
    assert_eq!(mode_of(&loaded.moved_aside.unwrap()), 0o600);
    store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))])).unwrap();
    assert_eq!(mode_of(&path), 0o600);
}

/// A spool directory or lock file that another user owns, that others can
/// write, or that is a symlink is refused with a message naming the owner
/// and the fix. Giving a file to another user needs root (this machine's
/// CI); the symlink case runs everywhere.
#[test]
fn a_foreign_spool_or_lock_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    let save = || store.save(&update(Section::Rank(0), &[(key("gemm", 1), entry(1, 1.0, "e"))]));
    // A symlinked spool.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.path().join("c.json.spool")).unwrap();
    let err = save().unwrap_err().to_string();
    assert!(err.contains("symbolic link") && err.contains("remove the link"), "{err}");
    assert!(file_names(&elsewhere).is_empty());
    std::fs::remove_file(dir.path().join("c.json.spool")).unwrap();
    // A symlinked lock file.
    std::os::unix::fs::symlink(dir.path().join("victim"), dir.path().join("c.json.lock")).unwrap();
    let err = save().unwrap_err().to_string();
    assert!(err.contains("lock file") && err.contains("symbolic link"), "{err}");
    assert!(!dir.path().join("victim").exists());
    std::fs::remove_file(dir.path().join("c.json.lock")).unwrap();
    // Another user's spool directory, and a world-writable lock of theirs.
    let spool = dir.path().join("c.json.spool");
    std::fs::create_dir(&spool).unwrap();
    if std::os::unix::fs::chown(&spool, Some(65534), Some(65534)).is_err() {
        eprintln!("SKIPPED: cannot give a file to another user (needs root)");
        return;
    }
    let err = save().unwrap_err().to_string();
    assert!(err.contains("owned by uid 65534") && err.contains("rm -r"), "{err}");
    std::fs::remove_dir(&spool).unwrap();
    let lock = dir.path().join("c.json.lock");
    std::fs::write(&lock, b"").unwrap();
    std::os::unix::fs::chown(&lock, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let err = save().unwrap_err().to_string();
    assert!(err.contains("lock file") && err.contains("uid 65534"), "{err}");
    assert!(store.load().unwrap().data.is_empty(), "nothing saved");
    std::fs::remove_file(&lock).unwrap();
    save().unwrap();
}

/// A collective save (shared entries that supersede rank entries) builds
/// only the sections holding a superseded entry and copies every other
/// section as it was, so a rank's save holds its sections, not the file.
/// Seen here through a section the save does not change that holds one key
/// twice: copied, both lines stay (built, they would be resolved to one).
#[test]
fn a_superseding_save_builds_only_the_sections_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    let rank0 = [(key("gemm", 1), entry(1, 5.0, "e")), (key("gemm", 3), entry(5, 5.0, "e"))];
    store.save(&update(Section::Rank(0), &rank0)).unwrap();
    store.save(&update(Section::Rank(3), &[(key("gemm", 2), entry(2, 5.0, "e"))])).unwrap();
    let other = [(key("softmax", 1), entry(3, 5.0, "e")), (key("softmax", 2), entry(4, 5.0, "e"))];
    store.save(&update(Section::Rank(5), &other)).unwrap();
    // Rank 5 holds one key twice (the second entry's bucket made the first's).
    let text = std::fs::read_to_string(&path).unwrap();
    let twice = text.replacen(
        "\"bucket\":[[2,64]],\"runner_index\":0,\"tactic\":4",
        "\"bucket\":[[1,64]],\"runner_index\":0,\"tactic\":4",
        1,
    );
    assert_ne!(twice, text, "the file's entry layout changed; update the test");
    // Rank 0 also holds an entry whose key cannot be read: kept verbatim.
    let twice = twice.replacen("\"rank_0\": [\n", "\"rank_0\": [\n    {\"note\":\"no key\"},\n", 1);
    assert!(twice.contains("{\"note\":\"no key\"}"));
    std::fs::write(&path, &twice).unwrap();

    let mut newer = entry(9, 1.0, "e");
    newer.created_unix += 10;
    let shared = update(Section::Shared, &[(key("gemm", 1), newer)]);
    let report = store.save_superseding(&shared).unwrap();
    assert_eq!(report.superseded, 1, "{report:?}");

    let after = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        after.matches("\"op\":\"softmax\"").count(),
        2,
        "rank 5 was copied, not built:\n{after}"
    );
    assert_eq!(after.matches("\"op\":\"gemm\"").count(), 3, "one gemm left in rank 0:\n{after}");
    assert!(after.contains("{\"note\":\"no key\"}"), "rank 0's verbatim entry kept:\n{after}");
    let d = FileStore::new(&path).inspect().unwrap().data;
    assert_eq!(d.get(Section::Shared, &key("gemm", 1)).unwrap().tactic, 9);
    assert_eq!(d.get(Section::Rank(3), &key("gemm", 2)).unwrap().tactic, 2, "not the same bucket");
    assert!(d.get(Section::Rank(0), &key("gemm", 1)).is_none());
    assert_eq!(d.get(Section::Rank(0), &key("gemm", 3)).unwrap().tactic, 5, "rank 0's other entry");
    assert_eq!(d.len(), 4);
    assert_eq!(report.total, 6, "rank 5's two lines of one key count twice until it is rebuilt");
}

/// The streamed superseding save ends where the in-memory store's does, on
/// a cache where some sections hold superseded entries, some hold the same
/// op in other buckets, and some entries are newer than the shared ones.
#[test]
fn a_streamed_superseding_save_matches_the_memory_store() {
    use ranktune_cache::MemoryStore;
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("c.json"));
    let memory = MemoryStore::new();
    for r in 0..6u32 {
        let items: Vec<(EntryKey, Entry)> = (0..8u64)
            .map(|n| {
                let mut e = entry(i64::from(r) * 10 + n as i64, 1.0 + n as f64, "e");
                e.created_unix += u64::from(r % 3) * 5; // some newer than the shared ones
                (key(if n % 2 == 0 { "gemm" } else { "softmax" }, n + u64::from(r % 2)), e)
            })
            .collect();
        let up = update(Section::Rank(r), &items);
        store.save(&up).unwrap();
        memory.save(&up).unwrap();
    }
    let mut shared = CacheData::default();
    for n in [0u64, 2, 5] {
        let mut e = entry(99, 0.5, "e");
        e.created_unix += 7;
        shared.insert(Section::Shared, key("gemm", n), e);
    }
    let a = store.save_superseding(&shared).unwrap();
    let b = memory.save_superseding(&shared).unwrap();
    assert_eq!(a.superseded, b.superseded);
    assert!(a.superseded > 0, "the cache was built to hold superseded entries");
    let file = FileStore::new(dir.path().join("c.json")).inspect().unwrap().data;
    let mem = memory.data();
    let list = |d: &CacheData| -> Vec<String> {
        d.iter().map(|(s, k, e)| format!("{s:?} {k:?} {} {}", e.tactic, e.created_unix)).collect()
    };
    assert_eq!(list(&file), list(&mem));
}

/// A section rebuilt as it is written resolves a key it holds twice by the
/// rule every rewrite follows (newest wins) and says so, naming the key.
#[test]
fn a_rebuilt_section_warns_about_a_key_it_held_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    let rank0 = [(key("gemm", 1), entry(1, 5.0, "e")), (key("gemm", 2), entry(2, 5.0, "e"))];
    store.save(&update(Section::Rank(0), &rank0)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let twice = text.replacen("\"bucket\":[[2,64]]", "\"bucket\":[[1,64]]", 1);
    assert_ne!(twice, text);
    std::fs::write(&path, &twice).unwrap();
    // rank 0 now holds gemm 1 twice (tactics 1 and 2); a shared gemm 1
    // supersedes both, and the section is rebuilt.
    let mut newer = entry(9, 1.0, "e");
    newer.created_unix += 10;
    let report =
        store.save_superseding(&update(Section::Shared, &[(key("gemm", 1), newer)])).unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("duplicate entry rank_0")), "{report:?}");
    let d = FileStore::new(&path).inspect().unwrap().data;
    assert_eq!(d.len(), 1, "only the shared entry is left");
}
