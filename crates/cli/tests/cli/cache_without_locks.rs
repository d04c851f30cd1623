//! Where the filesystem refuses locks (`flock` fails with `ENOLCK`, as on
//! NFS without lockd), saves go ahead unlocked by design, but an edit that
//! can remove entries (`cache prune`, `cache merge -o`) must refuse to run:
//! run unlocked, it deleted other saves' spool files and rewrote the file
//! from an older snapshot, losing entries from saves that had returned.
//!
//! Real processes: the ranktune binary runs with a preloaded `flock` that
//! always fails with `ENOLCK` (a few lines of C built with the system's C
//! compiler, the one Rust links with), many imports and the removing edits
//! at once.

use ranktune_cache::{write_cache_file, CacheData, Entry, EntryKey, FileStore, Section, Store};
use ranktune_testkit::cache_fixtures as fixtures;
use ranktune_testkit::{Cli, Output};
use std::path::{Path, PathBuf};

fn key(op: &str) -> EntryKey {
    EntryKey { runner: "r".into(), ..fixtures::key(op, &[&[64]]) }
}

fn one(op: &str, tactic: i64) -> CacheData {
    let e = Entry {
        time_us: 10.0,
        checksum: "c".into(),
        env: "0123456789abcdef".into(),
        created_unix: 100,
        ..fixtures::entry(serde_json::json!(tactic))
    };
    fixtures::in_section(Section::Rank(0), &[(key(op), e)])
}

/// Builds a shared object whose `flock` always fails with `ENOLCK`.
fn no_lock_shim(dir: &Path) -> PathBuf {
    let src = dir.join("nolock.c");
    std::fs::write(
        &src,
        "#include <errno.h>\nint flock(int fd, int op) { (void)fd; (void)op; errno = ENOLCK; return -1; }\n",
    )
    .unwrap();
    let lib = dir.join("libnolock.so");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("the C compiler Rust links with (cc) runs");
    assert!(status.success(), "cc could not build the flock shim");
    lib
}

fn ranktune(shim: &Path, args: &[&str]) -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(args)
        .env("LD_PRELOAD", shim)
        .env_remove(["RANKTUNE_LOG", "RANKTUNE_LOCK_TIMEOUT"])
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

#[test]
fn without_working_locks_removing_edits_refuse_and_no_save_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let shim = no_lock_shim(dir.path());
    let cache = dir.path().join("tune.json");
    let c = cache.to_str().unwrap();
    let src = |name: &str, tactic: i64| {
        let p = dir.path().join(format!("{name}.json"));
        write_cache_file(&p, &one(name, tactic)).unwrap();
        p
    };
    // The shim works: a save says it went ahead without the lock.
    let first = src("first", 1);
    let out = ranktune(&shim, &["cache", "import", c, first.to_str().unwrap()]).run();
    assert_eq!(code(&out), 0, "{}", out.stderr_text());
    assert!(out.stderr_text().to_lowercase().contains("lock"), "{}", out.stderr_text());

    const SAVERS: usize = 8;
    let sources: Vec<PathBuf> = (0..SAVERS).map(|i| src(&format!("op{i}"), i as i64)).collect();
    let extra = src("merged", 99);
    let mut savers = Vec::new();
    let mut edits = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        savers.push(ranktune(&shim, &["cache", "import", c, s.to_str().unwrap()]).spawn());
        // Removing edits start between the saves, while spools pile up.
        if i == 2 {
            edits.push(ranktune(&shim, &["cache", "prune", c]).spawn());
        }
        if i == 5 {
            edits.push(
                ranktune(&shim, &["cache", "merge", "-o", c, extra.to_str().unwrap()]).spawn(),
            );
        }
    }
    for s in savers {
        let out = s.wait();
        assert_eq!(code(&out), 0, "an unlocked save still saves: {}", out.stderr_text());
    }
    for e in edits {
        let out = e.wait();
        let err = out.stderr_text();
        assert_ne!(code(&out), 0, "an edit that can remove entries ran without the lock: {err}");
        assert!(err.contains("never runs without the lock"), "names the rule: {err}");
        assert!(err.contains("redis://"), "names a way out: {err}");
    }
    // Every save that returned is in the cache (read here, where locks work).
    let data = FileStore::new(&cache).inspect().unwrap().data;
    let names = std::iter::once("first".to_string()).chain((0..SAVERS).map(|i| format!("op{i}")));
    for name in names {
        assert!(data.get(Section::Rank(0), &key(&name)).is_some(), "{name} was lost");
    }
    assert!(
        data.get(Section::Rank(0), &key("merged")).is_none(),
        "the refused merge wrote nothing"
    );
    assert_eq!(data.len(), SAVERS + 1);
    // Where locks work again, the next save folds every spool.
    let late = src("late", 7);
    let out = Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(["cache", "import", c, late.to_str().unwrap()])
        .env_remove(["RANKTUNE_LOG", "RANKTUNE_LOCK_TIMEOUT"])
        .run();
    assert_eq!(code(&out), 0, "{}", out.stderr_text());
    assert_eq!(FileStore::new(&cache).load().unwrap().data.len(), SAVERS + 2);
    assert!(!dir.path().join("tune.json.spool").exists(), "folded and removed");
}
