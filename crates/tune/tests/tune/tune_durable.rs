//! Durable progress in the library: `Session::checkpoint` saves the
//! decisions made so far when its `SaveEvery` policy says so, names what it
//! made durable, costs nothing when nothing is pending, never saves under
//! `End` (the behaviour before checkpoints), and a checkpoint that fails
//! keeps its decisions for the next save. Real stores: the in-memory one
//! and the JSON file store, made to fail by a path the OS refuses.

use crate::tune_support;

use ranktune_cache::{FileStore, MemoryStore, Section, Store};
use ranktune_tune::*;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tune_support::*;

fn clock() -> Arc<AtomicU64> {
    Arc::new(AtomicU64::new(0))
}

/// The rows of the buckets in `keys` (the first dim of the first input).
fn rows_of(keys: &[(Section, ranktune_cache::EntryKey)]) -> Vec<u64> {
    keys.iter().map(|(_, k)| k.bucket[0][0].as_u64().unwrap()).collect()
}

#[test]
fn every_zero_makes_each_decision_durable_as_it_is_made() {
    let c = clock();
    let op = two_runners(&c);
    let store = MemoryStore::new();
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    let mut session =
        Session::start(&tuner, &store).unwrap().save_every(SaveEvery::Every(Duration::ZERO));
    assert_eq!(session.policy(), SaveEvery::Every(Duration::ZERO));
    // Nothing pending: no save, whatever the policy.
    assert!(session.checkpoint().unwrap().is_none());
    tuner.set_tuning(true);
    for (i, rows) in [4, 16, 64].into_iter().enumerate() {
        tuner.choose_one(&op, &Rows::new(rows, 4));
        let cp = session.checkpoint().unwrap().expect("a save after each decision");
        assert_eq!(rows_of(&cp.saved), [rows as u64]);
        assert_eq!(cp.report.written, 1);
        assert_eq!(store.saves(), i + 1);
        assert_eq!(store.data().len(), i + 1, "in the store now, not at the end");
        // A hit adds nothing to save.
        tuner.choose_one(&op, &Rows::new(rows, 4));
        assert!(session.checkpoint().unwrap().is_none());
    }
    assert_eq!(session.written(), 3);
    assert_eq!(session.saves().0, 3);
    session.finish().unwrap();
    assert_eq!(store.saves(), 3, "the end has nothing left to save");
}

#[test]
fn end_saves_only_when_the_session_ends_as_before() {
    let c = clock();
    let op = two_runners(&c);
    let store = MemoryStore::new();
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    let mut session = Session::start(&tuner, &store).unwrap().save_every(SaveEvery::End);
    tuner.set_tuning(true);
    for rows in [4, 16, 64] {
        tuner.choose_one(&op, &Rows::new(rows, 4));
        assert!(session.checkpoint().unwrap().is_none());
    }
    assert_eq!(store.saves(), 0);
    let report = session.finish().unwrap();
    assert_eq!((report.written, store.saves(), store.data().len()), (3, 1, 3));
}

#[test]
fn the_first_decision_is_saved_at_once_then_an_interval_waits() {
    let c = clock();
    let op = two_runners(&c);
    let store = MemoryStore::new();
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    let hour = SaveEvery::Every(Duration::from_secs(3600));
    let mut session = Session::start(&tuner, &store).unwrap().save_every(hour);
    tuner.set_tuning(true);
    tuner.choose_one(&op, &Rows::new(4, 4));
    let cp = session.checkpoint().unwrap().expect("the first decision is saved at once");
    assert_eq!(rows_of(&cp.saved), [4]);
    tuner.choose_one(&op, &Rows::new(16, 4));
    assert!(session.checkpoint().unwrap().is_none(), "the next not for an hour");
    // `flush` saves now, whatever the policy, and says what.
    let cp = session.flush().unwrap().unwrap();
    assert_eq!(rows_of(&cp.saved), [16]);
    drop(session);

    let store = MemoryStore::new();
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    let mut session = Session::start(&tuner, &store).unwrap();
    assert_eq!(session.policy(), SaveEvery::Auto, "the default");
    tuner.set_tuning(true);
    tuner.choose_one(&op, &Rows::new(4, 4));
    let cp = session.checkpoint().unwrap().expect("auto saves the first decision at once");
    assert_eq!(rows_of(&cp.saved), [4]);
    assert_eq!(store.data().len(), 1);
}

#[test]
fn a_failed_checkpoint_keeps_its_decisions_for_the_next_save() {
    let c = clock();
    let op = two_runners(&c);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let store = FileStore::new(dir.join("c.json"));
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    let mut session =
        Session::start(&tuner, &store).unwrap().save_every(SaveEvery::Every(Duration::ZERO));
    tuner.set_tuning(true);
    tuner.choose_one(&op, &Rows::new(4, 4));
    assert_eq!(rows_of(&session.checkpoint().unwrap().unwrap().saved), [4]);
    // The cache's directory is replaced by a file: the OS refuses every
    // save into it.
    let aside = tmp.path().join("d.aside");
    std::fs::rename(&dir, &aside).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    tuner.choose_one(&op, &Rows::new(16, 4));
    let err = session.checkpoint().expect_err("the save cannot work");
    assert!(err.to_string().contains("not a directory"), "{err}");
    assert!(tuner.has_pending(), "the decision is kept");
    // A retry is not due at once after a failure (the store is not hammered).
    tuner.choose_one(&op, &Rows::new(64, 4));
    assert!(session.checkpoint().unwrap().is_none());
    // The directory is back: the next save takes both kept decisions.
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(&aside, &dir).unwrap();
    let cp = session.flush().unwrap().unwrap();
    let mut rows = rows_of(&cp.saved);
    rows.sort();
    assert_eq!(rows, [16, 64]);
    assert_eq!(session.written(), 3);
    drop(session);
    let stored = store.load().unwrap().data;
    assert_eq!(stored.len(), 3, "every decision is in the file");
}

/// A checkpoint goes through the session's checkpoint store (the CLI's: the
/// same file with a short lock wait), so a lock held by another process
/// fails the checkpoint quickly — its decision kept — instead of waiting
/// out the cache's full lock timeout between two buckets; the final save
/// goes through the session's own store and its own, longer, wait.
#[cfg(unix)]
#[test]
fn a_checkpoint_waits_only_as_long_as_its_own_store_allows() {
    use std::os::fd::AsRawFd;
    let c = clock();
    let op = two_runners(&c);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("c.json");
    let store = FileStore::new(&path).with_lock_timeout(Duration::from_secs(60));
    let quick = FileStore::new(&path).with_lock_timeout(Duration::from_millis(200));
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    let mut session = Session::start(&tuner, &store)
        .unwrap()
        .save_every(SaveEvery::Every(Duration::ZERO))
        .checkpoint_store(&quick);
    // Another holder of the cache's lock (flock locks belong to an open
    // file, so this one conflicts with the store's own).
    let lock = std::fs::File::create(tmp.path().join("c.json.lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    tuner.set_tuning(true);
    tuner.choose_one(&op, &Rows::new(4, 4));
    let t = std::time::Instant::now();
    let err = session.checkpoint().expect_err("the lock is held");
    assert!(t.elapsed() < Duration::from_secs(30), "waited {:?}: not the short wait", t.elapsed());
    assert!(err.to_string().contains("lock"), "{err}");
    assert!(tuner.has_pending(), "the decision is kept");
    // The holder lets go (explicitly: a process forked beside this test
    // shares the open file, and closing ours alone would not release it):
    // the final save, through the session's own store, takes the kept
    // decision.
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_UN) }, 0);
    drop(lock);
    let report = session.finish().unwrap();
    assert_eq!(report.written, 1);
    assert_eq!(store.load().unwrap().data.len(), 1);
}
