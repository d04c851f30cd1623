//! A load reads the saves waiting in the spool only from a spool directory
//! the cache could have made: a directory other users can write (or one of
//! a stranger, or a link) is not read, with a warning, and the load changes
//! nothing on disk, the directory's mode included (issue 37: a planted
//! spool must not hand a load entries of someone else's choosing).

use ranktune_cache::{
    sizes_bucket, write_cache_file, CacheData, Entry, EntryKey, FileStore, Section, Store,
};
use std::os::unix::fs::PermissionsExt;

fn key() -> EntryKey {
    EntryKey {
        op: "gemm".into(),
        runner: "blocked".into(),
        fingerprint: "f".into(),
        bucket: sizes_bucket(&[vec![8, 8]]),
    }
}

fn waiting_save(spool: &std::path::Path) {
    let mut data = CacheData::default();
    let entry = Entry {
        runner_index: 0,
        tactic: serde_json::json!(7),
        time_us: 1.0,
        candidates: vec![],
        checksum: "c".into(),
        env: "e".into(),
        created_unix: 0,
    };
    data.insert(Section::Rank(0), key(), entry);
    std::fs::create_dir(spool).unwrap();
    write_cache_file(&spool.join("00000000000000000001-0000000001-000000.json"), &data).unwrap();
}

#[test]
fn a_spool_others_can_write_is_not_read_and_a_load_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("c.json"));
    std::fs::write(store.path(), b"").unwrap();
    std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    waiting_save(&store.spool_path());

    std::fs::set_permissions(store.spool_path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ours = store.inspect().unwrap();
    assert!(ours.data.get(Section::Rank(0), &key()).is_some(), "{:?}", ours.warnings);

    std::fs::set_permissions(store.spool_path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    for loaded in [store.inspect().unwrap(), store.load().unwrap()] {
        assert!(loaded.data.get(Section::Rank(0), &key()).is_none());
        let w = loaded.warnings.join("\n");
        assert!(w.contains("is not read: other users can write it (mode 777)"), "{w}");
    }
    let mode = std::fs::metadata(store.spool_path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o777, "a load narrowed the spool directory's mode");
}
