//! A child made by `fork` while a save holds the cache's lock does not keep
//! the lock for its life: a thread saving while the main thread forks
//! long-lived children (as `multiprocessing` and DataLoader workers do)
//! finishes at its own speed, and the lock is free the moment it returns,
//! while every child still lives. A binary of its own: it forks.

use ranktune_cache::{FileStore, Section, Store};
use ranktune_testkit::cache_fixtures as fixtures;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[test]
fn children_forked_during_saves_never_hold_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    let saver = {
        let store = store.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut n = 0u64;
            while started.elapsed() < Duration::from_millis(1500) {
                let key = fixtures::key("gemm", &[&[n % 64 + 1, 512]]);
                let data = fixtures::cache_of(&[(Section::Rank(0), key, fixtures::tiled_entry(n))]);
                let t = Instant::now();
                store.save(&data).unwrap();
                assert!(t.elapsed() < Duration::from_secs(5), "save {n} waited {:?}", t.elapsed());
                n += 1;
            }
            n
        })
    };
    let mut children = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1200) && children.len() < 200 {
        // SAFETY: the child only sleeps and exits with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: plain libc calls in the child.
            unsafe {
                libc::sleep(30);
                libc::_exit(0)
            };
        }
        children.push(pid);
        std::thread::sleep(Duration::from_millis(2));
    }
    let saves = saver.join().unwrap();
    assert!(saves > 5, "only {saves} saves");
    // Every child still lives; the lock is free.
    let lock = std::fs::File::open(dir.path().join("c.json.lock")).unwrap();
    // SAFETY: flock on an open descriptor.
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    let free = rc == 0;
    for &pid in &children {
        // SAFETY: kills and reaps the children made above.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    assert!(free, "a forked child holds the cache's lock ({} children)", children.len());
    assert_eq!(store.load().unwrap().data.len() as u64, saves.min(64));
}
