//! `cache import`, `show`, `check` and `export --format trtllm` on a file
//! as TensorRT-LLM writes it, with the dims its `_find_nearest_profile`
//! writes (`-1` for each dim a constraint derives, `(0,)` for a non-tensor
//! input) and a float dim: every entry kept, keys and `min_time` exact.

use ranktune_testkit::{Cli, Output};
use serde_json::Value;

fn ranktune(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Cli::new(env!("CARGO_BIN_EXE_ranktune")).args(args).env_remove(["RANKTUNE_LOG"]).run()
}

const KEYS: [&str; 3] = [
    "('trtllm::fp4_gemm', 'FP4GemmRunner', '(1,)', ((8, -1), (0,), (8, 448)))",
    "('trtllm::fused_moe', 'MoERunner', \"(8, 'w4')\", ((16, 7168), (-1, -1, 1)))",
    "('trtllm::op', 'R', '0', ((1.5, 0),))",
];

/// A file as `json.dump(indent=2)` writes it.
fn file() -> String {
    let times = [0.30000000000000004, 1e-06, 0.013_671_875_000_000_002];
    let entries: Vec<String> = KEYS
        .iter()
        .zip(times)
        .map(|(k, t)| {
            format!(
                "    {}: {{\n      \"runner_id\": 0,\n      \"tactic\": \"(64, 'a')\",\n      \"min_time\": {}\n    }}",
                serde_json::to_string(k).unwrap(),
                ranktune_formats::trtllm::py_json_float(t)
            )
        })
        .collect();
    format!(
        "{{\n  \"metadata\": {{\n    \"lib_version\": \"1.2.0\",\n    \"creation_timestamp\": 1764480000.5,\n    \"device_name\": \"NVIDIA B200\",\n    \"device_capability\": [\n      10,\n      0\n    ]\n  }},\n  \"rank_0\": {{\n{}\n  }}\n}}",
        entries.join(",\n")
    )
}

#[test]
fn minus_one_and_float_dims_import_show_check_and_export_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("autotuner.json");
    std::fs::write(&src, file()).unwrap();

    let show = ranktune(&[&"cache", &"show", &src]);
    assert!(show.status.success(), "{}", show.stderr_text());
    let table = show.stdout_text();
    assert!(
        table.contains("8x-1,0,8x448") && table.contains("-1x-1x1") && table.contains("1.5x0"),
        "{table}"
    );
    assert!(!show.stderr_text().contains("skipped"), "{}", show.stderr_text());

    let check = ranktune(&[&"cache", &"check", &src]);
    assert!(!check.stderr_text().contains("cannot"), "{}", check.stderr_text());

    let cache = dir.path().join("cache.json");
    let import = ranktune(&[&"cache", &"import", &cache, &src]);
    assert!(import.status.success(), "{}", import.stderr_text());
    assert!(import.stdout_text().contains("imported 3 entries"), "{}", import.stdout_text());

    let out = dir.path().join("out.json");
    let export = ranktune(&[&"cache", &"export", &cache, &"-o", &out, &"--format", &"trtllm"]);
    assert!(export.status.success(), "{}", export.stderr_text());
    let want: Value = ranktune_formats::parse_document(file().as_bytes()).unwrap();
    let got: Value = ranktune_formats::parse_document(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(got["rank_0"], want["rank_0"], "keys, tactics and min_time bit for bit");
}
