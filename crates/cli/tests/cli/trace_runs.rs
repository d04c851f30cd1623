//! Traces of several runs in one place, the shared clock base of one run,
//! and finding a job's files from the `--trace` template it was given; with
//! real `ranktune tune --ranks N` jobs.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn ranktune(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(args)
        .current_dir(dir)
        .env_remove("RANKTUNE_TRACE")
        .env_remove("TLLM_TORCH_PROFILE_TRACE")
        .env_remove("RANKTUNE_PROFILE_ITERS")
        .env_remove("TLLM_PROFILE_START_STOP")
        .env_remove("RANKTUNE_TRACE_BASE_NS")
        .env_remove("RANKTUNE_JOB_ID")
        .env_remove("RANKTUNE_CACHE")
        .env_remove("TLLM_AUTOTUNER_CACHE_PATH")
        .output()
        .unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> Output {
    let out = ranktune(dir, args);
    assert!(
        out.status.success(),
        "ranktune {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A quick traced job of `ranks` ranks with its own cache (so it measures).
fn tune(dir: &Path, ranks: u32, trace: &str) {
    let cache = format!("cache-{ranks}.json");
    let n = ranks.to_string();
    ok(
        dir,
        &["tune", "--ranks", &n, "--quick", "--ops", "gemm", "--cache", &cache, "--trace", trace],
    );
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `tune --ranks 4`, then `tune --ranks 2` into the same directory: the
/// directory then holds ranks 0-1 of the second run and ranks 2-3 of the
/// first. Summary and merge use the newest run only and name the others.
#[test]
fn files_of_an_older_run_are_left_out_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tune(dir, 4, "traces/");
    tune(dir, 2, "traces/");
    let header = |r: u32| read_json(&dir.join(format!("traces/trace_{r}.json")));
    let (new_run, old_run) =
        (header(0)["otherData"]["run_id"].clone(), header(2)["otherData"]["run_id"].clone());
    assert!(
        new_run.is_string() && old_run.is_string() && new_run != old_run,
        "{new_run} {old_run}"
    );
    assert_eq!(header(1)["otherData"]["run_id"], new_run);
    assert_eq!(header(3)["otherData"]["run_id"], old_run);

    let out = ok(dir, &["trace", "summary", "traces", "--json"]);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ranks: Vec<u64> =
        s["ranks"].as_array().unwrap().iter().map(|r| r["rank"].as_u64().unwrap()).collect();
    assert_eq!(ranks, [0, 1], "only the newest run");
    assert_eq!(s["run_id"], new_run);
    let left: Vec<&str> =
        s["left_out"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(left, ["traces/trace_2.json", "traces/trace_3.json"]);
    let warnings = s["warnings"].to_string();
    assert!(warnings.contains("left out 2 files of other runs"), "{warnings}");

    // The table for people: two ranks, and one warning line naming the files.
    let out = ok(dir, &["trace", "summary", "traces"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("traces/trace_2.json") && text.contains("traces/trace_1.json"),
        "{text}"
    );
    let err = stderr(&out);
    let line = err.lines().find(|l| l.contains("left out")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("traces/trace_2.json") && line.contains("traces/trace_3.json"), "{line}");
    assert!(line.contains("world size 4") && line.contains("--all-runs"), "{line}");

    // --all-runs keeps every file (the old behaviour).
    let out = ok(dir, &["trace", "summary", "traces", "--json", "--all-runs"]);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["ranks"].as_array().unwrap().len(), 4);
    assert_eq!(s["left_out"], serde_json::json!([]));
    assert_eq!(s["run_id"], Value::Null, "two runs mixed on request");

    // Merge: the same rule.
    let out = ok(dir, &["trace", "merge", "traces", "-o", "merged.json"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("merged 2 ranks"), "{text}");
    assert!(stderr(&out).contains("traces/trace_3.json"), "{}", stderr(&out));
    let merged = read_json(&dir.join("merged.json"));
    let names: Vec<&str> = merged["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].starts_with("rank 0") && names[1].starts_with("rank 1"), "{names:?}");
    let out = ok(dir, &["trace", "merge", "traces", "-o", "all.json", "--all-runs"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("merged 4 ranks"));
}

/// All ranks of one run write one `baseTimeNanoseconds`, so raw `ts` values
/// line up across files (Holistic Trace Analysis aligns by raw `ts`), and
/// the merge shifts nothing.
#[test]
fn ranks_of_one_run_share_one_clock_base() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tune(dir, 2, "traces/");
    let files: Vec<Value> =
        (0..2).map(|r| read_json(&dir.join(format!("traces/trace_{r}.json")))).collect();
    let base = &files[0]["baseTimeNanoseconds"];
    assert!(base.as_u64().is_some_and(|b| b > 1_600_000_000_000_000_000), "{base}");
    assert_eq!(&files[1]["baseTimeNanoseconds"], base, "one base for the run");
    assert_eq!(files[0]["otherData"]["run_id"], files[1]["otherData"]["run_id"]);

    let out = ok(dir, &["trace", "merge", "traces", "-o", "merged.json"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("base {base} ns")), "{text}");
    assert_eq!(text.matches("shift 0 ns").count(), 2, "{text}");
    // Every timed event keeps its raw ts in the merged file.
    let merged = read_json(&dir.join("merged.json"));
    assert_eq!(merged["baseTimeNanoseconds"].to_string().trim_matches('"'), base.to_string());
    let merged_ts: std::collections::HashSet<(String, u64)> = merged["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| (e["name"].as_str().unwrap().to_string(), e["ts"].as_f64().unwrap().to_bits()))
        .collect();
    let mut starts = Vec::new();
    for f in &files {
        let events: Vec<&Value> =
            f["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X").collect();
        assert!(!events.is_empty());
        for e in &events {
            let key =
                (e["name"].as_str().unwrap().to_string(), e["ts"].as_f64().unwrap().to_bits());
            assert!(merged_ts.contains(&key), "{e} not at its raw ts in the merged file");
        }
        starts.push(events.iter().map(|e| e["ts"].as_f64().unwrap()).fold(f64::MAX, f64::min));
    }
    // Both ranks started after the launch, and close to each other: the raw
    // times are on one clock, not each rank's own zero.
    assert!(starts.iter().all(|&s| s > 0.0), "{starts:?}");
    assert!((starts[0] - starts[1]).abs() < 60e6, "{starts:?}");
}

/// `--trace traces` (no slash, no such directory) writes `traces_0.json`,
/// `traces_1.json`; the analysis commands take the same template.
#[test]
fn the_trace_template_finds_its_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tune(dir, 2, "traces");
    assert!(dir.join("traces_0.json").is_file() && dir.join("traces_1.json").is_file());
    assert!(!dir.join("traces").exists());

    let out = ok(dir, &["trace", "summary", "traces", "--json"]);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    let files: Vec<&str> =
        s["ranks"].as_array().unwrap().iter().map(|r| r["file"].as_str().unwrap()).collect();
    assert_eq!(files, ["traces_0.json", "traces_1.json"]);
    let out = ok(dir, &["trace", "merge", "traces", "-o", "merged.json"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("merged 2 ranks"));

    // A template with placeholders works the same way.
    ok(
        dir,
        &[
            "tune",
            "--ranks",
            "2",
            "--quick",
            "--ops",
            "gemm",
            "--cache",
            "c.json",
            "--trace",
            "run/r{rank}.json.gz",
        ],
    );
    let out = ok(dir, &["trace", "summary", "run/r{rank}.json.gz", "--json"]);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["ranks"].as_array().unwrap().len(), 2);

    // A template nothing was written for: a clear error naming what was looked for.
    let out = ranktune(dir, &["trace", "summary", "nothing"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("no such file or directory") && err.contains("nothing_0.json"), "{err}");
}
