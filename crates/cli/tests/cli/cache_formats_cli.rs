//! End-to-end tests of the cache commands on other tuners' formats,
//! running the real binary: vLLM/SGLang fused-MoE configs (import a file or
//! a folder, export back to the same files, diff two GPUs), FlashInfer's
//! cache, Triton's autotune cache (a cache folder: import, show, export to
//! the same files, diff two GPUs), and `--format auto` saying what it chose
//! or what it tried.

use ranktune_testkit::{Cli, Output};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn moe(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../formats/tests/fixtures/vllm_moe").join(name)
}

fn ranktune(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Cli::new(env!("CARGO_BIN_EXE_ranktune")).args(args).env_remove(["RANKTUNE_LOG"]).run()
}

const H100: &str =
    "E=128,N=384,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128,128].json";
const H200: &str = "E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json";

fn read_dir(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| (p.file_name().unwrap().to_str().unwrap().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    out.sort();
    out
}

/// A folder of configs: import (format detected and named), show --json
/// lists one entry per batch size, export writes the very same files.
#[test]
fn moe_folder_import_show_export_gives_the_files_back() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache.json");
    let out = ranktune(&[&"cache", &"import", &cache, &moe("two_gpus"), &moe("rocm")]);
    assert!(out.status.success(), "{out}");
    let stdout = out.stdout_text();
    assert!(
        stdout.contains(&format!("read 36 entries from {} (vllm-moe)", moe("two_gpus").display())),
        "{stdout}"
    );
    assert!(stdout.contains("read 4 entries"), "{stdout}");

    let out = ranktune(&[&"cache", &"show", &cache, &"--json"]);
    assert!(out.status.success(), "{out}");
    let listed: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    let entries = listed.as_array().or_else(|| listed["entries"].as_array()).expect("a list");
    assert_eq!(entries.len(), 40);
    let text = out.stdout_text();
    assert!(
        text.contains("device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128]"),
        "{text}"
    );
    assert!(text.contains("\"BLOCK_SIZE_M\""), "{text}");

    let dir = tmp.path().join("configs");
    let out = ranktune(&[&"cache", &"export", &cache, &"-o", &dir, &"--format", &"vllm-moe"]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout_text().contains("exported 40 entries to 3 files"), "{out}");
    let mut want = read_dir(&moe("two_gpus"));
    want.extend(read_dir(&moe("rocm")));
    want.sort();
    assert_eq!(read_dir(&dir), want);
    // Again: the files exist, so only with --force.
    let out = ranktune(&[&"cache", &"export", &cache, &"-o", &dir, &"--format", &"vllm-moe"]);
    assert_eq!(out.status.code(), Some(2), "{out}");
    assert!(out.stderr_text().contains("pass --force"), "{out}");
}

/// `cache diff` of two GPUs' files shows what changed per batch size.
#[test]
fn moe_diff_of_two_gpus_shows_batch_sizes() {
    let out =
        ranktune(&[&"cache", &"diff", &moe("two_gpus").join(H100), &moe("two_gpus").join(H200)]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    let stdout = out.stdout_text();
    assert!(
        stdout.contains("comparing the configs of NVIDIA_H100_80GB_HBM3 (old) and NVIDIA_H200 (new) by batch size"),
        "{stdout}"
    );
    let changed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("choice")).collect();
    assert_eq!(changed.len(), 3, "{stdout}");
    for (line, m) in changed.iter().zip(["8,128x384", "256,128x384", "4096,128x384"]) {
        assert!(line.contains(m), "{line}");
    }
    assert!(
        stdout.contains(
            "0 added, 0 removed, 3 different choice, 0 time change, 0 other change, 15 unchanged"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("BLOCK_SIZE_N=64 num_stages=3  BLOCK_SIZE_N=128 num_stages=5"),
        "{stdout}"
    );
}

/// `--format auto` names what it chose; a file matching nothing gets an
/// error listing every format tried; nothing is written.
#[test]
fn auto_detection_names_the_format_or_what_was_tried() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache.json");
    let odd = tmp.path().join("odd.json");
    std::fs::write(&odd, r#"{"rank_0": [], "something": 1}"#).unwrap();
    let out = ranktune(&[&"cache", &"import", &cache, &odd]);
    assert_eq!(out.status.code(), Some(2), "{out}");
    let err = out.stderr_text();
    for tried in ["triton (", "vllm-moe (", "ranktune (", "trtllm (", "flashinfer ("] {
        assert!(err.contains(tried), "{err}");
    }
    assert!(err.contains("pass --format"), "{err}");
    assert!(!cache.exists());

    let out = ranktune(&[&"cache", &"import", &cache, &moe("two_gpus").join(H200)]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout_text().contains("(vllm-moe)"), "{out}");
    // A damaged folder: bad files named, the rest imported.
    let out = ranktune(&[&"cache", &"import", &cache, &moe("damaged")]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout_text().contains("read 2 entries"), "{out}");
    assert!(out.stderr_text().contains("not valid JSON"), "{out}");
}

/// A FlashInfer cache: detected and named, exported back byte for byte.
#[test]
fn flashinfer_import_export_gives_the_file_back() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache.json");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/tests/fixtures/flashinfer/mixed_env_damaged.json");
    let out = ranktune(&[&"cache", &"import", &cache, &src]);
    assert!(out.status.success(), "{out}");
    // Its opaque-profile entry imports (FlashInfer's keys are opaque text);
    // the value that is no [runner, tactic] is skipped.
    assert!(out.stdout_text().contains("read 7 entries"), "{out}");
    assert!(out.stdout_text().contains("(flashinfer, 1 bad entries skipped)"), "{out}");
    assert!(out.stderr_text().contains("last updated by another environment"), "{out}");
    let back = tmp.path().join("back.json");
    let out = ranktune(&[&"cache", &"export", &cache, &"-o", &back, &"--format", &"flashinfer"]);
    assert!(out.status.success(), "{out}");
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&src).unwrap());
}

fn triton(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../formats/tests/fixtures/triton").join(name)
}

/// Every file under `dir` whose name ends with `suffix`: relative path ->
/// bytes.
fn files_under(dir: &Path, suffix: &str) -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &Path, rel: &str, suffix: &str, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            let rel = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            if p.is_dir() {
                walk(&p, &rel, suffix, out);
            } else if name.ends_with(suffix) {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", suffix, &mut out);
    out.sort();
    out
}

/// A Triton cache folder: import (detected and named), show --json lists
/// one entry per file with every config as a candidate, export writes the
/// very same autotune files at the same paths (and nothing else).
#[test]
fn triton_cache_import_show_export_gives_the_files_back() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache.json");
    let out = ranktune(&[&"cache", &"import", &cache, &triton("h100")]);
    assert!(out.status.success(), "{out}");
    assert!(
        out.stdout_text()
            .contains(&format!("read 4 entries from {} (triton)", triton("h100").display())),
        "{out}"
    );

    let out = ranktune(&[&"cache", &"show", &cache, &"--json"]);
    assert!(out.status.success(), "{out}");
    let listed: Value = serde_json::from_str(&out.stdout_text()).unwrap();
    let entries = listed["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 4);
    let matmul = entries.iter().find(|e| e["bucket"] == serde_json::json!([[1024, 1024, 512]]));
    let matmul = matmul.expect("the 1024x1024x512 matmul");
    assert_eq!(matmul["op"], "matmul_kernel");
    assert_eq!(matmul["fingerprint"], "#,#,#,torch.float16,torch.float16,torch.float16");
    let candidates = matmul["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 8);
    assert!(candidates.iter().all(|c| c["stats"]["median_us"].as_f64().is_some()));
    assert!(matmul["tactic"]["kwargs"]["BLOCK_SIZE_M"].is_u64(), "{matmul}");
    let out = ranktune(&[&"cache", &"show", &cache]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout_text().contains("1024x1024x512"), "{out}");
    assert!(out.stdout_text().contains("BLOCK_SIZE_K="), "{out}");

    let dir = tmp.path().join("triton-cache");
    let out = ranktune(&[&"cache", &"export", &cache, &"-o", &dir, &"--format", &"triton"]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout_text().contains("exported 4 entries to 4 files"), "{out}");
    assert_eq!(files_under(&dir, ".autotune.json"), files_under(&triton("h100"), ".autotune.json"));
    assert_eq!(files_under(&dir, "").len(), 4);
    // Again: the files exist, so only with --force.
    let out = ranktune(&[&"cache", &"export", &cache, &"-o", &dir, &"--format", &"triton"]);
    assert_eq!(out.status.code(), Some(2), "{out}");
    assert!(out.stderr_text().contains("pass --force"), "{out}");
    let out =
        ranktune(&[&"cache", &"export", &cache, &"-o", &dir, &"--format", &"triton", &"--force"]);
    assert!(out.status.success(), "{out}");
}

/// `cache diff` of two GPUs' Triton caches (folders or single files)
/// shows, per kernel and key, the config keys that changed and the times.
#[test]
fn triton_diff_of_two_gpus_shows_configs_and_times() {
    let out = ranktune(&[&"cache", &"diff", &triton("h100"), &triton("a100")]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    let stdout = out.stdout_text();
    let changed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("choice")).collect();
    assert_eq!(changed.len(), 4, "{stdout}");
    let row = changed.iter().find(|l| l.contains("4096x4096x4096")).unwrap();
    assert!(row.contains("BLOCK_SIZE_N=32 @ 740.545us"), "{row}");
    assert!(row.contains("BLOCK_SIZE_N=128 @ 807.246us"), "{row}");
    assert!(
        stdout.contains(
            "0 added, 0 removed, 4 different choice, 0 time change, 0 other change, 0 unchanged"
        ),
        "{stdout}"
    );
    // Two single files: the same kernel and key on two GPUs.
    let one = |gpu: &str| {
        let files = files_under(&triton(gpu), ".autotune.json");
        let (rel, _) = files
            .into_iter()
            .find(|(_, b)| b.starts_with(b"{\"key\": [\"1024\", \"1024\", \"512\""))
            .unwrap();
        triton(gpu).join(rel)
    };
    let out = ranktune(&[&"cache", &"diff", &one("h100"), &one("a100")]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    let stdout = out.stdout_text();
    assert!(stdout.contains("1 different choice"), "{stdout}");
    assert!(stdout.contains("matmul_kernel"), "{stdout}");
    // The same file twice: nothing to report.
    let out = ranktune(&[&"cache", &"diff", &one("h100"), &one("h100")]);
    assert_eq!(out.status.code(), Some(0), "{out}");
}

/// Damaged autotune files: named, skipped, the rest imported.
#[test]
fn triton_damaged_files_are_named_and_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache.json");
    let out = ranktune(&[&"cache", &"import", &cache, &triton("damaged"), &"--format", &"triton"]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout_text().contains("read 1 entries"), "{out}");
    assert!(out.stdout_text().contains("(triton, 5 bad entries skipped)"), "{out}");
    let err = out.stderr_text();
    assert!(err.contains("truncated.autotune.json: not valid JSON"), "{err}");
    assert!(err.contains("all_failed.autotune.json: no config has a time"), "{err}");
    // A folder with no autotune file, read as triton: an error naming it.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = ranktune(&[&"cache", &"import", &cache, &empty, &"--format", &"triton"]);
    assert_eq!(out.status.code(), Some(2), "{out}");
    assert!(out.stderr_text().contains("holds no Triton autotune files"), "{out}");
}
