//! End-to-end tests of `ranktune cache import|export|merge|diff`, running the
//! real binary, including many concurrent imports into one cache.

use ranktune_cache::{CacheData, EntryKey, FileStore, Section, Store};
use ranktune_formats::trtllm::{format_key, import_bytes};
use ranktune_testkit::{Cli, Output};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../formats/tests/fixtures/trtllm").join(name)
}

fn ranktune(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Cli::new(env!("CARGO_BIN_EXE_ranktune")).args(args).env_remove(["RANKTUNE_LOG"]).run()
}

fn load(path: &Path) -> CacheData {
    let loaded = FileStore::new(path).load().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    loaded.data
}

/// Only the entries (metadata differs by design: the store records its own).
fn entries(d: &CacheData) -> Vec<(Section, EntryKey, ranktune_cache::Entry)> {
    d.iter().map(|(s, k, e)| (s, k.clone(), e.clone())).collect()
}

#[test]
fn import_then_export_reproduces_the_reference_file() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let out = ranktune(&[&"cache", &"import", &cache, &fixture("multi_rank.json")]);
    let (stdout, stderr) = (out.stdout_text(), out.stderr_text());
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("read 51 entries"), "{stdout}");
    assert!(stdout.contains("imported 51 entries"), "{stdout}");
    let original = import_bytes(&std::fs::read(fixture("multi_rank.json")).unwrap()).unwrap().data;
    assert_eq!(entries(&load(&cache)), entries(&original));

    let exported = dir.path().join("out.json");
    let out = ranktune(&[&"cache", &"export", &cache, &"-o", &exported, &"--format", &"trtllm"]);
    assert!(out.status.success(), "{out}");
    let again = import_bytes(&std::fs::read(&exported).unwrap()).unwrap();
    assert!(again.warnings.is_empty());
    assert_eq!(entries(&again.data), entries(&original));
    // Keys are byte-identical to the reference's.
    let a: Value =
        serde_json::from_slice(&std::fs::read(fixture("multi_rank.json")).unwrap()).unwrap();
    let b: Value = serde_json::from_slice(&std::fs::read(&exported).unwrap()).unwrap();
    for section in ["shared", "rank_0", "rank_3"] {
        let ka: Vec<_> = a[section].as_object().unwrap().keys().collect();
        let kb: Vec<_> = b[section].as_object().unwrap().keys().collect();
        assert_eq!(ka, kb);
    }
    assert_eq!(a["metadata"]["device_capability"], b["metadata"]["device_capability"]);

    // An existing OUT is only replaced with --force.
    let out = ranktune(&[&"cache", &"export", &cache, &"-o", &exported]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr_text().contains("--force"));
    let out = ranktune(&[&"cache", &"export", &cache, &"-o", &exported, &"--force"]);
    assert!(out.status.success(), "{out}");
}

/// Through the real binary and cache file: `cache import` then `cache
/// export` gives the reference file back byte for byte (every `min_time`,
/// the fractional `creation_timestamp`, order, indentation).
#[test]
fn import_then_export_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let exported = dir.path().join("out.json");
    let original = std::fs::read(fixture("timings_238.json")).unwrap();
    let out = ranktune(&[&"cache", &"import", &cache, &fixture("timings_238.json")]);
    assert!(out.status.success(), "{out}");
    let out = ranktune(&[&"cache", &"export", &cache, &"-o", &exported]);
    assert!(out.status.success(), "{out}");
    assert_eq!(
        String::from_utf8(std::fs::read(&exported).unwrap()).unwrap(),
        String::from_utf8(original).unwrap()
    );
}

#[test]
fn bad_entries_warn_by_name_and_not_json_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let out = ranktune(&[&"cache", &"import", &cache, &fixture("bad_tactic.json")]);
    let (stdout, stderr) = (out.stdout_text(), out.stderr_text());
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("4 bad entries skipped"), "{stdout}");
    assert!(stderr.contains("<Tactic object at 0x7f3a>"), "{stderr}");
    assert!(stderr.contains("((3, 4096), (4096, 4096))"), "{stderr}");
    assert_eq!(load(&cache).len(), 12);

    let before = std::fs::read(&cache).unwrap();
    for bad in ["truncated.json", "make_fixtures.py"] {
        let out =
            ranktune(&[&"cache", &"import", &cache, &fixture("old_no_shared.json"), &fixture(bad)]);
        let stderr = out.stderr_text();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(bad) && stderr.contains("not valid JSON"), "{stderr}");
        assert_eq!(std::fs::read(&cache).unwrap(), before, "nothing written after a bad source");
    }
    // A source that is JSON but of no known shape asks for --format.
    let odd = dir.path().join("odd.json");
    std::fs::write(&odd, r#"{"hello": 1}"#).unwrap();
    let out = ranktune(&[&"cache", &"import", &cache, &odd]);
    assert!(out.stderr_text().contains("--format"), "{out}");
    assert_eq!(std::fs::read(&cache).unwrap(), before);
}

#[test]
fn rank_placement() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let src = fixture("old_no_shared.json");
    let out = ranktune(&[&"cache", &"import", &cache, &src, &"--rank", &"5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr_text().contains("rank_0, rank_1"), "{out}");
    assert!(!cache.exists());
    let out = ranktune(&[&"cache", &"import", &cache, &src, &"--rank", &"5", &"--from-rank", &"1"]);
    assert!(out.status.success(), "{out}");
    let data = load(&cache);
    assert_eq!(data.sections.keys().copied().collect::<Vec<_>>(), [Section::Rank(5)]);
    assert_eq!(data.len(), 12);
}

/// A single-rank reference file with `n` entries, all for `op`.
fn single_rank_file(path: &Path, op: &str, n: u64, tactic: &str, created: f64) {
    let mut section = Map::new();
    for m in 0..n {
        let key = EntryKey {
            op: op.into(),
            runner: "Runner".into(),
            fingerprint: format!("('{op}', 1e-06, True)"),
            bucket: ranktune_cache::sizes_bucket(&[vec![m + 1, 4096], vec![4096]]),
        };
        section.insert(
            format_key(&key),
            json!({"runner_id": 0, "tactic": tactic, "min_time": 0.01 + m as f64 * 1e-4}),
        );
    }
    let doc = json!({
        "metadata": {"lib_version": "1.2.0", "creation_timestamp": created, "device_name": "NVIDIA H200", "device_capability": [9, 0]},
        "rank_0": section,
    });
    std::fs::write(path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
}

#[test]
fn concurrent_imports_lose_nothing() {
    const PROCS: u32 = 16;
    const ENTRIES: u64 = 40;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let mut children = Vec::new();
    for r in 0..PROCS {
        let src = dir.path().join(format!("src{r}.json"));
        single_rank_file(&src, &format!("op{r}"), ENTRIES, &format!("({r}, 'x')"), 1.7e9);
        let child = Cli::new(env!("CARGO_BIN_EXE_ranktune"))
            .args(["cache", "import"])
            .arg(&cache)
            .arg(&src)
            .args(["--rank", &r.to_string()])
            .spawn();
        children.push(child);
    }
    for child in children {
        let out = child.wait();
        assert!(out.status.success(), "{out}");
    }
    let data = load(&cache);
    assert_eq!(data.len(), (PROCS as usize) * ENTRIES as usize);
    for r in 0..PROCS {
        let section = &data.sections[&Section::Rank(r)];
        assert_eq!(section.len(), ENTRIES as usize, "rank_{r}");
        assert!(section
            .iter()
            .all(|(k, e)| k.op == format!("op{r}") && e.tactic == json!([r, "x"])));
    }
}

#[test]
fn merge_reports_conflicts_and_diff_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let (old_src, new_src) = (dir.path().join("old.json"), dir.path().join("new.json"));
    single_rank_file(&old_src, "gemm", 3, "1", 1.6e9);
    single_rank_file(&new_src, "gemm", 2, "2", 1.7e9);
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    assert!(ranktune(&[&"cache", &"import", &a, &old_src]).status.success());
    assert!(ranktune(&[&"cache", &"import", &b, &new_src]).status.success());

    // diff: two different choices, one removed; exit 1.
    let out = ranktune(&[&"cache", &"diff", &a, &b]);
    let (stdout, stderr) = (out.stdout_text(), out.stderr_text());
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("0 added, 1 removed, 2 different choice, 0 time change"), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("choice")).count(), 2, "{stdout}");
    let out = ranktune(&[&"cache", &"diff", &a, &b, &"--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["changed"].as_array().unwrap().len(), 2);
    assert_eq!(v["changed"][0]["kind"], "choice");
    // A trtllm file diffs against a ranktune cache with the same content.
    let out = ranktune(&[&"cache", &"diff", &old_src, &a]);
    assert_eq!(out.status.code(), Some(0), "{out}");

    // merge: the newer entries win, each conflict is reported.
    let merged = dir.path().join("merged.json");
    let out = ranktune(&[&"cache", &"merge", &"-o", &merged, &a, &b]);
    let (stdout, stderr) = (out.stdout_text(), out.stderr_text());
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("conflict ")).count(), 2, "{stdout}");
    assert!(stdout.contains("[newer]"), "{stdout}");
    assert!(stdout.contains("3 entries, 2 keys in several inputs, 2 conflicts"), "{stdout}");
    let data = load(&merged);
    let tactics: Vec<Value> = data.iter().map(|(_, _, e)| e.tactic.clone()).collect();
    assert_eq!(tactics, [json!(2), json!(2), json!(1)]);

    // merge --json, and into an existing OUT (which takes part as the first input).
    let out = ranktune(&[&"cache", &"merge", &"-o", &merged, &old_src, &"--json"]);
    assert!(out.status.success(), "{out}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["conflicts"].as_array().unwrap().len(), 2);
    assert_eq!(v["conflicts"][0]["won_by"], "newer");
    let data = load(&merged);
    assert_eq!(data.iter().map(|(_, _, e)| e.tactic.clone()).collect::<Vec<_>>(), tactics);
}

/// An expert-parallel cache: every rank chose the same MoE tactic, but the
/// MoE runner's id holds the rank, so each rank has its own key. That is not
/// a disagreement (the ranks run the same code); the one GEMM bucket where
/// rank 3 chose another tile is.
#[test]
fn check_on_an_expert_parallel_import_names_only_real_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let out = ranktune(&[&"cache", &"import", &cache, &fixture("ep_moe.json")]);
    assert!(out.status.success(), "{out}");
    // The per-rank runner ids survived the import: one key per rank.
    let data = load(&cache);
    let moe_ids: std::collections::BTreeSet<_> = data
        .iter()
        .filter(|(_, k, _)| k.op == "trtllm::fused_moe")
        .map(|(_, k, _)| k.fingerprint.clone())
        .collect();
    assert_eq!(moe_ids.len(), 4, "{moe_ids:?}");

    let out = ranktune(&[&"cache", &"check", &cache]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    let text = out.stdout_text();
    let disagree: Vec<&str> = text.lines().filter(|l| l.starts_with("ranks disagree")).collect();
    assert_eq!(disagree.len(), 1, "{text}");
    assert!(
        disagree[0]
            .starts_with("ranks disagree on trtllm::fp8_block_scaling_gemm 2048x4096,4096x4096: "),
        "{text}"
    );
    assert!(disagree[0].contains("rank_3 chose FP8BlockScalingGemmRunner tactic"), "{text}");
    // Everything else is the entries measured on the H200, stale here.
    assert!(
        text.lines()
            .all(|l| l.starts_with("ranks disagree") || l.starts_with("measured elsewhere: ")),
        "{text}"
    );
}
