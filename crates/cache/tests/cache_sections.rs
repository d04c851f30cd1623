//! Sections a cache file holds beyond what this build uses, and entries it
//! holds twice: what every load and every rewrite does with them.

use ranktune_cache::{CacheData, Entry, EntryKey, FileStore, Section, Store};

fn key(op: &str, n: u64) -> EntryKey {
    EntryKey {
        op: op.into(),
        runner: "blocked".into(),
        fingerprint: "f0".into(),
        bucket: vec![vec![n]],
    }
}

fn entry(tactic: i64, created_unix: u64) -> Entry {
    Entry {
        runner_index: 0,
        tactic: serde_json::json!(tactic),
        time_us: 1.0,
        candidates: vec![],
        checksum: "sum".into(),
        env: "e".into(),
        created_unix,
    }
}

fn line(op: &str, n: u64, tactic: i64, created_unix: u64) -> String {
    format!(
        r#"{{"op":"{op}","runner":"blocked","fingerprint":"f0","bucket":[[{n}]],"runner_index":0,"tactic":{tactic},"time_us":1.0,"checksum":"sum","env":"e","created_unix":{created_unix}}}"#
    )
}

#[test]
fn unrecognised_sections_survive_every_rewrite_and_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let big = format!("[{}]", line("gemm", 1, 7, 5));
    let padded = format!("[{}]", line("gemm", 2, 8, 5));
    std::fs::write(
        &path,
        format!(
            "{{\"format\": \"ranktune-cache\", \"version\": \"1.0\",\n\"rank_0\": [{}],\n\
             \"rank_4294967296\": {big},\n\"rank_01\": {padded}}}\n",
            line("gemm", 3, 9, 5)
        ),
    )
    .unwrap();
    let store = FileStore::new(&path);
    let named = |warnings: &[String], what: &str| {
        for name in ["rank_4294967296", "rank_01"] {
            assert!(
                warnings.iter().any(|w| w.contains(name) && w.contains("kept")),
                "{what}: no warning names {name}: {warnings:?}"
            );
        }
    };
    let loaded = store.load().unwrap();
    named(&loaded.warnings, "load");
    assert_eq!(loaded.data.len(), 1, "only rank_0's entry loads");

    let mut up = CacheData::default();
    up.insert(Section::Rank(1), key("gemm", 4), entry(1, 6));
    let report = store.save(&up).unwrap();
    named(&report.warnings, "save");
    let removed = store.remove(&[(Section::Rank(0), key("gemm", 3))]).unwrap();
    assert_eq!(removed.written, 1);
    store.save(&up).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&format!("\"rank_4294967296\": {big}")), "{text}");
    assert!(text.contains(&format!("\"rank_01\": {padded}")), "{text}");
    let loaded = store.load().unwrap();
    named(&loaded.warnings, "load after rewrites");
    assert_eq!(loaded.data.len(), 1);
    assert!(loaded.data.get(Section::Rank(1), &key("gemm", 4)).is_some());
}

/// A file holding `rank_0`'s `gemm [[1]]` twice, first with `first`
/// (tactic 1) then with `second` (tactic 2) as `created_unix`.
fn twice(path: &std::path::Path, first: u64, second: u64) {
    std::fs::write(
        path,
        format!(
            "{{\"format\": \"ranktune-cache\", \"version\": \"1.0\",\n\"rank_0\": [\n{},\n{},\n{}\n]}}\n",
            line("gemm", 1, 1, first),
            line("gemm", 5, 5, 1),
            line("gemm", 1, 2, second)
        ),
    )
    .unwrap();
}

#[test]
fn duplicates_newest_wins_in_load_and_fold_with_a_warning_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let store = FileStore::new(&path);
    let names_key = |warnings: &[String], what: &str| {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("duplicate entry rank_0 gemm/blocked") && w.contains("[[1]]")),
            "{what}: {warnings:?}"
        );
    };
    // (first created, second created, tactic that must win)
    for (first, second, want) in [(20, 10, 1), (10, 20, 2), (10, 10, 2)] {
        twice(&path, first, second);
        let loaded = store.load().unwrap();
        names_key(&loaded.warnings, "load");
        assert_eq!(loaded.data.get(Section::Rank(0), &key("gemm", 1)).unwrap().tactic, want);
        // A save into the same section rewrites it: the same entry wins.
        let mut up = CacheData::default();
        up.insert(Section::Rank(0), key("gemm", 9), entry(9, 30));
        let report = store.save(&up).unwrap();
        names_key(&report.warnings, "save");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches("\"bucket\":[[1]]").count(), 1, "{text}");
        let loaded = store.load().unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(
            loaded.data.get(Section::Rank(0), &key("gemm", 1)).unwrap().tactic,
            want,
            "fold and load agree for created {first} then {second}"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
