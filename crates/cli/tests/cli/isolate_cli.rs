//! `ranktune tune --isolate` with candidates that really crash (the test op
//! `crashy`, built with the kernels' `crash-tactics` feature): a segfault,
//! an abort, a hang and an unbounded allocation are each one failed
//! candidate with its reason, and the tune completes and saves; without
//! `--isolate` the segfault kills the tune. Under `--strategy merge` a
//! candidate that segfaults on rank 1 only fails on every rank, and every
//! rank ends with the same choice.

#![cfg(target_os = "linux")]

use ranktune_cache::{CacheData, FileStore, Section, Store};
use ranktune_testkit::{Cli, Output, LAUNCHER_VARS};
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

/// The hang costs this much per rank: keep it short, but long enough for a
/// loaded machine to finish the healthy candidates' requests.
const TIMEOUT: &str = "3";
/// Two of the allocator's 64 MiB blocks.
const MEMORY: &str = "128";

fn ranktune(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let scrub = [
        "RANKTUNE_CACHE",
        "RANKTUNE_ISOLATE",
        "RANKTUNE_CANDIDATE_TIMEOUT",
        "RANKTUNE_CANDIDATE_MEMORY",
        "RANKTUNE_STRATEGY",
        "RANKTUNE_TEST_DIE_AT",
    ];
    Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .current_dir(dir)
        .args(args)
        .env_remove(LAUNCHER_VARS)
        .env_remove(scrub)
        .envs(env.to_vec())
        .limit(Duration::from_secs(120))
        .run()
}

fn load(cache: &Path) -> CacheData {
    FileStore::new(cache).load().unwrap().data
}

/// Every row's failure lines, by rank.
fn failures(report: &Value) -> Vec<Vec<String>> {
    report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["rows"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|row| row["failures"].as_array().unwrap().clone())
                .map(|f| f.as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

fn failure_of<'a>(lines: &'a [String], tactic: &str) -> &'a str {
    let prefix = format!("crashy {tactic}: ");
    lines
        .iter()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no failure of {tactic} in {lines:#?}"))
}

#[test]
fn each_crash_is_one_failed_candidate_with_its_reason_and_the_tune_saves() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["tune", "--json", "--ops", "crashy", "--max-tokens", "1", "--cache", "c.json"];
    let out = ranktune(
        dir.path(),
        &[&args[..], &["--isolate", "--candidate-timeout", TIMEOUT]].concat(),
        &[("RANKTUNE_CANDIDATE_MEMORY", MEMORY)],
    );
    let report = out.json();
    let lines = &failures(&report)[0];
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert_eq!(failure_of(lines, "segfault"), "crashed: SIGSEGV (signal 11)");
    assert!(failure_of(lines, "abort").starts_with("crashed: SIGABRT (signal 6)"), "{lines:#?}");
    assert_eq!(failure_of(lines, "hang"), "timed out after 3.0 s (limit 3.0 s)");
    assert_eq!(
        failure_of(lines, "alloc"),
        "ran out of memory: limit 128 MiB (memory allocation of 67108864 bytes failed)"
    );
    let row = &report["ranks"][0]["rows"][0];
    assert_eq!((row["source"].as_str(), row["candidates"].as_u64()), (Some("tuned"), Some(7)));
    // On rank 0 the rank-1 segfault runs, and is the fastest tactic of all;
    // a machine loaded enough to make its time a near-tie with a steady
    // one keeps the steady one (the tie band prefers the canonical first),
    // so the winner is one of those that ran, whatever the load.
    let winner = &row["tactic"];
    assert!(
        *winner == serde_json::json!({"segfault_on_rank": 1}) || winner.get("passes").is_some(),
        "{report:#}"
    );
    // A worker for the bucket, and a fresh one after each of the four crashes.
    assert_eq!(report["worker_starts"], 5, "{report:#}");
    // Saved, with every candidate's result and reason.
    let data = load(&dir.path().join("c.json"));
    let entries: Vec<_> = data.iter().collect();
    assert_eq!(entries.len(), 1);
    let errors: Vec<&str> =
        entries[0].2.candidates.iter().filter_map(|c| c.error.as_deref()).collect();
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert!(errors.contains(&"crashed: SIGSEGV (signal 11)"), "{errors:?}");
    let on_rank_1 = serde_json::json!({"segfault_on_rank": 1});
    let ran_here = entries[0].2.candidates.iter().find(|c| c.tactic == on_rank_1);
    assert!(ran_here.is_some_and(|c| c.error.is_none()), "{:?}", entries[0].2.candidates);
    // The table says the same, one line per failed candidate.
    let out = ranktune(
        dir.path(),
        &["tune", "--ops", "crashy", "--max-tokens", "2", "--cache", "t.json", "--isolate"],
        &[("RANKTUNE_CANDIDATE_TIMEOUT", TIMEOUT), ("RANKTUNE_CANDIDATE_MEMORY", MEMORY)],
    )
    .expect_success();
    let text = out.stdout_text();
    assert!(
        text.contains(
            "failed on rank 0 crashy 2x4096: crashy segfault: crashed: SIGSEGV (signal 11)"
        ),
        "{out}"
    );
    assert!(text.contains("isolated measuring: 10 worker processes started"), "{out}");
}

#[test]
fn without_isolate_the_segfault_kills_the_tune_and_nothing_is_saved() {
    let dir = tempfile::tempdir().unwrap();
    let out = ranktune(
        dir.path(),
        &["tune", "--ops", "crashy", "--max-tokens", "1", "--cache", "c.json"],
        &[],
    );
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{out}");
    let saved = std::fs::read(dir.path().join("c.json")).unwrap_or_default();
    assert!(saved.is_empty() || load(&dir.path().join("c.json")).is_empty(), "{out}");
}

#[test]
fn a_segfault_on_one_rank_fails_the_candidate_on_every_rank_in_lockstep() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("c.json");
    let out = ranktune(
        dir.path(),
        &[
            "tune",
            "--json",
            "--ranks",
            "3",
            "--strategy",
            "merge",
            "--ops",
            "crashy",
            "--max-tokens",
            "2",
            "--cache",
            "c.json",
            "--isolate",
            "--candidate-timeout",
            TIMEOUT,
            "--candidate-memory",
            MEMORY,
        ],
        &[],
    );
    let report = out.json();
    let ranks = report["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 3, "{report:#}");
    for r in ranks {
        // Every bucket agreed on: no rank waited out the others.
        assert_eq!((r["shared"].as_u64(), r["strategy_fallbacks"].as_u64()), (Some(2), Some(0)));
    }
    // The same choice on every rank, and not the tactic that crashed rank 1.
    let choice = |r: &Value| -> Vec<(String, String)> {
        r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| (row["runner"].as_str().unwrap().to_string(), row["tactic"].to_string()))
            .collect()
    };
    assert_eq!(choice(&ranks[0]), choice(&ranks[1]));
    assert_eq!(choice(&ranks[0]), choice(&ranks[2]));
    assert!(choice(&ranks[0]).iter().all(|(runner, _)| runner == "steady"), "{report:#}");
    for lines in failures(&report) {
        assert_eq!(lines.len(), 10, "5 failed candidates in each of 2 buckets: {lines:#?}");
        assert_eq!(
            failure_of(&lines, "segfault_on_rank(1)"),
            "rank 1: crashed: SIGSEGV (signal 11)"
        );
    }
    // One shared entry per bucket, the same choice as the reports'.
    let data = load(&cache);
    let shared = data.sections.get(&Section::Shared).expect("a shared section");
    assert_eq!(shared.len(), 2);
    for (key, entry) in shared {
        assert_eq!(key.runner, "steady", "{key:?}");
        let tactic = entry.tactic.to_string();
        assert!(choice(&ranks[0]).iter().any(|(_, t)| *t == tactic));
    }
}

#[test]
fn bad_isolation_settings_are_clear_errors_naming_the_flag_or_variable() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["tune", "--ops", "softmax", "--quick", "--max-tokens", "1"];
    /// Extra arguments, environment, what the error says.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 5] = [
        (
            &[],
            &[("RANKTUNE_ISOLATE", "maybe")],
            "RANKTUNE_ISOLATE=\"maybe\" is not an isolation mode; give off (or 0), fork (or 1)",
        ),
        (
            &["--isolate", "--candidate-timeout", "soon"],
            &[],
            "--candidate-timeout \"soon\" is not a number of seconds",
        ),
        (
            &["--isolate"],
            &[("RANKTUNE_CANDIDATE_TIMEOUT", "-1")],
            "RANKTUNE_CANDIDATE_TIMEOUT=\"-1\" is not a usable time;",
        ),
        (
            &["--isolate", "--candidate-memory", "0"],
            &[],
            "--candidate-memory \"0\" is not a usable number of MiB; give one from 1",
        ),
        (&["--candidate-memory", "512"], &[], "add --isolate"),
    ];
    for (extra, env, want) in cases {
        let out = ranktune(dir.path(), &[&base[..], extra].concat(), env);
        assert_eq!(out.status.code(), Some(2), "{out}");
        assert!(out.stderr_text().contains(want), "want {want:?}: {out}");
    }
    assert!(!dir.path().join("ranktune-cache.json").exists());
}

/// `RANKTUNE_ISOLATE` takes the values Python's `autotune` reads: `fork`
/// measures in workers, and so does `spawn` (Python's mode for processes
/// that hold a CUDA context; the command's CPU kernels are forked, and `-v`
/// says so); `off` does not.
#[test]
fn the_isolation_variable_takes_pythons_modes() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["tune", "--ops", "softmax", "--quick", "--max-tokens", "1", "--json", "-v"];
    for (mode, workers) in [("fork", true), ("spawn", true), ("off", false)] {
        let out = ranktune(dir.path(), &args, &[("RANKTUNE_ISOLATE", mode)]);
        assert!(out.status.success(), "{mode}: {}", out.stderr_text());
        let report = out.json();
        let started = report["worker_starts"].as_u64().unwrap_or(0);
        assert_eq!(started > 0, workers, "{mode}: {report:#}");
        let said = out.stderr_text().contains("RANKTUNE_ISOLATE=spawn: `ranktune tune` measures");
        assert_eq!(said, mode == "spawn", "{mode}: {}", out.stderr_text());
        std::fs::remove_file(dir.path().join("ranktune-cache.json")).unwrap();
    }
}
