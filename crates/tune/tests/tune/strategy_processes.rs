//! Tuning strategies across real processes over the store-based collective.
//!
//! Each test starts this test binary again as N child processes (the ignored
//! test `strategy_child`), one per rank, with `RANK`/`WORLD_SIZE`/
//! `RANKTUNE_JOB_ID` set as a launcher would, and `RANKTUNE_STRATEGY` /
//! `RANKTUNE_STRATEGY_TIMEOUT` as a user would. Each child resolves the same
//! buckets through a `Coordinator` over `collective::from_env`, with a
//! deterministic, rank-dependent timing model that alone would make the ranks
//! choose differently, and writes what it got to `<out>/rank<r>.json`.
//! With `RANKTUNE_TEST_WARM_UP=1` the ranks first meet in a barrier with a
//! long timeout, for tests whose short strategy timeout must not also cover
//! the processes' start.
//! A job that outlives its limit is killed and fails the test as a hang.
//!
//! Every test runs twice: with the ranks meeting in a shared directory (the
//! file store), and on a real Redis server (`RANKTUNE_COLLECTIVE=redis://…`)
//! with each rank in its own working and temporary directory, so nothing
//! reaches another rank through the filesystem.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ranktune_cache::Stats;
use ranktune_collective as collective;
use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_testkit::{await_kill, child_var, test_path, write_result, JobSpec, RankJob};
use ranktune_tune::strategy::{timeout_from_env, BucketCtx, Coordinator, Measured, Strategy};
use serde_json::{json, Value};

const JOB_LIMIT: Duration = Duration::from_secs(120);
const CANDS: [(u32, u32); 6] = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)];
const BUCKETS: [u64; 4] = [16, 32, 64, 128];

// ---------------------------------------------------------------- child side

/// Candidates 1, 3 and 4 are near-tied; each rank favours another one by 4%.
/// The job's salt shifts which candidate is clearly best (for the two-jobs test).
fn timing(salt: &str, rank: u32, tokens: u64, i: usize) -> f64 {
    let mut base = [150.0, 100.0, 130.0, 101.0, 102.0, 170.0];
    if salt == "b" {
        base[5] = 60.0;
    }
    let favoured = [1, 3, 4][rank as usize % 3];
    let scale = tokens as f64 / 16.0;
    base[i] * scale * (1.0 + 0.001 * f64::from(rank)) * if i == favoured { 0.96 } else { 1.0 }
}

#[test]
#[ignore = "child process of the other tests; selected by RANKTUNE_TEST_OUT"]
fn strategy_child() {
    let out = child_var("RANKTUNE_TEST_OUT");
    if out.is_empty() {
        return;
    }
    let out = PathBuf::from(out);
    let info = RankInfo::detect(&RankOverrides::default()).unwrap();
    let dir = PathBuf::from(child_var("RANKTUNE_TEST_DIR"));
    let strategy = Strategy::from_env().unwrap().unwrap_or_default();
    let mut coll = collective::from_env(&info, &dir).unwrap();
    if child_var("RANKTUNE_TEST_WARM_UP") == "1" {
        // Freshly started debug processes on a loaded machine can start
        // seconds apart; meet once with a long timeout so that the short
        // strategy timeout only has to cover the tuning itself.
        coll.barrier("warm up", JOB_LIMIT).unwrap();
    }
    let mut coord = Coordinator::new(coll).with_timeout(timeout_from_env().unwrap());
    let rank = info.rank;
    let salt = child_var("RANKTUNE_TEST_SALT");
    let hit_ranks: Vec<u32> =
        child_var("RANKTUNE_TEST_HIT_RANKS").split(',').filter_map(|s| s.parse().ok()).collect();
    let kill: Option<(u32, u64)> = child_var("RANKTUNE_TEST_KILL")
        .split_once(':')
        .map(|(r, b)| (r.parse().unwrap(), b.parse().unwrap()));
    let mut buckets = Vec::new();
    for tokens in BUCKETS {
        let bucket = vec![vec![tokens, 512]];
        let ctx = BucketCtx {
            op: "gemm",
            bucket: &bucket,
            checksum: "sum",
            candidates: &CANDS,
            local_hit: hit_ranks.contains(&rank).then_some((0, 2)),
            tie_tolerance: 0.03,
        };
        let start = Instant::now();
        let mut measure = |pos: &[usize]| -> Vec<Measured> {
            if kill == Some((rank, tokens)) {
                // Ask the parent for SIGKILL, mid-tuning, and wait for it.
                await_kill(&out, rank);
            }
            pos.iter()
                .map(|&i| {
                    let m = timing(&salt, rank, tokens, i);
                    Ok(Stats { min_us: m, median_us: m, p90_us: m, spread: 0.0, samples: 3 })
                })
                .collect()
        };
        let r = coord.resolve(strategy, &ctx, &mut measure);
        buckets.push(json!({
            "kind": format!("{:?}", r.kind),
            "winner": r.winner.map(|w| CANDS[w]),
            "medians": r.results.iter().map(|m| m.as_ref().ok().map(|s| s.median_us)).collect::<Vec<_>>(),
            "created": r.created_unix,
            "measured_here": r.measured_here,
            "fallback": r.fallback.as_ref().map(|f| f.reason.clone()),
            "blamed": r.fallback.as_ref().map(|f| f.ranks.clone()),
            "seconds": start.elapsed().as_secs_f64(),
        }));
    }
    write_result(&out, rank, &json!({ "buckets": buckets }));
}

// --------------------------------------------------------------- parent side

/// Where the ranks of a job meet.
#[derive(Clone, Copy)]
enum Meet<'a> {
    /// A directory they share (the test's temporary directory).
    Dir,
    /// The Redis server at this URL; each rank gets its own directories.
    Redis(&'a str),
}

/// Starts `world` ranks of `strategy_child` with the variables `vars` (see
/// `JobSpec` for the rest of what they are told), meeting as `meet` says.
/// Over Redis, rank `r` runs in `<out>/rank<r>-home` with its own `TMPDIR`
/// and `RANKTUNE_TEST_DIR` there.
fn spawn_job(
    meet: Meet,
    world: u32,
    dir: &Path,
    job_id: &str,
    out: &Path,
    vars: &[(&str, &str)],
) -> RankJob {
    let test = &test_path(module_path!(), "strategy_child");
    match meet {
        Meet::Dir => JobSpec { test, world, job_id, dir, out, vars, limit: JOB_LIMIT }.start(),
        Meet::Redis(url) => {
            let mut all = vec![("RANKTUNE_COLLECTIVE", url)];
            all.extend_from_slice(vars);
            let spec = JobSpec { test, world, job_id, dir, out, vars: &all, limit: JOB_LIMIT };
            spec.start_each(|rank, cmd| {
                let home = out.join(format!("rank{rank}-home"));
                std::fs::create_dir_all(home.join("tmp")).unwrap();
                cmd.current_dir(&home)
                    .env("RANKTUNE_TEST_DIR", &home)
                    .env("TMPDIR", home.join("tmp"));
            })
        }
    }
}

/// Over Redis: the ranks' own directories hold nothing but empty temporary directories.
fn assert_nothing_on_disk(meet: Meet, out: &Path, world: u32) {
    if let Meet::Redis(_) = meet {
        for rank in 0..world {
            let home = out.join(format!("rank{rank}-home"));
            let mut found = Vec::new();
            let mut dirs = vec![home.clone()];
            while let Some(d) = dirs.pop() {
                for e in std::fs::read_dir(&d).unwrap().flatten() {
                    if e.path().is_dir() {
                        dirs.push(e.path());
                    } else {
                        found.push(e.path());
                    }
                }
            }
            assert!(found.is_empty(), "rank {rank} wrote {found:?}");
        }
    }
}

/// Runs `test` with the ranks meeting in a directory.
fn over_dir(test: fn(Meet, &Path)) {
    let tmp = tempfile::tempdir().unwrap();
    test(Meet::Dir, tmp.path());
}

/// Runs `test` with the ranks meeting on a fresh Redis server (skipped loudly
/// outside CI when none is installed).
fn over_redis(test: fn(Meet, &Path)) {
    let Some(server) = ranktune_testkit::redis::RedisServer::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("{}?prefix=strategy", server.url(0));
    test(Meet::Redis(&url), tmp.path());
}

/// The fields that must be identical on every rank for a shared bucket.
fn shared_view(b: &Value) -> Value {
    json!([b["kind"], b["winner"], b["medians"], b["created"]])
}

#[test]
fn every_collective_strategy_gives_identical_choices_on_four_processes_in_a_directory() {
    over_dir(every_collective_strategy_gives_identical_choices_on_four_processes);
}

#[test]
fn every_collective_strategy_gives_identical_choices_on_four_processes_over_redis() {
    over_redis(every_collective_strategy_gives_identical_choices_on_four_processes);
}

fn every_collective_strategy_gives_identical_choices_on_four_processes(meet: Meet, tmp: &Path) {
    for strategy in ["broadcast", "merge", "parallel"] {
        let out = tmp.join(format!("out-{strategy}"));
        let vars = [("RANKTUNE_STRATEGY", strategy), ("RANKTUNE_STRATEGY_TIMEOUT", "60")];
        let mut job = spawn_job(meet, 4, tmp, &format!("job-{strategy}"), &out, &vars);
        job.wait();
        assert_nothing_on_disk(meet, &out, 4);
        let results = job.all_results("buckets");
        for (b, first) in results[0].iter().enumerate() {
            assert_eq!(first["kind"], "Shared", "{strategy}: {first}");
            assert!(first["winner"].is_array(), "{strategy}: {first}");
            for (rank, other) in results.iter().enumerate() {
                assert_eq!(shared_view(&other[b]), shared_view(first), "{strategy} rank {rank}");
            }
            let measured: Vec<u64> =
                results.iter().map(|r| r[b]["measured_here"].as_u64().unwrap()).collect();
            match strategy {
                "broadcast" => assert_eq!(measured, [6, 0, 0, 0]),
                "merge" => assert_eq!(measured, [6; 4]),
                // Round-robin first; later every rank also measures the
                // previous winner (its leader); every rank busy.
                _ => {
                    let total = measured.iter().sum::<u64>();
                    assert!((6..=9).contains(&total), "{measured:?}");
                    assert!(measured.iter().all(|&m| m >= 1), "{measured:?}");
                }
            }
        }
    }
    // The control: independent ranks diverge on the same timing model.
    let out = tmp.join("out-independent");
    let mut job = spawn_job(meet, 4, tmp, "job-ind", &out, &[("RANKTUNE_STRATEGY", "independent")]);
    job.wait();
    let results = job.all_results("buckets");
    assert!(results.iter().any(|r| r[0]["winner"] != results[0][0]["winner"]));
    assert!(results.iter().all(|r| r[0]["kind"] == "Local" && r[0]["fallback"].is_null()));
}

#[test]
fn a_rank_killed_mid_tuning_does_not_hang_the_survivors_in_a_directory() {
    over_dir(a_rank_killed_mid_tuning_does_not_hang_the_survivors);
}

#[test]
fn a_rank_killed_mid_tuning_does_not_hang_the_survivors_over_redis() {
    over_redis(a_rank_killed_mid_tuning_does_not_hang_the_survivors);
}

/// Rank 2 is killed while measuring bucket 32; the survivors must give up
/// on it after the strategy timeout, blame exactly rank 2, and tune the rest
/// alone. The ranks first meet in a warm-up barrier with a long timeout
/// (`RANKTUNE_TEST_WARM_UP`), so a slow start of one process cannot make
/// bucket 16 fall back or put a survivor among the blamed; the strategy
/// timeout (8 s, which every survivor waits once) then only has to cover a
/// survivor stalling between two calls, while rank 2 never arrives at all.
fn a_rank_killed_mid_tuning_does_not_hang_the_survivors(meet: Meet, tmp: &Path) {
    let vars = [
        ("RANKTUNE_STRATEGY", "merge"),
        ("RANKTUNE_STRATEGY_TIMEOUT", "8"),
        ("RANKTUNE_TEST_WARM_UP", "1"),
        ("RANKTUNE_TEST_KILL", "2:32"),
    ];
    let mut job = spawn_job(meet, 4, tmp, "job-kill", &tmp.join("out"), &vars);
    job.wait();
    let results = job.results("buckets");
    assert!(results[2].is_none(), "rank 2 was killed");
    for rank in [0, 1, 3] {
        let b = results[rank].clone().unwrap_or_else(|| panic!("rank {rank}: {}", job.stderr()));
        assert_eq!(b[0]["kind"], "Shared", "before the kill: {}", b[0]);
        assert_eq!(b[1]["kind"], "Local", "{}", b[1]);
        assert_eq!(b[1]["blamed"], json!([2]), "{}", b[1]);
        let why = b[1]["fallback"].as_str().unwrap();
        assert!(
            why.contains("gemm 32x512")
                && why.contains("[2] did not arrive")
                && why.contains("independently"),
            "{why}"
        );
        assert!(b[1]["winner"].is_array());
        for later in &b[2..] {
            assert_eq!(later["kind"], "Local");
            assert!(later["fallback"].as_str().unwrap().contains("earlier failure"), "{later}");
        }
    }
}

#[test]
fn mixed_hit_and_miss_across_processes_ends_with_one_choice_in_a_directory() {
    over_dir(mixed_hit_and_miss_across_processes_ends_with_one_choice);
}

#[test]
fn mixed_hit_and_miss_across_processes_ends_with_one_choice_over_redis() {
    over_redis(mixed_hit_and_miss_across_processes_ends_with_one_choice);
}

fn mixed_hit_and_miss_across_processes_ends_with_one_choice(meet: Meet, tmp: &Path) {
    let vars = [
        ("RANKTUNE_STRATEGY", "parallel"),
        ("RANKTUNE_STRATEGY_TIMEOUT", "60"),
        ("RANKTUNE_TEST_HIT_RANKS", "0,2"),
    ];
    let mut job = spawn_job(meet, 4, tmp, "job-mixed", &tmp.join("out"), &vars);
    job.wait();
    let results = job.all_results("buckets");
    for (b, first) in results[0].iter().enumerate() {
        assert_eq!(first["kind"], "Shared", "{first}");
        for other in &results {
            assert_eq!(shared_view(&other[b]), shared_view(first));
        }
    }
    // Every rank having it cached with the same choice is a hit, no measuring.
    let vars = [
        ("RANKTUNE_STRATEGY", "parallel"),
        ("RANKTUNE_STRATEGY_TIMEOUT", "60"),
        ("RANKTUNE_TEST_HIT_RANKS", "0,1,2,3"),
    ];
    let mut job = spawn_job(meet, 4, tmp, "job-allhit", &tmp.join("out2"), &vars);
    job.wait();
    for r in job.all_results("buckets") {
        assert!(r.iter().all(|b| b["kind"] == "Hit" && b["measured_here"] == 0), "{r:?}");
    }
}

#[test]
fn two_concurrent_jobs_in_one_directory_do_not_mix() {
    over_dir(two_concurrent_jobs_do_not_mix);
}

#[test]
fn two_concurrent_jobs_on_one_redis_server_do_not_mix() {
    over_redis(two_concurrent_jobs_do_not_mix);
}

fn two_concurrent_jobs_do_not_mix(meet: Meet, tmp: &Path) {
    let a_vars = [("RANKTUNE_STRATEGY", "merge"), ("RANKTUNE_TEST_SALT", "a")];
    let b_vars = [("RANKTUNE_STRATEGY", "merge"), ("RANKTUNE_TEST_SALT", "b")];
    let mut a = spawn_job(meet, 2, tmp, "job-a", &tmp.join("out-a"), &a_vars);
    let mut b = spawn_job(meet, 2, tmp, "job-b", &tmp.join("out-b"), &b_vars);
    a.wait();
    b.wait();
    let (ra, rb) = (a.all_results("buckets"), b.all_results("buckets"));
    for bucket in 0..BUCKETS.len() {
        for r in 0..2 {
            assert_eq!(ra[r][bucket]["kind"], "Shared");
            assert_eq!(rb[r][bucket]["kind"], "Shared");
            assert_eq!(shared_view(&ra[r][bucket]), shared_view(&ra[0][bucket]));
            assert_eq!(shared_view(&rb[r][bucket]), shared_view(&rb[0][bucket]));
        }
        // Job b's timing model makes candidate 5 the clear winner; job a's never does.
        assert_eq!(rb[0][bucket]["winner"], json!([1, 2]));
        assert_ne!(ra[0][bucket]["winner"], json!([1, 2]));
    }
}
