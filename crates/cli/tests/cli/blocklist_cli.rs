//! The blocklist end to end, with real `ranktune` processes: a known-bad
//! tactic in the cache (written through the library, as a crash found by
//! an isolated tune would be) is skipped by the next `tune`, which says
//! so, alone and with two ranks tuning together; `--retry-failed` (and
//! `RANKTUNE_RETRY_FAILED`) tries it again and, as it works, takes it off
//! the list; `cache show` and `cache check` list it, `cache prune
//! --blocklist` deletes it.

use ranktune_cache::{BlockKey, BlockKind, Blocked, CacheData, FileStore, Store};
use ranktune_testkit::{Cli, Output, LAUNCHER_VARS};
use serde_json::Value;
use std::path::Path;

fn ranktune(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let cli = Cli::new(env!("CARGO_BIN_EXE_ranktune")).current_dir(dir).args(args);
    cli.env_remove(LAUNCHER_VARS)
        .env_remove(["RANKTUNE_CACHE", "RANKTUNE_RETRY_FAILED", "RANKTUNE_STRATEGY"])
        .envs(env.to_vec())
        .run()
}

/// Tunes the quick GEMM buckets into `cache`, then puts the winner of the
/// smallest bucket (runner, tactic) on the blocklist at that bucket, as a
/// crash: it then blocks that tactic at that bucket and every larger one.
/// Returns the blocked runner, tactic and bucket.
fn tune_then_block(dir: &Path, cache: &Path) -> (String, Value, Vec<Vec<u64>>) {
    let c = cache.to_str().unwrap();
    let out = ranktune(dir, &["tune", "--quick", "--ops", "gemm", "--json", "--cache", c], &[]);
    assert!(out.status.success(), "{}", out.stderr_text());
    let store = FileStore::new(cache);
    let data = store.load().unwrap().data;
    // The fallback is never skipped: the smallest bucket won by another runner.
    let (_, key, entry) = data
        .iter()
        .filter(|(_, _, e)| e.runner_index != 0)
        .min_by_key(|(_, k, _)| ranktune_cache::bucket_size(&k.bucket))
        .expect("a bucket won by a runner other than the fallback's");
    let (runner, fingerprint, tactic) =
        (key.runner.clone(), key.fingerprint.clone(), entry.tactic.clone());
    let sizes = ranktune_cache::bucket_sizes(&key.bucket).expect("a bucket of sizes");
    let mut update = CacheData::default();
    update.blocklist.insert(
        BlockKey::new(
            "gemm",
            runner.as_str(),
            fingerprint,
            &tactic,
            entry.env.as_str(),
            key.bucket.clone(),
        ),
        Blocked::new(
            BlockKind::Crash,
            "crashed: SIGSEGV (signal 11)",
            1_700_000_000,
            Some(0),
            "node7",
        ),
    );
    store.save(&update).unwrap();
    (runner, tactic, sizes)
}

/// Whether `row` runs the blocked `runner`/`tactic` at a bucket the record
/// (made at bucket `from`) covers: `from` or a larger one. Below `from` the
/// tactic is still allowed, and may win.
fn runs_blocked(row: &Value, runner: &str, tactic: &Value, from: &[Vec<u64>]) -> bool {
    let bucket: Vec<Vec<u64>> = serde_json::from_value(row["bucket"].clone()).unwrap();
    let covered = bucket.len() == from.len()
        && bucket
            .iter()
            .zip(from)
            .all(|(b, f)| b.len() == f.len() && b.iter().zip(f).all(|(x, y)| x >= y));
    covered && row["runner"] == runner && row["tactic"] == *tactic
}

fn rows(report: &Value) -> Vec<&Value> {
    report["ranks"].as_array().unwrap().iter().flat_map(|r| r["rows"].as_array().unwrap()).collect()
}

#[test]
fn a_known_bad_tactic_is_skipped_by_the_next_tune_which_says_so_and_retry_failed_tries_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tune.json");
    let c = cache.to_str().unwrap();
    let (runner, tactic, from) = tune_then_block(dir.path(), &cache);

    // The next tune: entries that chose it are stale and tuned again
    // without it, and the table says what it skipped.
    let out = ranktune(dir.path(), &["tune", "--quick", "--ops", "gemm", "--cache", c], &[]);
    assert!(out.status.success(), "{}", out.stderr_text());
    let text = out.stdout_text();
    assert!(text.contains("known-bad tactic(s)"), "{text}");
    assert!(text.contains("(crash)"), "{text}");
    assert!(text.contains("`--retry-failed` tries them again"), "{text}");
    let json =
        ranktune(dir.path(), &["tune", "--quick", "--ops", "gemm", "--json", "--cache", c], &[])
            .json();
    for row in rows(&json) {
        assert!(!runs_blocked(row, &runner, &tactic, &from), "{row}");
    }

    // show and check list it; check still says healthy (exit 0).
    let show = ranktune(dir.path(), &["cache", "show", c], &[]);
    let show_text = show.stdout_text();
    assert!(
        show_text.contains("FROM_BUCKET") && show_text.contains("crashed: SIGSEGV"),
        "{show_text}"
    );
    assert!(
        show_text.contains("1 known-bad tactic(s) on the blocklist, 1 of this machine's"),
        "{show_text}"
    );
    let listed = ranktune(dir.path(), &["cache", "show", c, "--json"], &[]).json();
    let list = listed["blocklist"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0]["kind"].as_str(), list[0]["here"].as_bool()), (Some("crash"), Some(true)));
    assert_eq!(list[0]["tactic"], tactic);
    let check = ranktune(dir.path(), &["cache", "check", c], &[]);
    assert!(check.status.success(), "{}", check.stdout_text());
    let check_text = check.stdout_text();
    assert!(check_text.contains("known-bad tactic: gemm/"), "{check_text}");
    assert!(
        check_text.contains("healthy") && check_text.contains("1 known-bad tactic(s)"),
        "{check_text}"
    );

    // A bad RANKTUNE_RETRY_FAILED is an error naming it.
    let bad = ranktune(
        dir.path(),
        &["tune", "--quick", "--ops", "gemm", "--cache", c],
        &[("RANKTUNE_RETRY_FAILED", "perhaps")],
    );
    assert!(!bad.status.success());
    assert!(
        bad.stderr_text().contains("RANKTUNE_RETRY_FAILED=\"perhaps\""),
        "{}",
        bad.stderr_text()
    );

    // --retry-failed measures it again; it works, so it leaves the list.
    let retry = ranktune(
        dir.path(),
        &["tune", "--quick", "--ops", "gemm", "--json", "--retry-failed", "--cache", c],
        &[],
    )
    .json();
    assert!(rows(&retry).iter().all(|r| r.get("skipped").is_none()), "{retry}");
    assert!(rows(&retry).iter().any(|r| r["unblocked"].as_u64() == Some(1)), "{retry}");
    let after = ranktune(dir.path(), &["cache", "show", c, "--json"], &[]).json();
    assert_eq!(after["blocklist"].as_array().unwrap().len(), 0, "{after}");
}

#[test]
fn retry_failed_from_the_environment_and_prune_blocklist() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tune.json");
    let c = cache.to_str().unwrap();
    tune_then_block(dir.path(), &cache);
    let dry = ranktune(dir.path(), &["cache", "prune", c, "--blocklist", "--dry-run"], &[]);
    assert!(
        dry.stdout_text().contains("would remove blocklist record gemm/"),
        "{}",
        dry.stdout_text()
    );
    assert!(dry.stdout_text().contains("and 1 blocklist record(s)"), "{}", dry.stdout_text());
    // Without --blocklist, this environment's records stay.
    let keep = ranktune(dir.path(), &["cache", "prune", c], &[]);
    assert!(keep.status.success(), "{}", keep.stderr_text());
    let listed = ranktune(dir.path(), &["cache", "show", c, "--json"], &[]).json();
    assert_eq!(listed["blocklist"].as_array().unwrap().len(), 1);
    // RANKTUNE_RETRY_FAILED=1 is --retry-failed.
    let retry = ranktune(
        dir.path(),
        &["tune", "--quick", "--ops", "gemm", "--json", "--cache", c],
        &[("RANKTUNE_RETRY_FAILED", "1")],
    )
    .json();
    assert!(rows(&retry).iter().all(|r| r.get("skipped").is_none()), "{retry}");
    // Put it back, then prune --blocklist deletes it.
    tune_then_block(dir.path(), &cache);
    let prune = ranktune(dir.path(), &["cache", "prune", c, "--blocklist"], &[]);
    assert!(
        prune.stdout_text().contains("removed 1 blocklist record(s)"),
        "{}",
        prune.stdout_text()
    );
    let listed = ranktune(dir.path(), &["cache", "show", c, "--json"], &[]).json();
    assert_eq!(listed["blocklist"].as_array().unwrap().len(), 0);
}

#[test]
fn two_ranks_tuning_together_skip_the_same_tactic_and_stay_together() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tune.json");
    let c = cache.to_str().unwrap();
    let (runner, tactic, from) = tune_then_block(dir.path(), &cache);
    let args = [
        "tune",
        "--quick",
        "--ops",
        "gemm",
        "--ranks",
        "2",
        "--strategy",
        "merge",
        "--json",
        "--cache",
        c,
    ];
    let report = ranktune(dir.path(), &args, &[]).json();
    let rows = rows(&report);
    let skipped: Vec<&&Value> = rows.iter().filter(|r| r.get("skipped").is_some()).collect();
    assert!(!skipped.is_empty(), "{report}");
    for row in &rows {
        assert!(row.get("note").is_none(), "no rank tuned alone: {row}");
        assert!(!runs_blocked(row, &runner, &tactic, &from), "{row}");
    }
}

/// The real path: `tune --isolate` with tactics that really crash (the test
/// op `crashy`, the kernels' `crash-tactics` feature) puts each on the
/// blocklist with its reason; the next tune — without isolation, where the
/// segfault would kill the process — skips them at the larger bucket, says
/// so, and completes.
#[test]
fn crashes_found_by_an_isolated_tune_are_skipped_by_the_next_tune_without_isolation() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("c.json");
    let c = cache.to_str().unwrap();
    let first = ranktune(
        dir.path(),
        &[
            "tune",
            "--ops",
            "crashy",
            "--max-tokens",
            "1",
            "--isolate",
            "--candidate-timeout",
            "3",
            "--cache",
            c,
        ],
        &[("RANKTUNE_CANDIDATE_MEMORY", "128")],
    );
    assert!(first.status.success(), "{}", first.stderr_text());
    assert!(first.stdout_text().contains("put on the blocklist:"), "{}", first.stdout_text());
    let listed = ranktune(dir.path(), &["cache", "show", c, "--json"], &[]).json();
    let mut kinds: Vec<(String, String)> = listed["blocklist"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (crate_tactic(&r["tactic"]), r["kind"].as_str().unwrap().to_string()))
        .collect();
    kinds.sort();
    let names: Vec<(&str, &str)> = kinds.iter().map(|(t, k)| (t.as_str(), k.as_str())).collect();
    assert_eq!(
        names,
        [("abort", "crash"), ("alloc", "memory"), ("hang", "timeout"), ("segfault", "crash")],
        "{listed:#}"
    );
    // Without --isolate: bucket 2 is new, the records of bucket 1 cover it.
    let next = ranktune(
        dir.path(),
        &["tune", "--ops", "crashy", "--max-tokens", "2", "--json", "--cache", c],
        &[],
    );
    assert!(next.status.success(), "the segfault was not run: {}", next.stderr_text());
    let report = next.json();
    let rows = rows(&report);
    let tuned: Vec<&&Value> = rows.iter().filter(|r| r["source"] == "tuned").collect();
    assert_eq!(tuned.len(), 1, "{report:#}");
    assert_eq!(tuned[0]["skipped"].as_array().map(Vec::len), Some(4), "{report:#}");
    assert!(tuned[0]["failures"].as_array().unwrap().is_empty(), "{report:#}");
}

/// The crashy op's tactic name (a string, or the one key of an object).
fn crate_tactic(t: &Value) -> String {
    match t {
        Value::String(s) => s.clone(),
        Value::Object(m) => m.keys().next().cloned().unwrap_or_default(),
        other => other.to_string(),
    }
}
