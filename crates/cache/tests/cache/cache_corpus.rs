//! Damaged and unusual cache files: each gives a clear message and never a
//! panic; nothing is silently overwritten or lost.

use ranktune_cache::{CacheData, CacheError, Entry, EntryKey, FileStore, Section, Store};
use ranktune_testkit::file_names;

const GOOD: &str = r#"{"op":"gemm","runner":"blocked","fingerprint":"f0","bucket":[[64,64]],"runner_index":0,"tactic":3,"time_us":12.5,"checksum":"c","env":"e","created_unix":1}"#;

fn doc(version: &str, entries: &[&str]) -> String {
    format!(
        "{{\"format\": \"ranktune-cache\", \"version\": \"{version}\", \"metadata\": {{}}, \"rank_0\": [\n{}\n]}}",
        entries.join(",\n")
    )
}

fn one_update() -> CacheData {
    let mut d = CacheData::default();
    d.insert(
        Section::Rank(1),
        EntryKey {
            op: "softmax".into(),
            runner: "r".into(),
            fingerprint: "f".into(),
            bucket: ranktune_cache::sizes_bucket(&[vec![8]]),
        },
        Entry {
            runner_index: 0,
            tactic: serde_json::json!("x"),
            time_us: 1.0,
            candidates: vec![],
            checksum: "c".into(),
            env: "e".into(),
            created_unix: 2,
        },
    );
    d
}

#[test]
fn unparseable_files_are_set_aside_with_a_warning_naming_both_paths() {
    let valid = doc("1.0", &[GOOD]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", valid.as_bytes()[..valid.len() / 2].to_vec()),
        ("not JSON", b"this is not a cache\n".to_vec()),
        ("non-UTF-8", b"{\"format\": \"ranktune-cache\", \"x\": \"\xff\xfe\"}".to_vec()),
        ("NaN", doc("1.0", &[&GOOD.replace("12.5", "NaN")]).into_bytes()),
        ("top-level array", b"[1, 2, 3]".to_vec()),
        ("zeros", vec![0u8; 4096]),
        ("trailing garbage", format!("{valid} {{").into_bytes()),
    ];
    for (name, bytes) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, &bytes).unwrap();
        let store = FileStore::new(&path);
        // Read-only inspection reports it and touches nothing.
        let err = store.inspect().unwrap_err();
        assert!(matches!(err, CacheError::Corrupt { .. }), "{name}: {err:?}");
        assert!(err.to_string().contains("does not parse"), "{name}: {err}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name}: inspect changed the file");
        // A load sets it aside and goes on with an empty cache.
        let loaded = store.load().unwrap();
        assert!(loaded.data.is_empty(), "{name}");
        let aside = loaded.moved_aside.clone().unwrap_or_else(|| panic!("{name}: not set aside"));
        assert!(
            aside.file_name().unwrap().to_string_lossy().starts_with("c.json.corrupt-"),
            "{aside:?}"
        );
        assert_eq!(std::fs::read(&aside).unwrap(), bytes, "{name}: content lost");
        let w = loaded.warnings.join("\n");
        assert!(
            w.contains(&path.display().to_string()) && w.contains(&aside.display().to_string()),
            "{name}: {w}"
        );
        // Saving afterwards starts a new file; the damaged one stays aside.
        store.save(&one_update()).unwrap();
        assert_eq!(store.load().unwrap().data.len(), 1);
        assert_eq!(std::fs::read(&aside).unwrap(), bytes);
    }
}

#[test]
fn a_save_over_a_damaged_file_sets_it_aside_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, b"{\"format\": \"ranktune-cache\", \"rank_0\": [").unwrap();
    let store = FileStore::new(&path);
    let report = store.save(&one_update()).unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("corrupt-")), "{:?}", report.warnings);
    let names = file_names(dir.path());
    assert!(names.iter().any(|n| n.starts_with("c.json.corrupt-")), "{names:?}");
    assert_eq!(store.load().unwrap().data.len(), 1);
}

#[test]
fn empty_and_minimal_files_are_ordinary() {
    for text in [
        "",
        "   \n",
        "{}",
        "{\"format\": \"ranktune-cache\", \"version\": \"1.0\"}",
        "{\"rank_0\": []}",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, text).unwrap();
        let loaded = FileStore::new(&path).load().unwrap();
        assert!(
            loaded.data.is_empty() && loaded.warnings.is_empty() && loaded.moved_aside.is_none(),
            "{text:?}"
        );
        // Missing metadata is fine and sections still load.
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, format!("{{\"rank_3\": [{GOOD}]}}")).unwrap();
    let loaded = FileStore::new(&path).load().unwrap();
    assert_eq!(loaded.data.len(), 1);
    assert!(loaded.data.sections.contains_key(&Section::Rank(3)));
}

#[test]
fn files_this_version_must_not_touch_are_refused_and_left_alone() {
    let trtllm = r#"{"metadata": {"lib_version": "0.20", "device_capability": [9, 0]},
        "rank_0": {"('gemm', 'R', '()', ((1,),))": {"runner_id": 0, "tactic": "3", "min_time": 0.1}}}"#;
    let cases = [
        ("future major version", doc("2.0", &[GOOD]), "2.0"),
        ("other format", "{\"format\": \"something-else\"}".to_string(), "not a ranktune cache"),
        ("TensorRT-LLM cache", trtllm.to_string(), "cache import"),
    ];
    for (name, text, needle) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, &text).unwrap();
        let store = FileStore::new(&path);
        let err = store.load().unwrap_err();
        assert!(matches!(err, CacheError::Unsupported { .. }), "{name}: {err:?}");
        assert!(err.to_string().contains(needle), "{name}: {err}");
        let err = store.save(&one_update()).unwrap_err();
        assert!(err.to_string().contains(needle), "{name}: {err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{name}: file was changed");
        assert!(!file_names(dir.path()).iter().any(|n| n.contains("corrupt")), "{name}");
        // Refused before anything was created next to the file: no spool,
        // no lock (the file is not ranktune's).
        assert_eq!(file_names(dir.path()), ["c.json"], "{name}: a refused save lingers");
    }
}

#[test]
fn bad_entries_are_skipped_by_name_and_the_rest_loads() {
    let g = |op: &str| GOOD.replace("\"gemm\"", &format!("\"{op}\""));
    let entries = [
        g("ok1"),
        g("types").replace("\"time_us\":12.5", "\"time_us\":\"fast\""),
        g("negative").replace("12.5", "-3"),
        g("huge").replace("12.5", "1e400"),
        g("hugeint").replace("\"runner_index\":0", "\"runner_index\":99999999999999999999"),
        g("dupfield").replace("\"tactic\":3", "\"tactic\":3,\"tactic\":4"),
        g("missing").replace(",\"checksum\":\"c\"", ""),
        "42".to_string(),
        g("ok2"),
    ];
    let refs: Vec<&str> = entries.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    std::fs::write(&path, doc("1.0", &refs)).unwrap();
    let store = FileStore::new(&path);
    let loaded = store.load().unwrap();
    let ops: Vec<&str> = loaded.data.iter().map(|(_, k, _)| k.op.as_str()).collect();
    assert_eq!(ops, ["ok1", "ok2"]);
    assert_eq!(loaded.bad_entries, 7);
    let w = loaded.warnings.join("\n");
    for name in ["types", "negative", "huge", "hugeint", "dupfield", "missing", "rank_0[7]"] {
        assert!(w.contains(name), "warning does not name {name}: {w}");
    }
    assert!(loaded.moved_aside.is_none());
    // A save keeps the bad entries as they are (nothing silently lost)...
    store.save(&one_update()).unwrap();
    let after = store.inspect().unwrap();
    assert_eq!(after.bad_entries, 7);
    assert_eq!(after.data.len(), 3);
    // ...and prune (Store::remove) drops them, naming each.
    let report = store.remove(&[]).unwrap();
    assert!(
        report.warnings.iter().filter(|w| w.contains("dropped")).count() == 7,
        "{:?}",
        report.warnings
    );
    let clean = store.inspect().unwrap();
    assert_eq!((clean.bad_entries, clean.data.len()), (0, 3));
    assert!(clean.warnings.is_empty(), "{:?}", clean.warnings);
}

#[test]
fn duplicates_are_reported_and_nothing_is_dropped_silently() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let newer = GOOD
        .replace("\"created_unix\":1", "\"created_unix\":5")
        .replace("\"tactic\":3", "\"tactic\":9");
    let text = format!(
        "{{\"metadata\": {{}}, \"metadata\": {{\"host\": \"h\"}}, \"rank_0\": [{newer}, {GOOD}], \"rank_0\": [{}]}}",
        GOOD.replace("\"gemm\"", "\"other\"")
    );
    std::fs::write(&path, text).unwrap();
    let loaded = FileStore::new(&path).load().unwrap();
    let w = loaded.warnings.join("\n");
    assert!(w.contains("duplicate \"metadata\""), "{w}");
    assert!(w.contains("duplicate entry rank_0"), "{w}");
    assert!(w.contains("appears twice"), "{w}");
    assert_eq!(loaded.data.len(), 2);
    let k = EntryKey {
        op: "gemm".into(),
        runner: "blocked".into(),
        fingerprint: "f0".into(),
        bucket: ranktune_cache::sizes_bucket(&[vec![64, 64]]),
    };
    assert_eq!(
        loaded.data.get(Section::Rank(0), &k).unwrap().tactic,
        9,
        "the newer duplicate wins"
    );
    assert_eq!(loaded.data.metadata.host, "h");
}

#[test]
fn newer_minor_versions_load_and_their_fields_survive_a_save() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let future = GOOD.replace("\"created_unix\":1", "\"created_unix\":1,\"new_field\":{\"a\":1}");
    let text =
        doc("1.7", &[&future]).replace("\"metadata\": {}", "\"metadata\": {}, \"extra_top\": true");
    std::fs::write(&path, text).unwrap();
    let store = FileStore::new(&path);
    let loaded = store.load().unwrap();
    assert_eq!(loaded.data.len(), 1);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    store.save(&one_update()).unwrap();
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("\"new_field\":{\"a\":1}"), "{written}");
    assert_eq!(store.load().unwrap().data.len(), 2);
}

#[test]
fn a_newer_minor_version_is_never_written_lower_and_keeps_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let text = doc("1.7", &[GOOD])
        .replace("\"metadata\": {}", "\"metadata\": {\"site\": [1]}, \"extra_top\": true");
    std::fs::write(&path, text).unwrap();
    let store = FileStore::new(&path);
    store.save(&one_update()).unwrap();
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("\"version\": \"1.7\""), "{written}");
    assert!(written.contains("\"extra_top\": true"), "{written}");
    assert!(written.contains("\"site\": [1]"), "{written}");
    // Removing entries rewrites the file the same way.
    store.remove_where(&|_, k, _| k.op == "softmax").unwrap();
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("\"version\": \"1.7\"") && written.contains("\"extra_top\""));
    assert_eq!(store.load().unwrap().data.len(), 1);
}
