//! `cache check` on an imported cache: entries measured on another machine
//! are reported as such — which library measured them, on what — and are
//! not a defect (exit 0), and the line never advises `cache prune` without
//! saying that it deletes them.
use ranktune_testkit::Cli;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../formats/tests/fixtures/trtllm").join(name)
}

fn ranktune() -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_ranktune"))
}

#[test]
fn an_imported_tensorrt_llm_cache_is_healthy_and_says_where_it_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let out =
        ranktune().args(["cache", "import"]).arg(&cache).arg(fixture("timings_238.json")).run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let out = ranktune().args(["cache", "check"]).arg(&cache).run();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "only entries measured elsewhere: {text}");
    let lines: Vec<&str> = text.lines().collect();
    let (last, findings) = lines.split_last().unwrap();
    assert!(!findings.is_empty(), "{text}");
    for l in findings {
        assert!(l.starts_with("measured elsewhere: "), "{text}");
        // Which library measured them, not a "ranktune trtllm-…" version.
        assert!(l.contains("(measured by TensorRT-LLM "), "{l}");
        assert!(!l.contains("ranktune trtllm-") && !l.contains("0 cores"), "{l}");
        // Prune is named with what it does.
        assert!(l.contains("`ranktune cache prune` would delete these"), "{l}");
    }
    assert!(
        last.contains(": healthy (") && last.contains("measured elsewhere, not used here"),
        "{last}"
    );
}
