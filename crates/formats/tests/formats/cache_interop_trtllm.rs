//! Importing and exporting TensorRT-LLM cache files, on fixtures written the
//! way the reference writes them (`tests/fixtures/trtllm/make_fixtures.py`).

use ranktune_cache::{cache_to_bytes, parse_cache, EntryKey, Section};
use ranktune_formats::trtllm::{
    export, export_document, format_key, import_bytes, parse_key, repr_float, IMPORTED_CHECKSUM,
};
use ranktune_formats::FormatError;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trtllm").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const ALLREDUCE: &str = r#"('trtllm::tunable_allreduce::allreduce', 'AllReduceRunner', "(8, (0, 1, 2, 3, 4, 5, 6, 7), 'RESIDUAL_RMS_NORM', 1e-06, True)", ((1, 2048), (1, 2048), (2048,), (1,)))"#;

#[test]
fn multi_rank_file_with_shared_section() {
    let imported = import_bytes(&fixture("multi_rank.json")).unwrap();
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    assert_eq!(imported.skipped, 0);
    let data = &imported.data;
    let sections: Vec<String> = data.sections.keys().map(Section::name).collect();
    assert_eq!(sections, ["shared", "rank_0", "rank_1", "rank_2", "rank_3"]);
    assert_eq!(data.sections[&Section::Shared].len(), 3);
    for r in 0..4 {
        assert_eq!(data.sections[&Section::Rank(r)].len(), 12, "rank_{r}");
    }

    let key = parse_key(ALLREDUCE).unwrap();
    let e = data.get(Section::Shared, &key).unwrap();
    assert_eq!(e.tactic, json!(43));
    assert_eq!(e.runner_index, 0);
    assert_eq!(e.time_us, 9.17);
    assert_eq!(e.checksum, IMPORTED_CHECKSUM);
    assert_eq!(e.created_unix, 1_764_480_000);
    assert!(e.candidates.is_empty());

    let id = &data.metadata.environments[&e.env];
    assert_eq!(id.lib_version, "trtllm-1.2.0rc1");
    assert_eq!(id.device_name, "NVIDIA H200");
    assert_eq!(id.capability, "9.0");
    assert_eq!(id.device_kind, "cuda");
    assert_eq!(data.metadata.environments.len(), 1);

    // Tuple tactics become arrays; strings stay strings; dicts become objects.
    let moe = data.sections[&Section::Rank(2)]
        .iter()
        .find(|(k, _)| k.op == "trtllm::fused_moe" && k.bucket[0] == [512, 7168])
        .unwrap();
    assert_eq!(moe.0.fingerprint, "(2, 'swiglu', [1, 2])");
    assert_eq!(moe.1.tactic, json!([[256, 256], [1, 2], 1]));
    let bmm = data.sections[&Section::Rank(0)].iter().find(|(k, _)| k.op == "trtllm::bmm").unwrap();
    assert!(bmm.1.tactic.as_str().unwrap().starts_with("bmm_E4m3"));
    let attn =
        data.sections[&Section::Rank(0)].iter().find(|(k, _)| k.op == "trtllm::attention").unwrap();
    assert_eq!(attn.0.fingerprint, "{'kv': \"fp8\"}\n");
    assert_eq!(attn.0.bucket, vec![vec![1], vec![]]);
    assert_eq!(attn.1.tactic, json!({"split_k": null, "stages": {"$list": [2, 3]}, "tile": 64}));
    let big =
        data.sections[&Section::Shared].keys().find(|k| k.op == "trtllm::nvfp4_gemm").unwrap();
    assert_eq!(big.fingerprint, "('big', 123456789012345678901234567890)");
}

#[test]
fn old_file_without_shared_section() {
    let imported = import_bytes(&fixture("old_no_shared.json")).unwrap();
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    let data = &imported.data;
    assert_eq!(data.sections.len(), 2);
    assert!(!data.sections.contains_key(&Section::Shared));
    assert_eq!(data.len(), 24);
    let id = data.metadata.environments.values().next().unwrap();
    assert_eq!(id.lib_version, "trtllm-0.20.0");
    assert_eq!(id.device_name, "NVIDIA H100 80GB HBM3");
}

#[test]
fn bad_entries_are_skipped_by_name_and_the_rest_loads() {
    let imported = import_bytes(&fixture("bad_tactic.json")).unwrap();
    assert_eq!(imported.skipped, 4, "{:#?}", imported.warnings);
    assert_eq!(imported.data.len(), 12);
    let w = imported.warnings.join("\n");
    assert!(w.contains("<Tactic object at 0x7f3a>"), "{w}");
    assert!(w.contains("((3, 4096), (4096, 4096))"), "the warning names the entry: {w}");
    assert!(w.contains("not a tuple key"), "{w}");
    assert!(w.contains("min_time is null"), "NaN time: {w}");
    assert!(w.contains("runner_id -1"), "{w}");
    assert!(imported
        .warnings
        .iter()
        .all(|l| l.starts_with("rank_0 entry ") && l.ends_with("; skipped")));
    // The entries around the bad one keep their own tactics (the reference
    // silently reuses the previous entry's tactic here).
    for (k, e) in &imported.data.sections[&Section::Rank(0)] {
        if k.op == "trtllm::fp8_block_scaling_gemm" {
            let m = k.bucket[0][0].as_u64().unwrap();
            assert_eq!(e.tactic, json!([if m > 64 { 256 } else { 128 }, 128]), "{k}");
        }
    }
}

#[test]
fn not_json_is_a_clear_error() {
    match import_bytes(&fixture("truncated.json")) {
        Err(FormatError::NotJson { at: Some((line, column)), .. }) => {
            assert_eq!(line, 2);
            assert!(column > 0);
        }
        other => panic!("expected NotJson, got {other:?}"),
    }
    let err = import_bytes(b"\xff\xfe{}").unwrap_err();
    assert!(matches!(err, FormatError::NotUtf8 { offset: 0 }), "{err}");
    let err = import_bytes(b"[1, 2]").unwrap_err();
    assert!(err.to_string().contains("JSON array, not an object"), "{err}");
    // An empty file, or no metadata, is ordinary.
    assert!(import_bytes(b"").unwrap().data.is_empty());
    let no_meta = import_bytes(br#"{"rank_0": {"('op', 'R', 'u', ((1,),))": {"runner_id": 0, "tactic": "5", "min_time": 1.0}}}"#).unwrap();
    assert_eq!(no_meta.data.len(), 1);
    assert!(no_meta.warnings.is_empty());
    // Odd sections are reported and skipped, never fatal.
    let odd = import_bytes(
        br#"{"rank_x": {}, "rank_1": [1], "metadata": {"device_capability": "nine"}}"#,
    )
    .unwrap();
    assert_eq!(odd.warnings.len(), 2, "{:?}", odd.warnings);
    assert_eq!(odd.skipped, 1);
}

/// Export of an import reproduces the reference file exactly: the same
/// text, byte for byte (member order, `metadata` with its fractional
/// `creation_timestamp`, every `min_time` and `tactic` as written,
/// indentation), also when the cache went through a ranktune cache file in
/// between, and on every further trip. Before, 41 of the 238 timings of
/// `timings_238.json` moved by one ulp per trip, `creation_timestamp` lost
/// its fraction and dict tactics came out with sorted keys.
#[test]
fn export_of_import_reproduces_the_reference_file() {
    for name in ["multi_rank.json", "old_no_shared.json", "timings_238.json"] {
        let original = fixture(name);
        let text = std::str::from_utf8(&original).unwrap();
        let imported = import_bytes(&original).unwrap();
        assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
        let (exported, exported_doc) = export_document(&imported.data);
        assert!(exported.warnings.is_empty(), "{:?}", exported.warnings);
        assert_eq!(exported.skipped, 0);
        assert_eq!(exported.text(), text, "{name}");
        // Through a ranktune cache file, as `cache import` then `cache
        // export` do.
        let stored = cache_to_bytes(&imported.data);
        let reread = parse_cache(&stored).unwrap();
        assert!(reread.warnings.is_empty(), "{:?}", reread.warnings);
        assert_eq!(export(&reread.data).text(), text, "{name} through a cache file");
        // And Python agrees the values are equal.
        let original_doc: Value = serde_json::from_slice(&original).unwrap();
        python_equivalent(&original_doc, &exported_doc);
        // Further trips change nothing at all.
        let mut again = exported.text().to_string();
        for _ in 0..3 {
            again = export(&import_bytes(again.as_bytes()).unwrap().data).text().to_string();
        }
        assert_eq!(again, text, "{name} after four trips");
    }
}

/// An entry that changed after the import is written from the cache (the
/// file's text would be a lie), the others still as the file had them.
#[test]
fn changed_entries_are_written_from_the_cache() {
    let original = fixture("timings_238.json");
    let mut data = import_bytes(&original).unwrap().data;
    let (section, key) = {
        let (s, k, _) = data.iter().nth(5).unwrap();
        (s, k.clone())
    };
    let entry = data.sections.get_mut(&section).unwrap().get_mut(&key).unwrap();
    entry.time_us = 2500.0;
    entry.tactic = json!([256, 64]);
    let exported = export(&data);
    let doc: Value = serde_json::from_str(exported.text()).unwrap();
    let changed = &doc[section.name()][format_key(&key)];
    assert_eq!(changed["min_time"], json!(2.5));
    assert_eq!(changed["tactic"], json!("(256, 64)"));
    let original_doc: Value = serde_json::from_slice(&original).unwrap();
    let differing: usize = ["rank_0", "rank_1"]
        .iter()
        .map(|s| {
            let (a, b) = (original_doc[s].as_object().unwrap(), doc[s].as_object().unwrap());
            a.iter().filter(|(k, v)| b.get(*k) != Some(*v)).count()
        })
        .sum();
    assert_eq!(differing, 1);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    /// Any finite non-negative double as `min_time`, written the way Python
    /// or Rust writes it, survives import → cache file → export unchanged,
    /// as text and as a number.
    #[test]
    fn any_min_time_survives(ms in 0.0f64..1e6, bits in proptest::num::u64::ANY, python in proptest::bool::ANY) {
        // Half the cases: arbitrary bit patterns (tiny, huge, 17 digits).
        let from_bits = f64::from_bits(bits >> 1);
        // (Up to what microseconds can hold: larger times are refused by name.)
        let ms = if from_bits < 1e300 && bits & 1 == 1 { from_bits } else { ms };
        let number = if python { repr_float(ms) } else { serde_json::to_string(&ms).unwrap() };
        let text = format!(
            "{{\"metadata\": {{\"creation_timestamp\": 1796013701.2851028}}, \"rank_0\": \
             {{\"('op', 'R', 'u', ((8,),))\": {{\"runner_id\": 0, \"tactic\": \"7\", \"min_time\": {number}}}}}}}"
        );
        let imported = import_bytes(text.as_bytes()).unwrap();
        proptest::prop_assert_eq!(imported.skipped, 0);
        let reread = parse_cache(&cache_to_bytes(&imported.data)).unwrap();
        let out = export(&reread.data).text().to_string();
        proptest::prop_assert_eq!(&out, &text);
        let doc: Value = serde_json::from_str(&out).unwrap();
        proptest::prop_assert_eq!(doc["rank_0"]["('op', 'R', 'u', ((8,),))"]["min_time"].as_f64(), Some(ms));
    }
}

fn python_equivalent(a: &Value, b: &Value) {
    let script = r#"
import ast, json, sys
a, b = (json.loads(line) for line in sys.stdin)
assert a.keys() == b.keys(), (a.keys(), b.keys())
for name in a:
    if name == "metadata":
        continue
    assert a[name].keys() == b[name].keys(), name
    for k in a[name]:
        va, vb = a[name][k], b[name][k]
        assert ast.literal_eval(va["tactic"]) == ast.literal_eval(vb["tactic"]), (k, va, vb)
        assert va["runner_id"] == vb["runner_id"] and va["min_time"] == vb["min_time"], (k, va, vb)
print("ok")
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed by this test (.ci/run installs it)");
    {
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{a}").unwrap();
        writeln!(stdin, "{b}").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn export_of_native_entries() {
    use ranktune_cache::{CacheData, Entry, Identity};
    let mut data = CacheData::default();
    let id = Identity {
        lib_version: "0.1.0".into(),
        device_kind: "cpu".into(),
        device_name: "AMD EPYC".into(),
        capability: "x86_64+avx2".into(),
        cores: 2,
    };
    data.metadata.environments.insert("envA".into(), id);
    let key = EntryKey {
        op: "gemm".into(),
        runner: "blocked".into(),
        fingerprint: "a1b2".into(),
        bucket: ranktune_cache::sizes_bucket(&[vec![64, 64], vec![64]]),
    };
    let entry = Entry {
        runner_index: 1,
        tactic: json!({"tile": 64, "order": "ikj"}),
        time_us: 12.5,
        candidates: vec![],
        checksum: "c".into(),
        env: "envA".into(),
        created_unix: 1_700_000_000,
    };
    data.insert(Section::Rank(1), key.clone(), entry.clone());
    let mut odd = entry.clone();
    odd.tactic = json!({"$float": "bogus"});
    data.insert(Section::Rank(1), EntryKey { op: "odd".into(), ..key.clone() }, odd);

    let (out, doc) = export_document(&data);
    assert_eq!((out.written, out.skipped), (1, 1));
    assert!(out.warnings[0].contains("odd"), "{:?}", out.warnings);
    assert_eq!(
        doc["metadata"],
        json!({"lib_version": "ranktune-0.1.0", "creation_timestamp": 1.7e9, "device_name": "AMD EPYC", "device_capability": []})
    );
    assert_eq!(
        doc["rank_1"]["('gemm', 'blocked', 'a1b2', ((64, 64), (64,)))"],
        json!({"runner_id": 1, "tactic": "{'order': 'ikj', 'tile': 64}", "min_time": 0.0125})
    );
}
