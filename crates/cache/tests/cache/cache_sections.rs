//! Sections a cache file holds beyond what this build uses, and entries it
//! holds twice: what every load and every rewrite does with them.

use ranktune_cache::{CacheData, Entry, EntryKey, FileStore, Section, Store};
use ranktune_testkit::cache_fixtures as fixtures;

fn key(op: &str, n: u64) -> EntryKey {
    fixtures::key(op, &[&[n]])
}

fn entry(tactic: i64, created_unix: u64) -> Entry {
    Entry { created_unix, ..fixtures::entry(serde_json::json!(tactic)) }
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

/// A canonical file of `ranks` rank sections of `n` entries each, written
/// by the codec itself.
fn canonical(path: &std::path::Path, ranks: u32, n: u64) {
    let mut d = CacheData::default();
    for r in 0..ranks {
        for i in 0..n {
            d.insert(Section::Rank(r), key("gemm", i), entry(i as i64 + i64::from(r), 5));
        }
    }
    d.insert(Section::Shared, key("norm", 1), entry(1, 5));
    ranktune_cache::write_cache_file(path, &d).unwrap();
}

/// The text of section `name` in a canonical file.
fn section_text(text: &str, name: &str) -> String {
    let start = text.find(&format!("\"{name}\": [")).unwrap();
    let end = start + text[start..].find("\n  ]").unwrap();
    text[start..end].to_string()
}

#[test]
fn a_fold_copies_the_sections_it_does_not_change_and_writes_what_a_whole_rewrite_would() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    canonical(&path, 5, 30);
    let before = std::fs::read_to_string(&path).unwrap();
    let store = FileStore::new(&path);
    let mut up = CacheData::default();
    up.insert(Section::Rank(2), key("gemm", 3), entry(99, 6));
    up.insert(Section::Rank(7), key("gemm", 1), entry(98, 6));
    let report = store.save(&up).unwrap();
    assert_eq!(report.total, 5 * 30 + 1 + 1, "the total counts the copied sections too");
    let after = std::fs::read_to_string(&path).unwrap();
    for name in ["shared", "rank_0", "rank_1", "rank_3", "rank_4"] {
        assert_eq!(section_text(&before, name), section_text(&after, name), "{name}");
    }
    assert_ne!(section_text(&before, "rank_2"), section_text(&after, "rank_2"));
    // The result is the canonical form of its content: what a whole
    // rewrite would have written.
    let parsed = ranktune_cache::read_cache_file(&path).unwrap();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(String::from_utf8(ranktune_cache::cache_to_bytes(&parsed.data)).unwrap(), after);
    assert_eq!(parsed.data.get(Section::Rank(2), &key("gemm", 3)).unwrap().tactic, 99);
    assert_eq!(parsed.data.get(Section::Rank(7), &key("gemm", 1)).unwrap().tactic, 98);
}

#[test]
fn a_hand_formatted_file_folds_and_loads_by_section() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    // Pretty-printed, sections out of order, a string full of brackets.
    let odd = r#"{"op":"x]}\"[{","runner":"blocked","fingerprint":"f0","bucket":[[2]],"runner_index":0,"tactic":"]}","time_us":1.0,"checksum":"sum","env":"e","created_unix":5}"#;
    let text = format!(
        "{{\n \"rank_3\" :\n  [ {odd} ,\n {} ] ,\n\t\"format\":\"ranktune-cache\",\"version\":\"1.0\",\n \"rank_1\": [{}], \"shared\": [] }}",
        line("gemm", 1, 3, 5),
        line("gemm", 1, 1, 5)
    );
    std::fs::write(&path, &text).unwrap();
    let store = FileStore::new(&path);
    let rank3 = store.load_sections(&[Section::Shared, Section::Rank(3)]).unwrap();
    assert!(rank3.warnings.is_empty(), "{:?}", rank3.warnings);
    assert_eq!(rank3.data.len(), 2);
    assert!(rank3.data.sections.keys().all(|s| *s == Section::Rank(3)));
    let mut up = CacheData::default();
    up.insert(Section::Rank(1), key("gemm", 2), entry(7, 6));
    store.save(&up).unwrap();
    let all = store.load().unwrap();
    assert!(all.warnings.is_empty(), "{:?}", all.warnings);
    assert_eq!(all.data.len(), 4);
    let x = EntryKey { op: "x]}\"[{".into(), ..key("gemm", 2) };
    assert_eq!(all.data.get(Section::Rank(3), &x).unwrap().tactic, "]}");
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(after.contains(&format!("\"rank_3\": [ {odd} ,")), "copied as it was: {after}");
    assert!(after.find("\"rank_1\"").unwrap() < after.find("\"rank_3\"").unwrap());
}

#[test]
fn a_rank_load_skips_other_sections_unbuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    // rank_5's entry is malformed: a whole load warns about it, a load of
    // rank 0 never builds it, so never sees it.
    std::fs::write(
        &path,
        format!(
            "{{\"format\": \"ranktune-cache\", \"version\": \"1.0\", \"rank_0\": [{}], \"rank_5\": [{{\"op\": 1}}]}}",
            line("gemm", 1, 1, 5)
        ),
    )
    .unwrap();
    let store = FileStore::new(&path);
    let whole = store.load().unwrap();
    assert_eq!(whole.bad_entries, 1);
    let mine = store.load_sections(&[Section::Shared, Section::Rank(0)]).unwrap();
    assert_eq!((mine.data.len(), mine.bad_entries), (1, 0), "{:?}", mine.warnings);
    // A damaged file is still set aside by a rank's load.
    std::fs::write(&path, "{\"format\": \"ranktune-cache\", \"rank_0\": [").unwrap();
    let loaded = store.load_sections(&[Section::Rank(0)]).unwrap();
    assert!(loaded.moved_aside.is_some());
}
