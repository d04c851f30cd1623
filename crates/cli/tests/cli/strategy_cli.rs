//! End to end: `ranktune tune --ranks 4 --strategy S` with real rank
//! processes, real kernels and one cache file.

use ranktune_cache::{CacheData, FileStore, Section, Store};
use ranktune_testkit::{Cli, Output, LAUNCHER_VARS};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Small enough to keep the suite fast: buckets 1..16 of every op.
const SMALL: [&str; 3] = ["--quick", "--max-tokens", "16"];

/// Runs ranktune in `dir` as a user would outside any launcher, with `env`.
fn ranktune(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let scrub = ["RANKTUNE_CACHE", "RANKTUNE_STRATEGY_TIMEOUT", "RANKTUNE_TEST_DIE_AT"];
    let cli = Cli::new(env!("CARGO_BIN_EXE_ranktune")).current_dir(dir).args(args);
    cli.env_remove(LAUNCHER_VARS).env_remove(scrub).envs(env.to_vec()).run()
}

fn tune(dir: &Path, cache: &Path, strategy: &str, ranks: &str, extra: &[&str]) -> Output {
    let mut args = vec!["tune", "--json", "--ranks", ranks, "--strategy", strategy];
    args.extend(["--cache", cache.to_str().unwrap()]);
    args.extend(SMALL);
    args.extend(extra);
    ranktune(dir, &args, &[])
}

/// Per rank: (op, bucket) → (runner, tactic, source, section).
fn rows(report: &Value) -> Vec<BTreeMap<String, (String, String, String, String)>> {
    report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|row| {
                    (
                        format!("{} {}", row["op"].as_str().unwrap(), row["bucket"]),
                        (
                            row["runner"].as_str().unwrap().to_string(),
                            row["tactic"].to_string(),
                            row["source"].as_str().unwrap().to_string(),
                            row["section"].as_str().unwrap_or("").to_string(),
                        ),
                    )
                })
                .collect()
        })
        .collect()
}

fn load(cache: &Path) -> CacheData {
    FileStore::new(cache).load().unwrap().data
}

fn choices(
    data: &CacheData,
    section: Section,
) -> BTreeMap<(String, Vec<Vec<ranktune_cache::Dim>>), String> {
    data.sections
        .get(&section)
        .map(|m| {
            m.iter()
                .map(|(k, e)| {
                    ((k.op.clone(), k.bucket.clone()), format!("{} {}", k.runner, e.tactic))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_collective_strategy_gives_one_shared_choice_per_bucket() {
    let dir = tempfile::tempdir().unwrap();
    for strategy in ["broadcast", "merge", "parallel"] {
        let cache = dir.path().join(format!("{strategy}.json"));
        let report = tune(dir.path(), &cache, strategy, "4", &[]).json();
        let per_rank = rows(&report);
        assert_eq!(per_rank.len(), 4);
        assert_eq!(per_rank[0].len(), 15, "5 buckets × 3 ops: {report}");
        for (rank, r) in per_rank.iter().enumerate() {
            for (k, (runner, tactic, source, section)) in r {
                let (r0, t0, _, _) = &per_rank[0][k];
                assert_eq!((runner, tactic), (r0, t0), "{strategy} rank {rank} {k}");
                assert_eq!((source.as_str(), section.as_str()), ("tuned", "shared"), "{k}");
            }
        }
        // Stored once, in the shared section, one choice per bucket.
        let data = load(&cache);
        assert_eq!(choices(&data, Section::Shared).len(), 15, "{strategy}");
        assert!(data.sections.keys().all(|s| *s == Section::Shared), "{strategy}");
        let check = ranktune(dir.path(), &["cache", "check", cache.to_str().unwrap()], &[]);
        assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));

        // The next run agrees on the hits and measures nothing.
        let again = tune(dir.path(), &cache, strategy, "4", &[]).json();
        assert_eq!((again["tuned"].as_u64(), again["hits"].as_u64()), (Some(0), Some(60)));
    }
}

#[test]
fn mixed_hits_and_misses_across_ranks_end_with_one_choice() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    // Ranks 0 and 1 tune independently first: they have hits in their own
    // sections, ranks 2 and 3 have nothing.
    tune(dir.path(), &cache, "independent", "2", &["--ops", "softmax,rmsnorm"]).json();
    let start = Instant::now();
    let report = tune(dir.path(), &cache, "merge", "4", &["--ops", "softmax,rmsnorm"]).json();
    assert!(start.elapsed() < Duration::from_secs(120));
    let per_rank = rows(&report);
    for r in &per_rank {
        assert_eq!(r.len(), 10);
        for (k, (runner, tactic, source, section)) in r {
            let (r0, t0, _, _) = &per_rank[0][k];
            assert_eq!((runner, tactic), (r0, t0), "{k}");
            assert_eq!((source.as_str(), section.as_str()), ("tuned", "shared"), "{k}");
        }
    }
    assert_eq!(choices(&load(&cache), Section::Shared).len(), 10);
}

#[test]
fn a_rank_dying_mid_tuning_leaves_the_survivors_finishing_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let start = Instant::now();
    let mut args = vec!["tune", "--ranks", "4", "--strategy", "merge", "--ops", "rmsnorm"];
    args.extend(["--cache", cache.to_str().unwrap()]);
    args.extend(SMALL);
    // Test-only hook: rank 2 aborts just before its third bucket. The
    // strategy timeout bounds every collective call, the first one too, so it
    // must cover the four ranks starting apart and measuring real kernels on
    // a loaded 2-core machine (well under a second each when all goes well):
    // 10 s, which the survivors wait once for the dead rank. Rank 2 never
    // arrives, so it is blamed however long the timeout is.
    let out = ranktune(
        dir.path(),
        &args,
        &[("RANKTUNE_TEST_DIE_AT", "2:2"), ("RANKTUNE_STRATEGY_TIMEOUT", "10")],
    );
    assert!(start.elapsed() < Duration::from_secs(120), "took {:?}", start.elapsed());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rank 2 failed"), "{err}");
    for rank in [0, 1, 3] {
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("[rank {rank}]")) && l.contains("did not arrive"))
            .unwrap_or_else(|| panic!("rank {rank} says nothing about rank 2:\n{err}"));
        assert!(line.contains("rank(s) [2]") && line.contains("rmsnorm"), "{line}");
        assert!(line.contains("independently"), "{line}");
    }
    // The survivors saved: two buckets shared, the rest in their own sections.
    let data = load(&cache);
    assert_eq!(choices(&data, Section::Shared).len(), 2, "{:?}", data.sections.keys());
    for rank in [0, 1, 3] {
        assert_eq!(choices(&data, Section::Rank(rank)).len(), 3, "rank {rank}");
    }
    assert!(choices(&data, Section::Rank(2)).is_empty());
}

#[test]
fn two_jobs_sharing_a_cache_directory_do_not_mix() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let spawn = |cache: &Path, ops: &str| {
        Cli::new(env!("CARGO_BIN_EXE_ranktune"))
            .current_dir(dir.path())
            .args(["tune", "--json", "--ranks", "2", "--strategy", "parallel", "--ops", ops])
            .args(["--cache", cache.to_str().unwrap()])
            .args(SMALL)
            .env_remove(["RANKTUNE_JOB_ID"])
            .spawn()
    };
    let (ja, jb) = (spawn(&a, "softmax"), spawn(&b, "rmsnorm"));
    let (oa, ob) = (ja.wait(), jb.wait());
    for (out, op) in [(&oa, "softmax"), (&ob, "rmsnorm")] {
        let report = out.json();
        for r in rows(&report) {
            assert_eq!(r.len(), 5);
            assert!(r.keys().all(|k| k.starts_with(op)), "{r:?}");
            assert!(r.values().all(|v| v.3 == "shared"), "{r:?}");
        }
    }
}

#[test]
fn cache_check_reports_ranks_that_chose_differently() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    tune(dir.path(), &cache, "independent", "2", &["--ops", "rmsnorm"]).json();
    // Make rank 1 disagree with rank 0 on one bucket, as noisy ranks do.
    let mut data = load(&cache);
    let r1 = data.sections.get_mut(&Section::Rank(1)).unwrap();
    let (key, entry) = r1.iter().next().map(|(k, e)| (k.clone(), e.clone())).unwrap();
    r1.clear();
    let mut other = entry.clone();
    other.tactic = serde_json::json!("divergent-tactic");
    data.insert(Section::Rank(1), key.clone(), other);
    std::fs::remove_file(&cache).unwrap();
    FileStore::new(&cache).save(&data).unwrap();
    let check = ranktune(dir.path(), &["cache", "check", cache.to_str().unwrap()], &[]);
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success(), "{text}");
    assert!(text.contains("ranks disagree on rmsnorm"), "{text}");
    assert!(text.contains("divergent-tactic"), "{text}");
}

#[test]
fn a_bad_strategy_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = ranktune(dir.path(), &["tune", "--strategy", "fastest"], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("independent, broadcast, merge or parallel"), "{err}");
}

/// The totals line of a table: (tuned, hits, misses).
fn totals(table: &str) -> Option<(u64, u64, u64)> {
    let line = table.lines().find(|l| l.starts_with("tuned "))?;
    let num = |after: &str| -> Option<u64> {
        let rest = &line[line.find(after)? + after.len()..];
        rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    };
    Some((num("tuned ")?, num("cache hits ")?, num("misses ")?))
}

#[test]
fn the_quick_start_agrees_by_default_and_passes_its_health_check() {
    let dir = tempfile::tempdir().unwrap();
    let out = ranktune(dir.path(), &["tune", "--ranks", "2", "--quick"], &[]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{table}{}", String::from_utf8_lossy(&out.stderr));
    assert!(table.contains("strategy parallel:"), "{table}");
    assert!(!table.contains("warning"), "{table}");
    let (tuned, hits, misses) = totals(&table).expect("a totals line");
    assert_eq!((tuned, hits), (misses, 0), "{table}");
    let data = load(&dir.path().join("ranktune-cache.json"));
    assert!(data.sections.keys().all(|s| *s == Section::Shared), "{:?}", data.sections.keys());
    let check = ranktune(dir.path(), &["cache", "check", "ranktune-cache.json"], &[]);
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{text}");
    assert!(text.contains("healthy"), "{text}");
}

/// Rewrites rank 1's entries of `op` to a valid tactic (one it measured, of
/// the same runner) other than rank 0's choice wherever there is one, as
/// noisy ranks tuned alone do; returns how many buckets now differ.
fn plant_disagreements(cache: &Path, op: &str) -> usize {
    let mut data = load(cache);
    let rank0 = data.sections.get(&Section::Rank(0)).unwrap().clone();
    for (key, entry) in data.sections.get_mut(&Section::Rank(1)).unwrap().iter_mut() {
        let Some(theirs) = rank0.get(key).filter(|_| key.op == op) else { continue };
        let other = entry.candidates.iter().find(|c| {
            c.runner_index == entry.runner_index
                && c.tactic != theirs.tactic
                && c.error.is_none()
                && c.stats.is_some()
        });
        if let Some(c) = other {
            entry.tactic = c.tactic.clone();
        }
    }
    std::fs::remove_file(cache).unwrap();
    FileStore::new(cache).save(&data).unwrap();
    let (a, b) = (choices(&data, Section::Rank(0)), choices(&data, Section::Rank(1)));
    a.iter().filter(|(k, v)| k.0 == op && b.get(*k) != Some(*v)).count()
}

#[test]
fn ranks_that_disagree_are_told_the_fix_and_a_collective_run_supersedes_them() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let c = cache.to_str().unwrap();
    let small = ["--quick", "--max-tokens", "16"];
    // An old independent cache: rmsnorm on 2 ranks, disagreeing, and
    // softmax of an earlier one-rank job (which must survive untouched).
    for (op, ranks) in [("rmsnorm", "2"), ("softmax", "1")] {
        let mut args = vec!["tune", "--ranks", ranks, "--strategy", "independent", "--ops", op];
        args.extend(small);
        args.extend(["--cache", c]);
        assert!(ranktune(dir.path(), &args, &[]).status.success());
    }
    let planted = plant_disagreements(&cache, "rmsnorm");
    assert!(planted >= 2, "only {planted} buckets could be made to differ");
    let softmax_before: Vec<_> = (0..2).map(|r| choices(&load(&cache), Section::Rank(r))).collect();

    // Tuning independently again hits the cache on every rank, and says
    // that the ranks disagree, with the command that fixes it.
    let mut args = vec!["tune", "--ranks", "2", "--strategy", "independent", "--ops", "rmsnorm"];
    args.extend(small);
    args.extend(["--cache", c]);
    let out = ranktune(dir.path(), &args, &[]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{table}");
    let want = format!("the ranks chose differently on {planted} of 5 buckets");
    assert!(table.contains(&want), "{table}");
    let fix = table
        .lines()
        .find_map(|l| l.strip_prefix("  ranktune "))
        .unwrap_or_else(|| panic!("no command in:\n{table}"));
    assert_eq!(
        fix,
        format!(
            "tune --ranks 2 --quick --max-tokens 16 --ops rmsnorm --strategy parallel --cache {c}"
        )
    );
    let check = ranktune(dir.path(), &["cache", "check", c], &[]);
    assert!(!check.status.success());
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("ranks disagree on rmsnorm")).count(),
        planted
    );

    // Running that command: the differing buckets are tuned together, their
    // per-rank entries are superseded, the counters add up, check passes.
    let fix_args: Vec<&str> = fix.split(' ').collect();
    let out = ranktune(dir.path(), &fix_args, &[]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{table}");
    assert!(!table.contains("warning"), "{table}");
    let (tuned, hits, misses) = totals(&table).expect("a totals line");
    assert_eq!(tuned, misses, "{table}");
    assert_eq!(tuned, 2 * planted as u64, "the differing buckets, on both ranks: {table}");
    assert_eq!(hits + misses, 2 * 5, "one lookup per bucket and rank: {table}");
    let want = format!("strategy parallel: {tuned} buckets tuned together");
    assert!(table.contains(&want), "{table}");
    let check = ranktune(dir.path(), &["cache", "check", c], &[]);
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{text}");
    let data = load(&cache);
    let shared = choices(&data, Section::Shared);
    assert_eq!(shared.len(), planted, "{shared:?}");
    for r in 0..2 {
        let mine = choices(&data, Section::Rank(r));
        assert!(shared.keys().all(|k| !mine.contains_key(k)), "rank {r} keeps a superseded entry");
        // Nothing else was lost: softmax and the agreeing rmsnorm buckets stay.
        let softmax: BTreeMap<_, _> = mine
            .iter()
            .filter(|(k, _)| k.0 == "softmax")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let before: BTreeMap<_, _> = softmax_before[r as usize]
            .iter()
            .filter(|(k, _)| k.0 == "softmax")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(softmax, before);
        assert_eq!(mine.len(), [10, 5][r as usize] - planted);
    }
}

#[test]
fn parallel_tuning_meets_on_redis_with_a_file_cache_and_never_prints_the_password() {
    let Some(server) =
        ranktune_testkit::redis::RedisServer::start_with(&["--requirepass", "s3cret"])
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.json");
    let url = format!("redis://:s3cret@127.0.0.1:{}/0?prefix=cli", server.port());
    let mut args = vec!["tune", "--json", "--ranks", "4", "--strategy", "parallel"];
    args.extend(["--cache", cache.to_str().unwrap()]);
    args.extend(SMALL);
    let out = ranktune(dir.path(), &args, &[("RANKTUNE_COLLECTIVE", url.as_str())]);
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains("s3cret"), "{text}");
    let report = out.json();
    let per_rank = rows(&report);
    assert_eq!(per_rank.len(), 4);
    assert_eq!(per_rank[0].len(), 15, "{report}");
    for (rank, r) in per_rank.iter().enumerate() {
        for (k, (runner, tactic, source, section)) in r {
            let (r0, t0, _, _) = &per_rank[0][k];
            assert_eq!((runner, tactic), (r0, t0), "rank {rank} {k}");
            assert_eq!((source.as_str(), section.as_str()), ("tuned", "shared"), "{k}");
        }
    }
    assert_eq!(choices(&load(&cache), Section::Shared).len(), 15);
    // The ranks met on the server, not in the cache's directory.
    assert!(!dir.path().join(ranktune_collective::NAMESPACE_DIR).exists());
    let check = ranktune(dir.path(), &["cache", "check", cache.to_str().unwrap()], &[]);
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));

    // A wrong password: a clear error at once, naming the server without the password.
    let bad = format!("redis://:wrong-pw@127.0.0.1:{}/0", server.port());
    let start = Instant::now();
    let out = ranktune(dir.path(), &args, &[("RANKTUNE_COLLECTIVE", bad.as_str())]);
    assert!(start.elapsed() < Duration::from_secs(60), "took {:?}", start.elapsed());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("wrong-pw"), "{err}");
    assert!(err.contains(&format!("redis://:***@127.0.0.1:{}/0", server.port())), "{err}");
}
