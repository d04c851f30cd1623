//! Saves that land while `cache prune`, `cache merge -o` or another save
//! waits for the lock: decisions must be taken under the lock, on the file
//! as it is then. Real processes (the ranktune binary) wait for a lock the
//! test holds; the test changes the cache meanwhile, then lets go.

use ranktune_cache::{
    write_cache_file, CacheData, Entry, EntryKey, FileStore, Identity, Section, Store,
};
use ranktune_testkit::cache_fixtures as fixtures;
use ranktune_testkit::{remove_spools, Cli, Running};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

fn key(op: &str) -> EntryKey {
    fixtures::key(op, &[&[64]])
}

fn entry(tactic: i64, env: &str, created: u64) -> Entry {
    Entry {
        time_us: 10.0,
        checksum: "c".into(),
        env: env.into(),
        created_unix: created,
        ..fixtures::entry(serde_json::json!(tactic))
    }
}

fn one(op: &str, e: Entry) -> CacheData {
    fixtures::in_section(Section::Rank(0), &[(key(op), e)])
}

/// Holds `<cache>.lock` exclusively until dropped.
struct Held(#[allow(dead_code)] File);

fn hold_lock(cache: &Path) -> Held {
    let mut p = cache.as_os_str().to_owned();
    p.push(".lock");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(PathBuf::from(p))
        .unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
    Held(f)
}

/// Starts ranktune and returns once it says it is waiting for the lock
/// (so it has done its unlocked read).
fn start_waiting(args: &[&str]) -> Running {
    let running = Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(args)
        .env_remove(["RANKTUNE_LOG", "RANKTUNE_LOCK_TIMEOUT"])
        .spawn();
    let waiting = |l: &str| l.contains("waiting for lock on");
    match running.stderr().wait_for(waiting, Duration::from_secs(120)) {
        Ok(_) => running,
        Err(RecvTimeoutError::Disconnected) => {
            let out = running.wait();
            panic!(
                "ranktune {args:?} ended ({}) without waiting for the lock: {}",
                out.status,
                out.stderr_text()
            );
        }
        Err(RecvTimeoutError::Timeout) => panic!("ranktune {args:?} never waited"),
    }
}

/// Its exit code, stdout and all of its stderr, once it has finished.
fn finish(running: Running) -> (i32, String, String) {
    let out = running.wait();
    (out.status.code().unwrap_or(-1), out.stdout_text(), out.stderr_text())
}

#[test]
fn prune_keeps_an_entry_refreshed_while_it_waited() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.json");
    let here = Identity::current().digest();
    let mut data = one("gemm", entry(1, "0123456789abcdef", 100));
    data.insert(Section::Rank(0), key("softmax"), entry(2, "0123456789abcdef", 100));
    FileStore::new(&path).save(&data).unwrap();

    let held = hold_lock(&path);
    let running = start_waiting(&["cache", "prune", path.to_str().unwrap()]);
    // A rank re-tunes gemm on this machine and its save completes (as a
    // fold by another lock holder would leave it) while prune waits.
    let mut now = FileStore::new(&path).inspect().unwrap().data;
    now.insert(Section::Rank(0), key("gemm"), entry(7, &here, 200));
    write_cache_file(&path, &now).unwrap();
    drop(held);
    let (code, out, err) = finish(running);
    assert_eq!(code, 0, "{out}{err}");

    let after = FileStore::new(&path).load().unwrap().data;
    let gemm = after.get(Section::Rank(0), &key("gemm")).expect("the fresh entry was pruned");
    assert_eq!(gemm.tactic, serde_json::json!(7));
    assert!(after.get(Section::Rank(0), &key("softmax")).is_none(), "the stale one stays pruned");
    assert!(out.contains("removed 1 stale"), "{out}");
}

#[test]
fn merge_output_keeps_a_newer_entry_saved_while_it_waited() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.json");
    let in_path = dir.path().join("in.json");
    FileStore::new(&out_path).save(&one("gemm", entry(1, "e", 100))).unwrap();
    write_cache_file(&in_path, &one("gemm", entry(2, "e", 150))).unwrap();

    let held = hold_lock(&out_path);
    let running = start_waiting(&[
        "cache",
        "merge",
        "-o",
        out_path.to_str().unwrap(),
        in_path.to_str().unwrap(),
    ]);
    // A rank saves a newer decision into OUT while merge waits.
    write_cache_file(&out_path, &one("gemm", entry(3, "e", 200))).unwrap();
    drop(held);
    let (code, out, err) = finish(running);
    assert_eq!(code, 0, "{out}{err}");
    let after = FileStore::new(&out_path).load().unwrap().data;
    let gemm = after.get(Section::Rank(0), &key("gemm")).unwrap();
    assert_eq!(gemm.created_unix, 200, "newest wins, also against what arrived meanwhile");
    assert_eq!(gemm.tactic, serde_json::json!(3));
}

#[test]
fn a_save_whose_spool_was_damaged_and_set_aside_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.json");
    let spool = dir.path().join("tune.json.spool");
    let held = hold_lock(&path);
    let p = path.clone();
    let damaged =
        std::thread::spawn(move || FileStore::new(&p).save(&one("gemm", entry(1, "e", 1))));
    let spooled = |n: usize| {
        let start = Instant::now();
        loop {
            let files: Vec<PathBuf> = std::fs::read_dir(&spool)
                .map(|r| {
                    r.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|x| x == "json"))
                        .collect()
                })
                .unwrap_or_default();
            if files.len() >= n {
                return files;
            }
            assert!(start.elapsed() < Duration::from_secs(120), "no spool file appeared");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let first = spooled(1);
    assert_eq!(first.len(), 1);
    std::fs::write(&first[0], b"{\"format\": \"ranktune-cache\", \"rank_0\": [tru").unwrap();
    // A second, healthy save waits too; whoever gets the lock first folds
    // both spools and sets the damaged one aside.
    let p = path.clone();
    let healthy =
        std::thread::spawn(move || FileStore::new(&p).save(&one("softmax", entry(2, "e", 1))));
    spooled(2);
    drop(held);
    let healthy = healthy.join().unwrap();
    let damaged = damaged.join().unwrap();
    assert!(healthy.is_ok(), "{healthy:?}");
    let e = damaged
        .expect_err("a save whose entries were set aside must not report success")
        .to_string();
    assert!(e.contains("set aside") && e.contains("corrupt"), "{e}");
    let after = FileStore::new(&path).load().unwrap().data;
    assert!(after.get(Section::Rank(0), &key("softmax")).is_some());
    assert!(after.get(Section::Rank(0), &key("gemm")).is_none());
}

/// A `cache import` process whose spool file is removed while it waits for
/// the lock writes its entries again and reports success only once they are
/// in the file (it used to print "imported 1 entries … (it now holds 0)").
#[test]
fn an_import_whose_spool_vanished_while_it_waited_saves_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.json");
    let src = dir.path().join("in.json");
    write_cache_file(&src, &one("gemm", entry(4, "e", 100))).unwrap();
    let held = hold_lock(&path);
    let running =
        start_waiting(&["cache", "import", path.to_str().unwrap(), src.to_str().unwrap()]);
    let never = std::sync::atomic::AtomicBool::new(false);
    assert_eq!(remove_spools(&dir.path().join("tune.json.spool"), 1, &never), 1);
    std::thread::sleep(Duration::from_millis(100));
    drop(held);
    let (code, out, err) = finish(running);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("disappeared before it was folded"), "says what happened: {err}");
    let after = FileStore::new(&path).load().unwrap().data;
    let gemm = after.get(Section::Rank(0), &key("gemm")).expect("reported saved, so in the file");
    assert_eq!(gemm.tactic, serde_json::json!(4));
    assert!(out.contains("it now holds 1"), "{out}");
}

/// When the spool keeps vanishing, the `cache import` process fails with a
/// message naming the cause, never a success line.
#[test]
fn an_import_whose_spool_keeps_vanishing_fails_and_says_so() {
    use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.json");
    let src = dir.path().join("in.json");
    write_cache_file(&src, &one("gemm", entry(4, "e", 100))).unwrap();
    let _held = hold_lock(&path);
    let running =
        start_waiting(&["cache", "import", path.to_str().unwrap(), src.to_str().unwrap()]);
    let done = AtomicBool::new(false);
    let spool = dir.path().join("tune.json.spool");
    let (code, out, err) = std::thread::scope(|s| {
        let remover = s.spawn(|| remove_spools(&spool, usize::MAX, &done));
        let result = finish(running);
        done.store(true, AtomicOrdering::Relaxed);
        assert!(remover.join().unwrap() >= 2, "the save wrote its spool again");
        result
    });
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("disappeared") && err.contains("nothing was saved"), "{err}");
    assert!(!out.contains("imported"), "no success line for entries never saved: {out}");
    assert!(FileStore::new(&path).inspect().unwrap().data.is_empty());
}
