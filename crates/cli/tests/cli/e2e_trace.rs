//! End to end: `ranktune tune --ranks 4 --quick --trace DIR/`, then
//! `ranktune trace merge` and `ranktune trace summary` on DIR.

use ranktune_testkit::{Cli, Output};
use std::path::Path;

/// Runs ranktune in `dir`, without the tracing variables of the test's own
/// environment, and fails the test unless it succeeds.
fn ranktune(dir: &Path, args: &[&str]) -> Output {
    let scrub = [
        "RANKTUNE_TRACE",
        "TLLM_TORCH_PROFILE_TRACE",
        "RANKTUNE_PROFILE_ITERS",
        "TLLM_PROFILE_START_STOP",
    ];
    Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(args)
        .current_dir(dir)
        .env_remove(scrub)
        .run()
        .expect_success()
}

#[test]
fn tune_with_traces_then_merge_and_summarize() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    ranktune(
        dir,
        &["tune", "--ranks", "4", "--quick", "--ops", "gemm,rmsnorm", "--trace", "traces/"],
    );

    // One valid file per rank, each naming its own rank the way HTA reads it.
    let rank_re = |text: &str| -> u32 {
        let at = text.find("\"rank\":").expect("distributedInfo.rank");
        let rest = &text[at + 7..];
        assert!(rest.starts_with(char::is_whitespace), "HTA needs a space after the colon");
        rest.trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    for rank in 0..4u32 {
        let path = dir.join(format!("traces/trace_{rank}.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(rank_re(&text), rank);
        let events = doc["traceEvents"].as_array().unwrap();
        assert!(events.iter().all(|e| e["pid"] == rank), "pid is the rank in {}", path.display());
        let names: Vec<&str> = events.iter().filter_map(|e| e["name"].as_str()).collect();
        assert!(names.contains(&"tune"), "the tuner's per-bucket spans are recorded");
        assert!(names.contains(&"measure"), "the per-candidate spans are recorded");
        assert!(names.iter().any(|n| n.starts_with("ProfilerStep#")), "buckets are iterations");
        // ranktune's own collectives, numbered like PyTorch's (`Seq`).
        let calls: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("ranktune::")))
            .collect();
        assert!(!calls.is_empty(), "the strategy's collectives are recorded");
        assert!(calls.iter().all(|e| e["args"]["Seq"].is_u64()), "{:?}", calls[0]);
    }

    let out = ranktune(dir, &["trace", "merge", "traces", "-o", "merged.json"]);
    assert!(out.status.success());
    let merged: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("merged.json")).unwrap()).unwrap();
    let mut pids_by_rank = std::collections::BTreeMap::new();
    for e in merged["traceEvents"].as_array().unwrap() {
        if e["name"] == "process_name" {
            let name = e["args"]["name"].as_str().unwrap().to_string();
            pids_by_rank.insert(name, e["pid"].clone());
        }
    }
    assert_eq!(pids_by_rank.len(), 4, "one process group per rank: {pids_by_rank:?}");

    let out = ranktune(dir, &["trace", "summary", "traces", "--json"]);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ranks = summary["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    for r in ranks {
        // gemm and rmsnorm at --quick: one step per tuned bucket.
        assert!(r["steps"].as_u64().unwrap() >= 2, "{r}");
        assert!(r["step_mean_us"].as_f64().unwrap() > 0.0);
    }
    assert!(summary.get("straggler").is_some());
    // Those collectives are matched across the ranks, each rank blamed in time.
    let coll = &summary["collectives"];
    assert!(coll["matched"].as_u64().unwrap() > 0, "{coll}");
    assert_eq!(coll["mismatched"], 0, "{coll}");
    assert_eq!(coll["per_rank"].as_array().unwrap().len(), 4, "{coll}");
    let worst = coll["worst"].as_array().unwrap();
    assert!(
        !worst.is_empty()
            && worst.iter().all(|w| w["name"].as_str().unwrap().starts_with("ranktune::")),
        "{coll}"
    );
}
