//! Importing and exporting FlashInfer autotuner caches, on fixtures written
//! from its documented format (`tests/fixtures/flashinfer/make_fixtures.py`).

use ranktune_cache::{cache_to_bytes, check, parse_cache, EntryKey, Problem, Section};
use ranktune_formats::flashinfer::{export, import_bytes, CHECKSUM, FINGERPRINT_PREFIX};
use ranktune_formats::read_source;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flashinfer").join(name)
}

/// Import then export (also through a ranktune cache file) gives the file
/// back byte for byte; damaged entries included, since they are kept.
#[test]
fn export_of_import_is_the_same_file() {
    for name in ["b200.json", "mixed_env_damaged.json"] {
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        let imported = import_bytes(text.as_bytes()).unwrap();
        assert_eq!(export(&imported.data).text(), text, "{name}");
        let reread = parse_cache(&cache_to_bytes(&imported.data)).unwrap();
        assert_eq!(export(&reread.data).text(), text, "{name} through a cache file");
    }
}

#[test]
fn entries_keys_and_environment() {
    let source = read_source(&fixture("b200.json"), None).unwrap();
    assert_eq!(source.format.map(|f| f.name()), Some("flashinfer"));
    assert!(source.warnings.is_empty(), "{:?}", source.warnings);
    let data = &source.data;
    assert_eq!(data.len(), 6);
    let key = EntryKey {
        op: "fused_moe".into(),
        runner: "CuteDslFusedMoENvfp4Runner".into(),
        fingerprint: format!(
            "{FINGERPRINT_PREFIX}('fused_moe', 'CuteDslFusedMoENvfp4Runner', ((#, #), (#, #), (#,)))"
        ),
        bucket: ranktune_cache::sizes_bucket(&[vec![64, 7168], vec![256, 7168], vec![64]]),
    };
    let entry = data.get(Section::Rank(0), &key).unwrap();
    assert_eq!(entry.tactic, serde_json::json!([128, 2, 1]));
    assert_eq!(entry.checksum, CHECKSUM);
    let id = &data.metadata.environments[&entry.env];
    assert_eq!(id.device_name, "NVIDIA B200");
    assert_eq!(id.lib_version, "flashinfer-0.2.2.post1");
    assert_eq!(id.capability, "cuda 12.8, cublas 12.8.3, cudnn 9.8.0");

    // Another environment: the entries are stale, each counted, with where
    // they were measured — not the whole file thrown away.
    let problems = check(data, "some-other-environment");
    let stale: Vec<String> = problems
        .iter()
        .filter(|p| matches!(p, Problem::Stale { .. }))
        .map(|p| p.to_string())
        .collect();
    assert_eq!(stale.len(), 1, "{problems:?}");
    assert!(stale[0].contains("6 entries"), "{}", stale[0]);
    assert!(stale[0].contains("NVIDIA B200"), "{}", stale[0]);
}

#[test]
fn damaged_entries_and_a_changed_environment_are_named() {
    let imported =
        import_bytes(&std::fs::read(fixture("mixed_env_damaged.json")).unwrap()).unwrap();
    // A profile that is no tuple of int tuples is kept as text (the key is
    // opaque to FlashInfer): that entry imports; a value that is no array
    // is skipped.
    assert_eq!(imported.data.len(), 7);
    assert_eq!(imported.skipped, 1);
    let w = imported.warnings.join("\n");
    assert!(w.contains("value is not [runner, tactic"), "{w}");
    assert!(w.contains("flashinfer_version \"0.2.2.post1\" -> \"0.3.0\""), "{w}");
    assert!(w.contains("gpu_name \"NVIDIA B200\" -> \"NVIDIA H200\""), "{w}");
    assert!(import_bytes(b"[1, 2]").is_err());
    assert!(import_bytes(b"{\"_metadata\": ").is_err());
}

/// A cache with no FlashInfer origin still exports a valid file: its
/// `_metadata` from the entries' environment, then the entries.
#[test]
fn export_without_origin() {
    let imported = import_bytes(&std::fs::read(fixture("b200.json")).unwrap()).unwrap();
    let mut data = ranktune_cache::CacheData::default();
    data.metadata.environments = imported.data.metadata.environments.clone();
    for (s, k, e) in imported.data.iter() {
        data.insert(s, k.clone(), e.clone());
    }
    let text = export(&data).text().to_string();
    let again = import_bytes(text.as_bytes()).unwrap();
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    let entries = |d: &ranktune_cache::CacheData| {
        d.iter().map(|(s, k, e)| (s, k.clone(), e.clone())).collect::<Vec<_>>()
    };
    assert_eq!(entries(&again.data), entries(&imported.data));
    assert!(
        text.starts_with("{\n  \"_metadata\": {\n    \"flashinfer_version\": \"0.2.2.post1\""),
        "{text}"
    );
}
