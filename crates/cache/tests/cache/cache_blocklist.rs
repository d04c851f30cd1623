//! The blocklist in both stores: its file form and version, merges from
//! many processes at once (the union; under one key the newest record),
//! clears, a newer version's fields kept, and `merge()`.
//!
//! Children are this test binary itself, started with `RANKTUNE_TEST_CHILD`
//! set; the `child` test below is their entry point and does nothing when
//! the variable is unset.

use ranktune_cache::{
    merge, parse_cache, sizes_bucket, BlockKey, BlockKind, Blocked, CacheData, CacheLocation,
    FileStore, Section, Store,
};
use ranktune_testkit::cache_fixtures::{self as fixtures, tiled_entry};
use ranktune_testkit::redis::RedisServer;
use ranktune_testkit::{child_test, child_var, child_var_parsed, test_path};
use std::process::Stdio;
use std::time::Duration;

const CHILD_ENV: &str = "RANKTUNE_TEST_CHILD";

fn bkey(tactic: u64, m: u64) -> BlockKey {
    BlockKey::new("gemm", "tiled", "f", &tactic.into(), "env-a", sizes_bucket(&[vec![m, 64]]))
}

fn record(when: u64, msg: &str, rank: u32) -> Blocked {
    Blocked::new(BlockKind::Crash, msg, when, Some(rank), "host")
}

/// The update rank `rank` saves: two records of its own, and one under the
/// key every rank writes (`tactic 0`), dated `100 + rank`.
fn update_of(rank: u32) -> CacheData {
    let mut d = CacheData::default();
    d.blocklist.insert(bkey(u64::from(rank) + 10, 1024), record(50, "own", rank));
    d.blocklist.insert(bkey(u64::from(rank) + 10, 2048), record(50, "own", rank));
    d.blocklist.insert(bkey(0, 1024), record(100 + u64::from(rank), &format!("rank {rank}"), rank));
    d
}

/// Child entry point (a no-op in a normal test run).
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else { return };
    let store = CacheLocation::parse(&child_var("CHILD_CACHE")).unwrap().open().unwrap();
    match mode.as_str() {
        "block" => {
            let rank: u32 = child_var_parsed("RANK");
            let go_at: u128 = child_var_parsed("GO_AT_MS");
            let now =
                || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
            while now().as_millis() < go_at {
                std::thread::sleep(Duration::from_millis(1));
            }
            // An entry too, so records and entries travel in one save.
            let mut d = update_of(rank);
            d.insert(Section::Rank(rank), fixtures::key("gemm", &[&[8, 64]]), tiled_entry(1));
            store.save(&d).unwrap();
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// Starts `ranks` children that save at the same moment into `cache`,
/// then checks the union and the newest record under the shared key.
fn ranks_at_once(cache: &str, ranks: u32) {
    let go_at =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            + 1500;
    let children: Vec<_> = (0..ranks)
        .map(|rank| {
            child_test(&test_path(module_path!(), "child"), false)
                .env(CHILD_ENV, "block")
                .env("CHILD_CACHE", cache)
                .env("RANK", rank.to_string())
                .env("GO_AT_MS", go_at.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let loaded = CacheLocation::parse(cache).unwrap().open().unwrap().load().unwrap();
    let b = &loaded.data.blocklist;
    assert_eq!(b.len(), 2 * ranks as usize + 1, "every rank's records: {b:?}");
    for rank in 0..ranks {
        assert_eq!(b.get(&bkey(u64::from(rank) + 10, 2048)).unwrap().rank, Some(rank));
    }
    let newest = b.get(&bkey(0, 1024)).unwrap();
    assert_eq!(newest.message, format!("rank {}", ranks - 1), "the newest record wins");
    assert_eq!(loaded.data.len(), ranks as usize, "and the entries of the same saves");
}

#[test]
fn many_processes_saving_records_at_once_keep_the_union_and_the_newest_in_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.json");
    ranks_at_once(path.to_str().unwrap(), 8);
}

#[test]
fn many_processes_saving_records_at_once_keep_the_union_and_the_newest_in_redis() {
    let Some(server) = RedisServer::start() else { return };
    ranks_at_once(&format!("{}?prefix=blocks", server.url(0)), 8);
}

/// Clears and newest-wins against what is stored, the same in every store.
fn clears_remove_only_older_records(store: &dyn Store) {
    store.save(&update_of(0)).unwrap();
    // An older record under a stored key changes nothing.
    let mut older = CacheData::default();
    older.blocklist.insert(bkey(0, 1024), record(1, "older", 5));
    store.save(&older).unwrap();
    assert_eq!(store.load().unwrap().data.blocklist.get(&bkey(0, 1024)).unwrap().message, "rank 0");
    // A clear older than the record leaves it; a newer one removes it.
    let mut early = CacheData::default();
    early.blocklist.clear(bkey(0, 1024), 99);
    store.save(&early).unwrap();
    assert!(store.load().unwrap().data.blocklist.get(&bkey(0, 1024)).is_some());
    let mut clear = CacheData::default();
    clear.blocklist.clear(bkey(0, 1024), 100);
    store.save(&clear).unwrap();
    let loaded = store.load_sections(&[Section::Rank(3)]).unwrap();
    assert!(loaded.data.blocklist.get(&bkey(0, 1024)).is_none());
    assert_eq!(loaded.data.blocklist.len(), 2, "a rank's load has the whole blocklist");
    assert_eq!(loaded.data.blocklist.cleared().count(), 0, "a store keeps no clears");
}

#[test]
fn clears_remove_only_older_records_in_a_file() {
    let dir = tempfile::tempdir().unwrap();
    clears_remove_only_older_records(&FileStore::new(dir.path().join("c.json")));
}

#[test]
fn clears_remove_only_older_records_in_redis() {
    let Some(server) = RedisServer::start() else { return };
    let loc = CacheLocation::parse(&format!("{}?prefix=clears", server.url(0))).unwrap();
    clears_remove_only_older_records(loc.open().unwrap().as_ref());
}

#[test]
fn a_file_with_a_blocklist_is_version_1_1_and_one_without_stays_1_0() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    let mut d = CacheData::default();
    d.insert(Section::Rank(0), fixtures::key("gemm", &[&[8, 64]]), tiled_entry(1));
    store.save(&d).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"version\": \"1.0\"") && !text.contains("blocklist"), "{text}");
    store.save(&update_of(2)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"version\": \"1.1\""), "{text}");
    // One record per line, sorted by key, after the metadata.
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("\"kind\":\"crash\"")).collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(text.find("\"blocklist\"").unwrap() > text.find("\"metadata\"").unwrap());
    assert!(lines[0].contains("\"tactic\":0"), "{}", lines[0]);
    // Two saves of the same content are byte-identical.
    let again = ranktune_cache::cache_to_bytes(&parse_cache(text.as_bytes()).unwrap().data);
    assert_eq!(String::from_utf8(again).unwrap(), text);
}

#[test]
fn a_newer_versions_blocklist_fields_survive_our_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(
        &path,
        r#"{"format": "ranktune-cache", "version": "1.4",
        "blocklist": [{"op":"gemm","runner":"tiled","fingerprint":"f","tactic":3,"bucket":[[64]],
          "env":"e","kind":"gpu-reset","message":"m","when_unix":7,"host":"h","signal":11},
          {"op":"gemm"}],
        "rank_0": []}"#,
    )
    .unwrap();
    let store = FileStore::new(&path);
    let loaded = store.load().unwrap();
    assert_eq!(loaded.data.blocklist.len(), 1);
    assert!(loaded.warnings.iter().any(|w| w.contains("bad blocklist[1] skipped")), "{loaded:?}");
    let mut d = CacheData::default();
    d.insert(Section::Rank(0), fixtures::key("gemm", &[&[8, 64]]), tiled_entry(1));
    store.save(&d).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"version\": \"1.4\""), "{text}");
    assert!(text.contains("\"kind\":\"gpu-reset\""), "{text}");
    assert!(text.contains("\"signal\":11"), "a newer version's field is kept: {text}");
}

#[test]
fn merging_files_unites_their_blocklists() {
    let (a, b) = (update_of(0), update_of(3));
    let m = merge(&[a, b]);
    assert_eq!(m.data.blocklist.len(), 5);
    assert_eq!(m.data.blocklist.get(&bkey(0, 1024)).unwrap().message, "rank 3");
}
