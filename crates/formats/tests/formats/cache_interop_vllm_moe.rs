//! Importing and exporting vLLM/SGLang fused-MoE config files, on fixtures
//! written the way their tuners write them
//! (`tests/fixtures/vllm_moe/make_fixtures.py`).

use ranktune_cache::{
    cache_to_bytes, diff, parse_cache, ChangeKind, DiffOptions, EntryKey, Section,
};
use ranktune_formats::vllm_moe::{
    align_devices, export, import_file, FileName, CHECKSUM, OP, RUNNER,
};
use ranktune_formats::{read_source, SourceError};
use std::path::PathBuf;

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vllm_moe").join(name)
}

fn files(folder: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir(folder))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .filter(|(n, _)| n.ends_with(".json"))
        .collect();
    out.sort();
    out
}

const H200: &str = "E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json";

/// Import then export gives every file back byte for byte: member order
/// (also when batch sizes are not in numeric order), key order of every
/// config (ROCm's extra keys included), `triton_version`, indentation and
/// the final newline or its absence — also through a ranktune cache file.
#[test]
fn export_of_import_is_the_same_file() {
    for folder in ["two_gpus", "rocm"] {
        for (name, text) in files(folder) {
            let imported = import_file(&name, text.as_bytes()).unwrap();
            assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
            let exported = export(&imported.data);
            assert_eq!(exported.files, [(name.clone(), text.clone())], "{name}");
            let reread = parse_cache(&cache_to_bytes(&imported.data)).unwrap();
            assert_eq!(export(&reread.data).files, [(name.clone(), text.clone())], "{name}");
        }
    }
}

#[test]
fn entries_per_batch_size_with_the_config_as_tactic() {
    let text = std::fs::read(dir("two_gpus").join(H200)).unwrap();
    let imported = import_file(H200, &text).unwrap();
    let data = &imported.data;
    assert_eq!(data.len(), 18);
    let key = EntryKey {
        op: OP.into(),
        runner: RUNNER.into(),
        fingerprint: "device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128]".into(),
        bucket: ranktune_cache::sizes_bucket(&[vec![256], vec![128, 384]]),
    };
    let entry = data.get(Section::Rank(0), &key).unwrap();
    assert_eq!(
        entry.tactic,
        serde_json::json!({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128,
            "GROUP_SIZE_M": 32, "num_warps": 4, "num_stages": 4})
    );
    assert_eq!(entry.checksum, CHECKSUM);
    let identity = &data.metadata.environments[&entry.env];
    assert_eq!(identity.device_name, "NVIDIA_H200");
}

/// A folder: every config file, each device's entries apart; export writes
/// them all back under their names.
#[test]
fn a_folder_imports_and_exports_whole() {
    let source = read_source(&dir("two_gpus"), None).unwrap();
    assert_eq!(source.format.map(|f| f.name()), Some("vllm-moe"));
    assert_eq!(source.data.len(), 36);
    assert!(source.warnings.is_empty(), "{:?}", source.warnings);
    assert_eq!(export(&source.data).files, files("two_gpus"));
    // Auto detection by file name, and a file read as another format.
    let one = read_source(&dir("two_gpus").join(H200), None).unwrap();
    assert_eq!(one.format.map(|f| f.name()), Some("vllm-moe"));
    let e = read_source(&dir("two_gpus"), ranktune_formats::by_name("trtllm")).unwrap_err();
    assert!(matches!(e, SourceError::Folder { .. }), "{e}");
}

/// Damaged input: the file that is not JSON and the one that is not a
/// config are named and skipped, members that are not configs are named
/// and skipped — and kept, so the export still gives the file back.
#[test]
fn damaged_files_and_members_are_named_and_nothing_is_lost() {
    let source = read_source(&dir("damaged"), None).unwrap();
    assert_eq!(source.data.len(), 2);
    assert_eq!(source.skipped, 3);
    let w = source.warnings.join("\n");
    assert!(w.contains("README.md: not named like a fused-MoE config; skipped"), "{w}");
    assert!(w.contains("E=64,N=704,device_name=NVIDIA_H200.json: not valid JSON"), "{w}");
    assert!(w.contains("member \"2\" is not a batch size with a config object"), "{w}");
    assert!(w.contains("member \"four\""), "{w}");
    let exported = export(&source.data);
    let name = "E=64,N=1408,device_name=NVIDIA_H200.json";
    let original = std::fs::read_to_string(dir("damaged").join(name)).unwrap();
    assert_eq!(exported.files, [(name.to_string(), original)]);
    // An empty folder is an error naming it.
    let empty = tempfile::tempdir().unwrap();
    let e = read_source(empty.path(), None).unwrap_err();
    assert!(e.to_string().contains("holds no fused-MoE config files"), "{e}");
}

/// Two GPUs' files compare batch size by batch size.
#[test]
fn two_gpus_differ_per_batch_size() {
    let [(n1, t1), (n2, t2)] = <[_; 2]>::try_from(files("two_gpus")).unwrap();
    let h100 = import_file(&n1, t1.as_bytes()).unwrap().data;
    let h200 = import_file(&n2, t2.as_bytes()).unwrap().data;
    let (a, b, da, db) = align_devices(&h100, &h200).unwrap();
    assert_eq!((da.as_str(), db.as_str()), ("NVIDIA_H100_80GB_HBM3", "NVIDIA_H200"));
    let d = diff(&a, &b, DiffOptions::default());
    let changed: Vec<u64> = d
        .changed
        .iter()
        .filter(|c| c.kind == ChangeKind::Choice)
        .filter_map(|c| c.key.bucket[0][0].as_u64())
        .collect();
    assert_eq!(changed, [8, 256, 4096]);
    assert!(d.added.is_empty() && d.removed.is_empty());
    assert_eq!(d.unchanged, 15, "{:?}", d.changed.iter().map(|c| &c.kind).collect::<Vec<_>>());
    // The same device on both sides is no case for aligning.
    assert!(align_devices(&h200, &h200).is_none());
}

/// Entries added to an imported file's family (not in the file) follow in
/// numeric order, keys in vLLM's order; a cache with no origin writes
/// vLLM's layout.
#[test]
fn new_entries_and_fresh_files() {
    let mut data =
        import_file(H200, &std::fs::read(dir("two_gpus").join(H200)).unwrap()).unwrap().data;
    let mut key = data.iter().next().unwrap().1.clone();
    let entry = data.iter().next().unwrap().2.clone();
    key.bucket[0][0] = ranktune_cache::Dim::size(8192);
    data.insert(Section::Rank(0), key.clone(), entry.clone());
    let text = &export(&data).files[0].1;
    assert!(text.ends_with("    \"8192\": {\n        \"BLOCK_SIZE_M\": 16,\n        \"BLOCK_SIZE_N\": 64,\n        \"BLOCK_SIZE_K\": 128,\n        \"GROUP_SIZE_M\": 1,\n        \"num_warps\": 4,\n        \"num_stages\": 5\n    }\n}"), "{text}");

    let mut fresh = ranktune_cache::CacheData::default();
    key.fingerprint = "device_name=NVIDIA_B200".into();
    fresh.insert(Section::Rank(0), key, entry);
    let out = export(&fresh);
    assert_eq!(out.files[0].0, "E=128,N=384,device_name=NVIDIA_B200.json");
    assert!(out.files[0].1.starts_with("{\n    \"8192\": {\n        \"BLOCK_SIZE_M\": 16,"));
    assert!(FileName::parse(&out.files[0].0).is_some());
}
