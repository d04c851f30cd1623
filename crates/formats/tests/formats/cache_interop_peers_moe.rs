//! Conformance with the fused-MoE config files vLLM's and SGLang's wheels
//! ship (`tests/fixtures/peers/vllm-<version>/`, `sglang-<version>/`, a
//! sample taken by `tools/peer-fixtures/moe_corpus.py`): every file's every
//! batch size imports, and export gives each file back byte for byte.

use ranktune_cache::{cache_to_bytes, parse_cache};
use ranktune_formats::read_source;
use ranktune_formats::vllm_moe::{export, import_file, FileName, CHECKSUM, OP, RUNNER};
use serde_json::Value;
use std::path::{Path, PathBuf};

const CORPORA: [&str; 2] = ["vllm-0.34.0", "sglang-0.5.23"];

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/peers").join(name)
}

/// Every `*.json` under `dir` (SGLang's are in `triton_<version>/`
/// folders): (folder, file name, text).
fn json_files(dir: &Path, rel: &str, out: &mut Vec<(String, String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if p.is_dir() {
            json_files(&p, &name, out);
        } else if name.ends_with(".json") {
            out.push((rel.to_string(), name, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

fn all(name: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    json_files(&corpus(name), "", &mut out);
    out
}

/// Every file imports with no warning and no skip: one entry per batch
/// size, keyed by the name's selectors exactly (`_down`,
/// `per_channel_quant=True`, `backend=…`, SGLang's `[128, 128]`, SGLang's
/// empty device name), the config
/// object as the tactic. The sample covers many devices and dtypes.
#[test]
fn moe_every_file_of_the_corpus_imports() {
    for c in CORPORA {
        let files = all(c);
        assert_eq!(files.len(), 40, "{c}");
        let mut devices = std::collections::BTreeSet::new();
        let mut dtypes = std::collections::BTreeSet::new();
        let mut odd = 0;
        for (folder, name, text) in &files {
            let parsed = FileName::parse(name).unwrap_or_else(|| panic!("{c}/{folder}/{name}"));
            assert_eq!(parsed.file_name(), *name);
            devices.insert(parsed.device.clone());
            dtypes.insert(parsed.dtype.clone());
            odd += usize::from(parsed.down || !parsed.extra.is_empty());
            let doc: Value = serde_json::from_str(text).unwrap();
            let doc = doc.as_object().unwrap();
            let imported = import_file(name, text.as_bytes()).unwrap();
            assert!(imported.warnings.is_empty(), "{name}: {:?}", imported.warnings);
            let sizes: Vec<(&String, &Value)> =
                doc.iter().filter(|(k, _)| k.as_str() != "triton_version").collect();
            assert_eq!((imported.data.len(), imported.skipped), (sizes.len(), 0), "{name}");
            for (m, config) in sizes {
                let m: u64 = m.parse().unwrap();
                let (_, key, entry) = imported
                    .data
                    .iter()
                    .find(|(_, k, _)| k.bucket[0] == [m])
                    .unwrap_or_else(|| panic!("{name}: batch size {m}"));
                assert_eq!((key.op.as_str(), key.runner.as_str()), (OP, RUNNER));
                assert_eq!(key.fingerprint, parsed.fingerprint());
                assert_eq!(key.bucket[1], [parsed.experts, parsed.n]);
                assert_eq!(entry.tactic, *config, "{name}: {m}");
                assert_eq!(entry.checksum, CHECKSUM);
            }
        }
        assert!(devices.len() >= 10, "{c}: {devices:?}");
        assert!(dtypes.len() >= 3, "{c}: {dtypes:?}");
        assert!(odd >= 2, "{c}: the sample holds _down / extra-selector names");
    }
}

/// Export gives each file back byte for byte (member order, key order,
/// `triton_version`, indentation, final newline), from the import and
/// through a ranktune cache file; and a folder of them reads whole.
#[test]
fn moe_export_reproduces_each_file() {
    for c in CORPORA {
        for (folder, name, text) in all(c) {
            let imported = import_file(&name, text.as_bytes()).unwrap();
            let e = export(&imported.data);
            assert!(e.warnings.is_empty(), "{name}: {:?}", e.warnings);
            assert_eq!(e.files, [(name.clone(), text.clone())], "{c}/{folder}/{name}");
            let reread = parse_cache(&cache_to_bytes(&imported.data)).unwrap();
            assert_eq!(export(&reread.data).files, [(name.clone(), text.clone())], "{name}");
        }
    }
    // vLLM ships a hand-edited file (its last brace indented 2, not 4): its
    // text comes back while its configs are unchanged; after an edit the
    // file is written afresh, laid out the writer's way.
    let odd = "E=1,N=1792,device_name=NVIDIA_H100_80GB_HBM3,dtype=int8_w8a16.json";
    let text = std::fs::read_to_string(corpus(CORPORA[0]).join(odd)).unwrap();
    assert!(text.ends_with("    }\n  }"));
    let mut data = import_file(odd, text.as_bytes()).unwrap().data;
    let (s, k, e) = data.iter().next().map(|(s, k, e)| (s, k.clone(), e.clone())).unwrap();
    let mut tactic = e.tactic.clone();
    tactic["num_warps"] = 8.into();
    data.insert(s, k, ranktune_cache::Entry { tactic, ..e });
    let written = &export(&data).files[0].1;
    assert!(written.ends_with("    }\n}"), "{written}");
    let mut expected: Value = serde_json::from_str(&text).unwrap();
    expected["1"]["num_warps"] = 8.into();
    assert_eq!(serde_json::from_str::<Value>(written).unwrap(), expected);

    let source = read_source(&corpus(CORPORA[0]), None).unwrap();
    assert_eq!(source.warnings.len(), 1, "{:?}", source.warnings);
    assert!(source.warnings[0].ends_with("README.md: not named like a fused-MoE config; skipped"));
    let files = all(CORPORA[0]);
    let written = export(&source.data).files;
    assert_eq!(written.len(), files.len());
    for ((_, name, text), (wname, wtext)) in files.iter().zip(&written) {
        assert_eq!((name, text), (wname, wtext));
    }
}

/// A bad variant of a real file: one batch size's config replaced by a
/// number is skipped alone, named, and kept for the export.
#[test]
fn moe_bad_variant_skips_only_the_bad_entry() {
    let (_, name, text) = all(CORPORA[0]).into_iter().next().unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let first = doc.as_object().unwrap().keys().find(|k| *k != "triton_version").unwrap().clone();
    let mut obj = doc.as_object().unwrap().clone();
    obj.insert(first.clone(), Value::from(7));
    let bad = serde_json::to_string_pretty(&Value::Object(obj.clone())).unwrap();
    let imported = import_file(&name, bad.as_bytes()).unwrap();
    assert_eq!(imported.skipped, 1);
    let configs = obj.keys().filter(|k| *k != "triton_version").count();
    assert_eq!(imported.data.len(), configs - 1);
    assert!(imported.warnings.join("\n").contains(&format!("member \"{first}\"")));
    let back: Value = serde_json::from_str(&export(&imported.data).files[0].1).unwrap();
    assert_eq!(back, Value::Object(obj));
}
