//! Importing and exporting Triton autotune caches (`<hash>/<kernel>.autotune.json`),
//! on fixtures written the way Triton's autotuner writes them
//! (`tests/fixtures/triton/make_fixtures.py`).

use ranktune_cache::{cache_to_bytes, parse_cache, CacheData, EntryKey, Section};
use ranktune_formats::triton::{export, import_file, CHECKSUM, RUNNER};
use ranktune_formats::trtllm::repr_float;
use ranktune_formats::{read_source, SourceError};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/triton").join(name)
}

/// Every `*.autotune.json` under `dir`: relative path -> bytes.
fn autotune_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for sub in std::fs::read_dir(dir).unwrap() {
        let sub = sub.unwrap().path();
        for f in std::fs::read_dir(&sub).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_str().unwrap().to_string();
            if name.ends_with(".autotune.json") {
                let rel = format!("{}/{name}", sub.file_name().unwrap().to_str().unwrap());
                out.insert(rel, std::fs::read(&f).unwrap());
            }
        }
    }
    out
}

fn exported_files(data: &CacheData) -> BTreeMap<String, Vec<u8>> {
    let e = export(data);
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    e.files.into_iter().map(|(p, t)| (p, t.into_bytes())).collect()
}

fn matmul_key(m: u64, n: u64, k: u64) -> EntryKey {
    EntryKey {
        op: "matmul_kernel".into(),
        runner: RUNNER.into(),
        fingerprint: "#,#,#,torch.float16,torch.float16,torch.float16".into(),
        bucket: ranktune_cache::sizes_bucket(&[vec![m, n, k]]),
    }
}

/// A Triton cache folder imported and exported (also through a ranktune
/// cache file) gives back every autotune file, byte for byte, at its path.
#[test]
fn export_of_import_is_the_same_files() {
    for gpu in ["h100", "a100"] {
        let source = read_source(&fixture(gpu), None).unwrap();
        assert_eq!(source.format.map(|f| f.name()), Some("triton"));
        assert!(source.warnings.is_empty(), "{:?}", source.warnings);
        assert_eq!(source.data.len(), 4, "{gpu}");
        let original = autotune_files(&fixture(gpu));
        assert_eq!(original.len(), 4);
        assert_eq!(exported_files(&source.data), original, "{gpu}");
        let reread = parse_cache(&cache_to_bytes(&source.data)).unwrap();
        assert_eq!(exported_files(&reread.data), original, "{gpu} through a cache file");
        let again = parse_cache(&cache_to_bytes(&reread.data)).unwrap();
        assert_eq!(exported_files(&again.data), original, "{gpu} after two trips");
    }
}

/// One entry per file; every config a candidate with its timings; the
/// choice the config Triton takes (lowest timing list), checked against the
/// file read independently.
#[test]
fn entries_candidates_and_choice() {
    let source = read_source(&fixture("h100"), None).unwrap();
    let data = &source.data;
    let path = fixture("h100")
        .join("OXDRSL3BXYXLIJZEI6J4LAFLLRLUA6YTC5NEOEGNDX2QSWRF26HA/matmul_kernel.autotune.json");
    let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        doc["key"],
        serde_json::json!([
            "1024",
            "1024",
            "512",
            "torch.float16",
            "torch.float16",
            "torch.float16"
        ])
    );
    let pairs = doc["configs_timings"].as_array().unwrap();
    assert_eq!(pairs.len(), 8);
    let entry = data.get(Section::Rank(0), &matmul_key(1024, 1024, 512)).unwrap();
    assert_eq!(entry.checksum, CHECKSUM);
    assert_eq!(entry.candidates.len(), 8);
    let median = |p: &Value| p[1][0].as_f64().unwrap();
    let best = pairs.iter().min_by(|a, b| median(a).partial_cmp(&median(b)).unwrap()).unwrap();
    assert_eq!(entry.tactic, best[0]);
    assert!((entry.time_us - median(best) * 1000.0).abs() < 1e-9, "{}", entry.time_us);
    for (c, p) in entry.candidates.iter().zip(pairs) {
        assert_eq!(c.tactic, p[0]);
        let s = c.stats.as_ref().unwrap();
        let t: Vec<f64> = p[1].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert!((s.median_us - t[0] * 1000.0).abs() < 1e-9);
        assert!((s.min_us - t[1] * 1000.0).abs() < 1e-9);
        assert!((s.p90_us - t[2] * 1000.0).abs() < 1e-9);
    }
    // The tactic keeps the config's keys, kwargs included.
    assert_eq!(entry.tactic["kwargs"]["GROUP_SIZE_M"], 8);
    assert!(entry.tactic.get("maxnreg").is_some());

    // One float per config (a custom do_bench); non-numeric key values
    // stay in the fingerprint.
    let key = EntryKey {
        op: "_layer_norm_fwd_fused".into(),
        runner: RUNNER.into(),
        fingerprint: "#,torch.float16,torch.float16,torch.float16,torch.float32,torch.float32"
            .into(),
        bucket: ranktune_cache::sizes_bucket(&[vec![8192]]),
    };
    let ln = data.get(Section::Rank(0), &key).unwrap();
    assert_eq!(ln.candidates.len(), 4);
    let s = ln.candidates[0].stats.as_ref().unwrap();
    assert_eq!((s.min_us, s.p90_us, s.spread), (s.median_us, s.median_us, 0.0));
}

/// A config that ran out of resources (`[Infinity, Infinity, Infinity]`)
/// is a failed candidate, never the choice.
#[test]
fn failed_configs_are_candidates_with_an_error() {
    let source = read_source(&fixture("a100"), None).unwrap();
    let entry = source.data.get(Section::Rank(0), &matmul_key(4096, 4096, 4096)).unwrap();
    let failed = &entry.candidates[0];
    assert!(failed.stats.is_none());
    assert!(failed.error.as_deref().unwrap().contains("Infinity"), "{failed:?}");
    assert_ne!(entry.tactic, failed.tactic);
    assert!(entry.time_us.is_finite() && entry.time_us > 0.0);
}

/// Damaged files: one that is not JSON and one with no config that ran
/// are named and skipped; bad configs and members of another file are
/// named, skipped, and written back on export.
#[test]
fn damaged_files_and_configs_are_named_and_kept() {
    let source = read_source(&fixture("damaged"), None).unwrap();
    assert_eq!(source.format.map(|f| f.name()), Some("triton"));
    assert_eq!(source.data.len(), 1);
    let w = source.warnings.join("\n");
    assert!(w.contains("truncated.autotune.json: not valid JSON"), "{w}");
    assert!(w.contains("all_failed.autotune.json: no config has a time"), "{w}");
    assert!(w.contains("configs_timings[1]: 1 items, not a [config, timing] pair"), "{w}");
    assert!(w.contains("configs_timings[3]: the timing is not a number"), "{w}");
    assert!(w.contains("member \"version\" is not Triton's"), "{w}");
    assert_eq!(source.skipped, 5);
    let (_, key, entry) = source.data.iter().next().unwrap();
    assert_eq!(key.bucket, vec![vec![2048]]);
    assert_eq!(entry.candidates.len(), 2);
    assert_eq!(entry.time_us, 375.0);
    let files = exported_files(&source.data);
    let rel = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB/partly_bad.autotune.json";
    assert_eq!(files[rel], std::fs::read(fixture("damaged").join(rel)).unwrap());
    assert_eq!(files.len(), 1);

    assert!(import_file("x.json", b"{}").is_err());
    assert!(import_file("x.autotune.json", b"[1]").is_err());
    assert!(import_file("x.autotune.json", b"{\"key\": [], \"configs_timings\": []}").is_err());
    assert!(import_file("x.autotune.json", b"{\"key\": [1], \"configs_timings\": []}").is_err());
}

/// Detection: by name, by content under another name, and a folder with
/// no autotune file read as triton is an error naming it.
#[test]
fn detection_and_single_files() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("h100").join(
        "PW5L6NSEXNIBDB54MGEEXQE4W37B3KGSQLYVPW3EXSFLUVBEM3TQ/_layer_norm_fwd_fused.autotune.json",
    );
    let text = std::fs::read(&src).unwrap();
    let by_name = read_source(&src, None).unwrap();
    assert_eq!((by_name.format.map(|f| f.name()), by_name.data.len()), (Some("triton"), 1));
    // Its hash folder is recorded: the export puts it back there.
    let files = exported_files(&by_name.data);
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["PW5L6NSEXNIBDB54MGEEXQE4W37B3KGSQLYVPW3EXSFLUVBEM3TQ/_layer_norm_fwd_fused.autotune.json"]
    );
    // Under another name, the content tells; the kernel name comes from
    // the file name, which is not a kernel's: an error naming the file.
    let other = dir.path().join("copy.json");
    std::fs::write(&other, &text).unwrap();
    let e = read_source(&other, None).unwrap_err();
    assert!(matches!(e, SourceError::Import { format, .. } if format.name() == "triton"), "{e:?}");
    let e = ranktune_core::error_chain::Chain(&e).to_string();
    assert!(e.contains("is not <kernel>.autotune.json"), "{e}");

    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("notes.txt"), "x").unwrap();
    let e = read_source(empty.path(), ranktune_formats::by_name("triton")).unwrap_err();
    assert!(matches!(e, SourceError::NoFiles { .. }), "{e:?}");
}

/// An entry that no longer says what its file said (another choice, other
/// timings) is written from the cache, in Triton's layout, into its
/// folder; re-importing that file gives the entry back.
#[test]
fn changed_entries_are_written_from_the_cache() {
    let mut data = read_source(&fixture("h100"), None).unwrap().data;
    let key = matmul_key(4096, 4096, 4096);
    let mut entry = data.get(Section::Rank(0), &key).unwrap().clone();
    entry.candidates.swap(0, 1);
    data.insert(Section::Rank(0), key.clone(), entry.clone());
    let e = export(&data);
    let (path, text) = e.files.iter().find(|(p, _)| p.starts_with("JCEJSKWO")).unwrap();
    assert_eq!(
        path,
        "JCEJSKWOESZV276W4GTSKJC65TPHVN2TWRFOOT3RBRTP6HYYAOFQ/matmul_kernel.autotune.json"
    );
    // The timings as the file wrote them, in the new order.
    let original = std::fs::read_to_string(fixture("h100").join(path)).unwrap();
    let doc: Value = serde_json::from_str(&original).unwrap();
    let first = serde_json::to_string(&doc["configs_timings"][1]).unwrap();
    let timing = first.rsplit_once(",[").unwrap().1.trim_end_matches("]]");
    assert!(original.contains(&timing.replace(',', ", ")), "{timing}");
    assert!(text.contains(&format!("[{}]]", timing.replace(',', ", "))), "{text}");
    assert!(
        text.starts_with("{\"key\": [\"4096\", \"4096\", \"4096\", \"torch.float16\""),
        "{text}"
    );
    assert!(text.contains("{\"kwargs\": {"), "{text}");
    let again = import_file(path, text.as_bytes()).unwrap();
    assert_eq!(again.data.get(Section::Rank(0), &key), Some(&entry));

    // Without any record of the file: a folder named by the key's digest.
    let mut bare = CacheData::default();
    bare.insert(Section::Rank(0), key.clone(), entry.clone());
    let e = export(&bare);
    assert_eq!(e.files.len(), 1);
    assert!(e.files[0].0.starts_with("ranktune-"), "{}", e.files[0].0);
    assert!(e.files[0].0.ends_with("/matmul_kernel.autotune.json"));
    let again = import_file(&e.files[0].0, e.files[0].1.as_bytes()).unwrap();
    assert_eq!(again.data.get(Section::Rank(0), &key), Some(&entry));

    // Entries of other formats are left out by name.
    let mut mixed = bare.clone();
    let other = EntryKey { runner: "naive".into(), ..key };
    mixed.insert(Section::Rank(0), other, entry);
    let e = export(&mixed);
    assert_eq!((e.written, e.skipped), (1, 1));
    assert!(e.warnings[0].contains("not a Triton autotune entry"), "{:?}", e.warnings);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]
    /// Any finite non-negative doubles as timings, written as Python writes
    /// them, survive import → cache file → export byte for byte; and an
    /// entry written from the cache reads back with the same timings.
    #[test]
    fn any_timing_survives(
        ms in proptest::collection::vec(0.0f64..1e6, 3),
        bits in proptest::collection::vec(proptest::num::u64::ANY, 3),
    ) {
        let t: Vec<f64> = ms
            .iter()
            .zip(&bits)
            .map(|(m, b)| {
                let x = f64::from_bits(b >> 1);
                if b & 1 == 1 && x < 1e300 { x } else { *m }
            })
            .collect();
        let timing = t.iter().map(|x| repr_float(*x)).collect::<Vec<_>>().join(", ");
        let text = format!(
            "{{\"key\": [\"64\", \"torch.float32\"], \"configs_timings\": [[{{\"kwargs\": \
             {{\"BLOCK\": 64}}, \"num_warps\": 4, \"num_ctas\": 1, \"num_stages\": 3, \"maxnreg\": \
             null, \"pre_hook\": null, \"ir_override\": null}}, [{timing}]]]}}"
        );
        let imported = import_file("k.autotune.json", text.as_bytes()).unwrap();
        proptest::prop_assert_eq!(imported.skipped, 0);
        let reread = parse_cache(&cache_to_bytes(&imported.data)).unwrap();
        let e = export(&reread.data);
        proptest::prop_assert_eq!(e.files.len(), 1, "{:?} {:?}", e.warnings, reread.warnings);
        proptest::prop_assert_eq!(&e.files[0].1, &text);
        // Written from the cache (the entry changed since): the timing as
        // the file wrote it.
        let mut changed = reread.data.clone();
        let (s, k, entry) = reread.data.iter().next().unwrap();
        let mut entry = entry.clone();
        entry.tactic = serde_json::json!({"kwargs": {"BLOCK": 32}});
        changed.insert(s, k.clone(), entry.clone());
        let e = export(&changed);
        proptest::prop_assert!(e.files[0].1.ends_with(&format!("[{timing}]]]}}")), "{}", e.files[0].1);
        // With no record of the file at all, the timing goes through
        // microseconds and comes back as the same microseconds, or one ulp
        // off where no millisecond double reads back exactly.
        let mut bare = CacheData::default();
        bare.insert(s, k.clone(), entry.clone());
        let e = export(&bare);
        let again = import_file(&e.files[0].0, e.files[0].1.as_bytes()).unwrap();
        let back = again.data.iter().next().unwrap().2.candidates[0].stats.clone().unwrap();
        let want = entry.candidates[0].stats.clone().unwrap();
        for (b, w) in [(back.min_us, want.min_us), (back.median_us, want.median_us), (back.p90_us, want.p90_us)] {
            proptest::prop_assert!(b.to_bits().abs_diff(w.to_bits()) <= 1, "{} vs {}", b, w);
        }
    }
}

/// A recorded path that is not a plain relative one (`a//`, `..`) is not
/// written to; the file still comes back byte for byte, in the digest
/// folder (found by fuzzing: it used to be rewritten from the cache, its
/// timings one ulp off).
#[test]
fn odd_recorded_paths_keep_the_bytes() {
    let text =
        std::fs::read(fixture("a100").join(
            "6YYSQTPE644D5KWOGYJQVRMFC3YF7QBZUB5VU5MQCB5GM2PEEYIQ/matmul_kernel.autotune.json",
        ))
        .unwrap();
    for path in ["a//matmul_kernel.autotune.json", "../matmul_kernel.autotune.json"] {
        let imported = import_file(path, &text).unwrap();
        let e = export(&imported.data);
        assert_eq!(e.files.len(), 1);
        assert!(e.files[0].0.starts_with("ranktune-"), "{}", e.files[0].0);
        assert!(e.files[0].1.as_bytes() == &text[..], "{path}: {:?}", e.warnings);
    }
}

/// A config that holds a member twice is judged by the last one, the one
/// Python's `json.load` (and so Triton) reads and an export writes: here
/// `"kwargs"` is an object, then `1`, so the config is not one Triton can
/// use (found by fuzzing: it was checked by its first `kwargs` and stored
/// with its last, so an export written from the cache did not import).
#[test]
fn a_member_given_twice_counts_as_its_last() {
    let text = br#"{"key": ["8192", "torch.float16"], "configs_timings": [[{"kwargs": {"BLOCK_SIZE": 1024}, "num_warps": 4, "kwargs": 1}, 0.05858833084]]}"#;
    let err = import_file("k.autotune.json", text).unwrap_err().to_string();
    assert!(err.contains("did not parse"), "{err}");
    // The other way round it is a config, with the object as its kwargs.
    let text = br#"{"key": ["8192", "torch.float16"], "configs_timings": [[{"kwargs": 1, "num_warps": 4, "kwargs": {"BLOCK_SIZE": 1024}}, 0.05858833084]]}"#;
    let imported = import_file("k.autotune.json", text).unwrap();
    let bare: CacheData = {
        let mut d = CacheData::default();
        for (s, k, e) in imported.data.iter() {
            d.insert(s, k.clone(), e.clone());
        }
        d
    };
    for (p, t) in export(&bare).files {
        assert!(import_file(&p, t.as_bytes()).is_ok(), "{p}\n{t}");
    }
}

/// A config holding something JSON cannot carry (Python's `NaN` in its
/// kwargs) is named and skipped, never stored as `null` (found by fuzzing:
/// an export written from the cache then held a `null` config that did not
/// import).
#[test]
fn a_config_json_cannot_carry_is_skipped() {
    let text = br#"{"key": ["8192", "torch.float16"], "configs_timings": [[{"kwargs": {"BLOCK_SIZE": NaN}, "num_warps": 4}, 0.5], [{"kwargs": {"BLOCK_SIZE": 1024}, "num_warps": 4}, 0.75]]}"#;
    let imported = import_file("k.autotune.json", text).unwrap();
    assert!(
        imported.warnings.iter().any(|w| w.contains("JSON cannot carry")),
        "{:?}",
        imported.warnings
    );
    let (_, _, e) = imported.data.iter().next().unwrap();
    assert_eq!(e.tactic["kwargs"]["BLOCK_SIZE"], 1024, "the config that parsed is the choice");
    let mut bare = CacheData::default();
    for (s, k, e) in imported.data.iter() {
        bare.insert(s, k.clone(), e.clone());
    }
    for (p, t) in export(&bare).files {
        assert!(import_file(&p, t.as_bytes()).is_ok(), "{p}\n{t}");
        assert!(!t.contains("null, "), "no config written as null: {t}");
    }
}
