//! Spool files and the cache file as the file store meets them: the input
//! is put in a cache's spool as a waiting save (then as the cache file
//! itself), and the store reads it (`inspect`, `load`) and folds it under
//! its lock (`remove(&[])`: the fold of every save, strict). Nothing panics;
//! after a fold that succeeded, the cache reads back without error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ranktune_cache::{FileStore, Store};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

fn root() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    // On tmpfs where there is one: the store fsyncs every rewrite, which on
    // a disk would make this target measure the disk, not the parser.
    let shm = Path::new("/dev/shm");
    DIR.get_or_init(|| {
        if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }
            .expect("temp dir")
    })
    .path()
}

fn fresh() -> (FileStore, PathBuf) {
    let dir = root().join("c");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("cache dir");
    let store = FileStore::new(dir.join("tune.json")).with_lock_timeout(Duration::from_secs(1));
    (store, dir)
}

fn exercise(store: &FileStore) {
    let _ = store.inspect();
    let _ = store.load();
    if store.remove(&[]).is_ok() {
        if let Err(e) = store.inspect() {
            panic!("after a fold that succeeded the cache does not read: {e}");
        }
    }
}

fuzz_target!(|bytes: &[u8]| {
    // As a waiting save.
    let (store, _dir) = fresh();
    let spool = store.spool_path();
    std::fs::create_dir(&spool).expect("spool dir");
    std::fs::write(spool.join("1000-1-0.json"), bytes).expect("spool file");
    exercise(&store);

    // As the cache file.
    let (store, _dir) = fresh();
    std::fs::write(store.path(), bytes).expect("cache file");
    exercise(&store);
});
