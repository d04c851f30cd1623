//! What the commands print tells the truth: one label for a bucket and a
//! tactic in `tune`, `cache show` and `cache diff`; `cache show`'s order;
//! `cache diff`'s noise threshold and exit status; `cache export` refusing
//! its own input; path and count errors that name the problem; nothing left
//! next to a file after a failed operation.

use ranktune_cache::{bucket_label, tactic_label, Entry, EntryKey, FileStore, Section, Store};
use ranktune_testkit::cache_fixtures as fixtures;
use ranktune_testkit::{file_names, Cli, Output, LAUNCHER_VARS};
use std::path::Path;

fn ranktune(dir: &Path, args: &[&str]) -> Output {
    let cli = Cli::new(env!("CARGO_BIN_EXE_ranktune")).current_dir(dir).args(args);
    cli.env_remove(LAUNCHER_VARS)
        .env_remove(["RANKTUNE_CACHE", "TLLM_AUTOTUNER_CACHE_PATH", "RANKTUNE_LOG"])
        .env_remove(["RANKTUNE_TRACE", "TLLM_TORCH_PROFILE_TRACE", "RANKTUNE_STRATEGY"])
        .run()
}

fn key(op: &str, runner: &str, m: u64) -> EntryKey {
    EntryKey { runner: runner.into(), ..fixtures::key(op, &[&[m, 512], &[m, 512]]) }
}

fn entry(tactic: serde_json::Value, time_us: f64) -> Entry {
    Entry { time_us, checksum: "c".into(), created_unix: 1_764_480_000, ..fixtures::entry(tactic) }
}

fn save(path: &Path, entries: &[(Section, EntryKey, Entry)]) {
    FileStore::new(path).save(&fixtures::cache_of(entries)).unwrap();
}

#[test]
fn tune_show_and_diff_print_the_same_labels() {
    let dir = tempfile::tempdir().unwrap();
    let out = ranktune(
        dir.path(),
        &["tune", "--quick", "--ops", "gemm", "--max-tokens", "8", "--cache", "c.json"],
    );
    assert!(out.status.success(), "{}", out.stderr_text());
    let tune_text = out.stdout_text();
    let show = ranktune(dir.path(), &["cache", "show", "c.json"]);
    assert!(show.status.success(), "{}", show.stderr_text());
    let show_text = show.stdout_text();
    std::fs::write(dir.path().join("empty.json"), "").unwrap();
    let diff = ranktune(dir.path(), &["cache", "diff", "empty.json", "c.json"]);
    assert_eq!(diff.status.code(), Some(1), "{}", diff.stderr_text());
    let diff_text = diff.stdout_text();

    let json = ranktune(dir.path(), &["cache", "show", "c.json", "--json"]).json();
    let entries = json["entries"].as_array().unwrap();
    assert!(!entries.is_empty());
    for e in entries {
        let bucket: Vec<Vec<ranktune_cache::Dim>> =
            serde_json::from_value(e["bucket"].clone()).unwrap();
        let b = bucket_label(&bucket);
        let t = tactic_label(&e["tactic"]);
        assert!(b.contains('x') && !b.contains('['), "{b}");
        for (name, text) in [("tune", &tune_text), ("show", &show_text), ("diff", &diff_text)] {
            let line = text.lines().find(|l| l.split_whitespace().any(|w| w == b));
            let line = line.unwrap_or_else(|| panic!("{name} lacks bucket {b}:\n{text}"));
            assert!(line.contains(&t), "{name} writes tactic {t} otherwise:\n{line}");
        }
    }
    // The JSON keeps the stored values, not labels.
    assert!(entries[0]["bucket"].is_array());
}

#[test]
fn show_sorts_by_op_then_bucket_size_then_runner() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let t = |s: &str| entry(serde_json::json!(s), 1.0);
    save(
        &path,
        &[
            (Section::Rank(0), key("softmax", "a", 1), t("s1")),
            (Section::Rank(0), key("gemm", "b", 8), t("b8")),
            (Section::Rank(0), key("gemm", "a", 128), t("a128")),
            (Section::Rank(0), key("gemm", "a", 16), t("a16")),
            (Section::Rank(0), key("gemm", "a", 8), t("a8")),
            (Section::Rank(0), key("gemm", "b", 1), t("b1")),
        ],
    );
    let out = ranktune(dir.path(), &["cache", "show", "c.json"]);
    assert!(out.status.success(), "{}", out.stderr_text());
    let order: Vec<String> = out
        .stdout_text()
        .lines()
        .filter(|l| l.starts_with("rank_"))
        .map(|l| l.split_whitespace().nth(5).unwrap_or_default().to_string())
        .collect();
    // 16 (16x512) before 128 numerically, runner a before b at size 8.
    assert_eq!(order, ["b1", "a8", "b8", "a16", "a128", "s1"], "{}", out.stdout_text());
}

#[test]
fn diff_ignores_noise_by_default_and_documents_its_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let tac = serde_json::json!({"naive": {"order": "ikj"}});
    save(
        &dir.path().join("a.json"),
        &[(Section::Rank(0), key("gemm", "a", 8), entry(tac.clone(), 100.0))],
    );
    // Re-measured: 0.1% slower, new evidence (time of measurement).
    let mut remeasured = entry(tac.clone(), 100.1);
    remeasured.created_unix += 60;
    save(&dir.path().join("b.json"), &[(Section::Rank(0), key("gemm", "a", 8), remeasured)]);
    save(&dir.path().join("c.json"), &[(Section::Rank(0), key("gemm", "a", 8), entry(tac, 125.0))]);

    let same = ranktune(dir.path(), &["cache", "diff", "a.json", "b.json"]);
    assert_eq!(same.status.code(), Some(0), "{}{}", same.stdout_text(), same.stderr_text());
    assert!(same.stdout_text().contains("0 time change"), "{}", same.stdout_text());
    let every =
        ranktune(dir.path(), &["cache", "diff", "a.json", "b.json", "--time-threshold", "0"]);
    assert_eq!(every.status.code(), Some(1), "{}", every.stdout_text());
    assert!(every.stdout_text().contains("+0.1%"), "{}", every.stdout_text());
    let slower = ranktune(dir.path(), &["cache", "diff", "a.json", "c.json"]);
    assert_eq!(slower.status.code(), Some(1), "{}", slower.stdout_text());
    assert!(slower.stdout_text().contains("(+25.0%)"), "{}", slower.stdout_text());
    assert!(
        slower.stdout_text().contains("naive(order=ikj) @ 125.000us"),
        "{}",
        slower.stdout_text()
    );
    let bad =
        ranktune(dir.path(), &["cache", "diff", "a.json", "b.json", "--time-threshold", "-1"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(bad.stderr_text().contains("non-negative percentage"), "{}", bad.stderr_text());
    let missing = ranktune(dir.path(), &["cache", "diff", "a.json", "nope.json"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        missing.stderr_text().contains("nope.json: does not exist"),
        "{}",
        missing.stderr_text()
    );

    let help = ranktune(dir.path(), &["cache", "diff", "--help"]).stdout_text();
    assert!(help.contains("Exit status: 0") && help.contains("[default: 10]"), "{help}");
}

#[test]
fn export_refuses_to_overwrite_its_own_input() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    save(&path, &[(Section::Rank(0), key("gemm", "a", 8), entry(serde_json::json!(1), 1.0))]);
    let before = std::fs::read(&path).unwrap();
    std::os::unix::fs::symlink("c.json", dir.path().join("sym.json")).unwrap();
    std::fs::hard_link(&path, dir.path().join("hard.json")).unwrap();
    for out in ["c.json", "./c.json", "sym.json", "hard.json"] {
        let r = ranktune(dir.path(), &["cache", "export", "c.json", "-o", out, "--force"]);
        assert_eq!(r.status.code(), Some(2), "{out}: {}", r.stdout_text());
        assert!(r.stderr_text().contains("is the cache being exported"), "{}", r.stderr_text());
        assert_eq!(std::fs::read(&path).unwrap(), before, "{out}: the cache was replaced");
    }
    let r = ranktune(dir.path(), &["cache", "export", "c.json", "-o", "t.json"]);
    assert!(r.status.success(), "{}", r.stderr_text());
}

#[test]
fn negative_counts_get_the_real_validation_error() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["tune", "--max-tokens", "-5"][..],
        &["tune", "--ranks", "-2"][..],
        &["cache", "show", "c.json", "--rank", "-1"][..],
    ] {
        let r = ranktune(dir.path(), args);
        assert_eq!(r.status.code(), Some(2), "{args:?}");
        let e = r.stderr_text();
        assert!(!e.contains("unexpected argument"), "{args:?}: {e}");
        assert!(e.contains("is negative"), "{args:?}: {e}");
    }
}

#[test]
fn cache_paths_are_never_created_and_errors_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("afile"), "").unwrap();
    let src = dir.path().join("src.json");
    save(&src, &[(Section::Rank(0), key("gemm", "a", 8), entry(serde_json::json!(1), 1.0))]);
    let cases: [&[&str]; 3] = [
        &["tune", "--quick", "--ops", "rmsnorm", "--max-tokens", "1", "--cache", "P"],
        &["cache", "import", "P", "src.json"],
        &["cache", "merge", "src.json", "-o", "P"],
    ];
    for args in cases.iter().copied().chain([&["cache", "export", "src.json", "-o", "P"][..]]) {
        for (p, needle) in [
            ("afile/c.json", "afile is a file, not a directory"),
            ("no/such/dir/c.json", "does not exist; create it first (mkdir -p"),
        ] {
            let args: Vec<&str> = args.iter().map(|a| if *a == "P" { p } else { a }).collect();
            let r = ranktune(dir.path(), &args);
            assert_eq!(r.status.code(), Some(2), "{args:?}");
            let e = r.stderr_text();
            assert!(e.contains(needle), "{args:?}: {e}");
            assert!(!e.contains("os error"), "{args:?}: {e}");
        }
    }
    assert_eq!(file_names(dir.path()), ["afile", "src.json", "src.json.lock"]);
}

#[test]
fn show_rank_that_the_cache_lacks_fails_and_lists_the_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let e = entry(serde_json::json!(1), 1.0);
    save(
        &path,
        &[
            (Section::Rank(0), key("gemm", "a", 8), e.clone()),
            (Section::Rank(3), key("gemm", "a", 8), e.clone()),
            (Section::Shared, key("softmax", "a", 8), e),
        ],
    );
    // A rank without a section of its own uses the shared entries: shown,
    // with a note naming the ranks the cache has.
    let r = ranktune(dir.path(), &["cache", "show", "c.json", "--rank", "5"]);
    assert_eq!(r.status.code(), Some(0), "{}", r.stderr_text());
    assert!(
        r.stderr_text()
            .contains("no rank_5 section (its ranks are 0, 3); rank 5 would use the 1 shared"),
        "{}",
        r.stderr_text()
    );
    assert!(r.stdout_text().contains("1 entries in 1 section(s)"), "{}", r.stdout_text());
    // What rank 3 loads: the shared section and its own.
    let r = ranktune(dir.path(), &["cache", "show", "c.json", "--rank", "3"]);
    assert!(r.status.success());
    assert!(r.stdout_text().contains("2 entries in 2 section(s)"), "{}", r.stdout_text());
    assert!(!r.stdout_text().contains("rank_0"), "{}", r.stdout_text());
    // Nothing at all for the rank: exit 1.
    let only_ranks = dir.path().join("r.json");
    save(&only_ranks, &[(Section::Rank(0), key("gemm", "a", 8), entry(serde_json::json!(1), 1.0))]);
    let r = ranktune(dir.path(), &["cache", "show", "r.json", "--rank", "5"]);
    assert_eq!(r.status.code(), Some(1), "{}", r.stdout_text());
    assert!(
        r.stderr_text()
            .contains("no entries for rank 5: no shared ones and no rank_5; its ranks are 0"),
        "{}",
        r.stderr_text()
    );
}

#[test]
fn failed_operations_leave_nothing_next_to_a_tensorrt_llm_file() {
    let dir = tempfile::tempdir().unwrap();
    let trt = r#"{"metadata": {"lib_version": "0.20"},
        "rank_0": {"('gemm', 'R', '()', ((1,),))": {"runner_id": 0, "tactic": 3, "min_time": 0.1}}}"#;
    std::fs::write(dir.path().join("t.json"), trt).unwrap();
    for args in [
        &["cache", "import", "t.json", "t.json"][..],
        &["cache", "merge", "t.json", "-o", "t.json"][..],
        &["tune", "--quick", "--ops", "rmsnorm", "--max-tokens", "1", "--cache", "t.json"][..],
    ] {
        let r = ranktune(dir.path(), args);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", r.stdout_text());
        assert!(r.stderr_text().contains("TensorRT-LLM"), "{args:?}: {}", r.stderr_text());
        assert_eq!(file_names(dir.path()), ["t.json"], "{args:?} left something behind");
        assert_eq!(std::fs::read_to_string(dir.path().join("t.json")).unwrap(), trt);
    }
    // A successful tune leaves the cache and its lock, and no empty spool.
    let r = ranktune(
        dir.path(),
        &["tune", "--quick", "--ops", "rmsnorm", "--max-tokens", "2", "--cache", "c.json"],
    );
    assert!(r.status.success(), "{}", r.stderr_text());
    assert_eq!(file_names(dir.path()), ["c.json", "c.json.lock", "t.json"]);
}

#[test]
fn every_subcommand_help_has_examples() {
    let dir = tempfile::tempdir().unwrap();
    for sub in crate::help_and_thresholds::COMMANDS {
        let mut args = sub.to_vec();
        args.push("--help");
        let r = ranktune(dir.path(), &args);
        assert!(r.status.success(), "{sub:?}");
        let help = r.stdout_text();
        let examples = help.split("Examples:").nth(1).unwrap_or_else(|| panic!("{sub:?}:\n{help}"));
        let first = examples.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
        assert!(first.trim_start().contains(&sub.join(" ")), "{sub:?}: {first}");
    }
}
