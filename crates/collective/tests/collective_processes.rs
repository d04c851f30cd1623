//! The store-based collective with real processes.
//!
//! Each test starts this test binary again as N child processes (the ignored
//! test `collective_child`, selected by `RANKTUNE_TEST_SCENARIO`), one per
//! rank, with `RANK`/`WORLD_SIZE`/`RANKTUNE_JOB_ID` set as a launcher would.
//! Children pick their collective with `collective::from_env`, run a
//! scenario, and write what every call returned to `<out>/rank<r>.json`; the
//! parent compares. A child that does not finish in time fails the test as a
//! hang (after being killed), never blocks the suite.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ranktune_collective as collective;
use ranktune_collective::{Collective, CollectiveError};
use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_testkit::{await_kill, child_var, child_var_parsed, write_result, JobSpec, RankJob};
use serde_json::{json, Value};

/// Success paths on a loaded 2-core machine: generous.
const LONG: Duration = Duration::from_secs(60);
/// Where a timeout is the expected outcome: short, but long enough that the
/// ranks that do arrive (released together by a barrier with `LONG` just
/// before) all get there within it even when one stalls for seconds on a
/// loaded 2-core machine; the ranks it must name never arrive at all.
const SHORT: Duration = Duration::from_secs(8);
/// A whole job must end within this, or it is a hang.
const JOB_LIMIT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------- child side

/// What one call returned, as JSON.
fn outcome<T>(r: Result<T, CollectiveError>, show: impl FnOnce(T) -> Value) -> Value {
    match r {
        Ok(v) => json!({ "ok": show(v) }),
        Err(e) => {
            let variant = match &e {
                CollectiveError::Timeout { .. } => "Timeout",
                CollectiveError::Mismatch { .. } => "Mismatch",
                CollectiveError::Abandoned { .. } => "Abandoned",
                _ => "Other",
            };
            let waited = match &e {
                CollectiveError::Timeout { waited, .. } => waited.as_secs_f64(),
                _ => 0.0,
            };
            json!({ "err": { "variant": variant, "ranks": e.ranks(), "waited": waited, "text": e.to_string() } })
        }
    }
}

/// Payloads as text: the part before `#` (the padding after it only adds size), and the length.
fn show(payloads: Vec<Vec<u8>>) -> Value {
    payloads
        .iter()
        .map(|p| {
            let text = String::from_utf8_lossy(p);
            format!("{}|{}", text.split('#').next().unwrap_or(""), p.len())
        })
        .collect()
}

fn label(job: &str, salt: &str, what: &str) -> String {
    format!("{job}/{salt}/{what}")
}

/// `rounds` all_gather/broadcast/barrier rounds, then one 1 MiB all_gather.
fn rounds(c: &mut dyn Collective, calls: &mut Vec<Value>, rounds: u32) {
    let (r, w) = (c.rank(), c.world_size());
    let (job, salt) = (child_var("RANKTUNE_JOB_ID"), child_var("RANKTUNE_TEST_SALT"));
    for i in 0..rounds {
        let padding = ".".repeat(((r + 1) * (i + 1) * 37) as usize);
        let data = format!("{}#{padding}", label(&job, &salt, &format!("r{r} i{i}")));
        let tag = format!("gemm [[{i},512],[512,512]] gather");
        calls.push(outcome(c.all_gather(&tag, data.as_bytes(), LONG), show));
        let root = i % w;
        let mine = label(&job, &salt, &format!("root{root} i{i}"));
        let data = (r == root).then_some(mine.as_bytes());
        let got = c.broadcast(&format!("bcast {i}"), root, data, LONG);
        calls.push(outcome(got, |p| show(vec![p])));
        calls.push(outcome(c.barrier(&format!("barrier {i}"), LONG), |()| json!("barrier")));
    }
    let big = format!("{}#{}", label(&job, &salt, &format!("big r{r}")), "x".repeat(1 << 20));
    calls.push(outcome(c.all_gather("big", big.as_bytes(), LONG), show));
}

#[test]
#[ignore = "child process of the other tests; selected by RANKTUNE_TEST_SCENARIO"]
fn collective_child() {
    let scenario = child_var("RANKTUNE_TEST_SCENARIO");
    if scenario.is_empty() {
        return;
    }
    let info = RankInfo::detect(&RankOverrides::default()).unwrap();
    let dir = PathBuf::from(child_var("RANKTUNE_TEST_DIR"));
    let out = PathBuf::from(child_var("RANKTUNE_TEST_OUT"));
    let mut c = collective::from_env(&info, &dir).unwrap();
    let r = info.rank;
    let mut calls = Vec::new();
    match scenario.as_str() {
        "rounds" => rounds(c.as_mut(), &mut calls, 8),
        "die" => {
            // Everyone completes some rounds; then one rank exits early and
            // one is killed by the parent while the others wait for them.
            rounds(c.as_mut(), &mut calls, 2);
            // Every rank leaves this barrier at about the same time, so the
            // survivors start the short call together: only the ranks that
            // never come can be missing from it.
            c.barrier("ready", LONG).unwrap();
            let exit_rank: u32 = child_var_parsed("RANKTUNE_TEST_EXIT_RANK");
            let kill_rank: u32 = child_var_parsed("RANKTUNE_TEST_KILL_RANK");
            if r == exit_rank {
                std::process::exit(0);
            }
            if r == kill_rank {
                await_kill(&out, r);
                return;
            }
            let start = Instant::now();
            let tag = "gemm [[64,512],[512,512]] hit?";
            calls.push(outcome(c.all_gather(tag, b"miss", SHORT), show));
            calls.push(json!({ "elapsed": start.elapsed().as_secs_f64() }));
        }
        "stopped" => {
            // One round, then wait while the parent stops the server
            // (SIGSTOP); the next call finds no answer.
            rounds(c.as_mut(), &mut calls, 1);
            c.barrier("ready", LONG).unwrap();
            fs::write(out.join(format!("ready-{r}")), b"").unwrap();
            let limit = Instant::now() + LONG;
            while !out.join("stopped").exists() && Instant::now() < limit {
                std::thread::sleep(Duration::from_millis(20));
            }
            let start = Instant::now();
            calls.push(outcome(c.all_gather("after the stop", b"x", SHORT), show));
            calls.push(json!({ "elapsed": start.elapsed().as_secs_f64() }));
        }
        "mismatch" => {
            let tag = if r == 1 { "softmax [[8,4096]] hit?" } else { "softmax [[16,4096]] hit?" };
            calls.push(outcome(c.all_gather(tag, b"1", LONG), show));
            // A diverging kind of call is caught the same way.
            let second = if r == 0 {
                c.barrier("sync", LONG).map(|()| Vec::new())
            } else {
                c.all_gather("sync", b"", LONG)
            };
            calls.push(outcome(second, show));
            // The sequence numbers stay aligned: the next matching call works.
            let data = format!("r{r}");
            calls.push(outcome(c.all_gather("after", data.as_bytes(), LONG), show));
        }
        other => panic!("unknown scenario {other}"),
    }
    write_result(&out, r, &json!({ "rank": r, "calls": calls }));
}

// --------------------------------------------------------------- parent side

/// Starts `world` ranks of `collective_child` running `scenario`, with
/// the variables `extra` (see `JobSpec` for the rest of what they are told).
fn spawn_job(
    scenario: &str,
    world: u32,
    dir: &Path,
    job_id: &str,
    out: &Path,
    extra: &[(&str, &str)],
) -> RankJob {
    let mut vars = vec![("RANKTUNE_TEST_SCENARIO", scenario)];
    vars.extend_from_slice(extra);
    let test = "collective_child";
    JobSpec { test, world, job_id, dir, out, vars: &vars, limit: JOB_LIMIT }.start()
}

/// The results every rank of a `rounds` job must get.
fn expected_rounds(job: &str, salt: &str, world: u32, n: u32) -> Vec<Value> {
    let mut calls = Vec::new();
    for i in 0..n {
        let gather: Vec<String> = (0..world)
            .map(|r| {
                let l = label(job, salt, &format!("r{r} i{i}"));
                format!("{l}|{}", l.len() + 1 + ((r + 1) * (i + 1) * 37) as usize)
            })
            .collect();
        calls.push(json!({ "ok": gather }));
        let l = label(job, salt, &format!("root{} i{i}", i % world));
        calls.push(json!({ "ok": [format!("{l}|{}", l.len())] }));
        calls.push(json!({ "ok": "barrier" }));
    }
    let big: Vec<String> = (0..world)
        .map(|r| {
            let l = label(job, salt, &format!("big r{r}"));
            format!("{l}|{}", l.len() + 1 + (1 << 20))
        })
        .collect();
    calls.push(json!({ "ok": big }));
    calls
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn err_of(call: &Value) -> &Value {
    assert!(call.get("err").is_some(), "expected an error, got {call}");
    &call["err"]
}

#[test]
fn four_processes_get_identical_results_and_clean_up() {
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("cache");
    fs::create_dir_all(&shared).unwrap();
    let mut job = spawn_job(
        "rounds",
        4,
        &shared,
        "job-a",
        &tmp.path().join("out"),
        &[("RANKTUNE_TEST_SALT", "s")],
    );
    job.wait();
    let want = expected_rounds("job-a", "s", 4, 8);
    for (rank, got) in job.results("calls").into_iter().enumerate() {
        let got = got.unwrap_or_else(|| panic!("rank {rank} wrote no result:\n{}", job.stderr()));
        assert_eq!(got, want, "rank {rank}");
    }
    // Only the last call's messages (one per rank) and the welcome remain.
    let left = files_under(&shared.join(collective::NAMESPACE_DIR));
    let msgs = left.iter().filter(|p| p.extension().is_some_and(|e| e == "msg")).count();
    assert_eq!((msgs, left.len()), (4, 5), "{left:?}");
}

#[test]
fn killed_and_exited_ranks_make_survivors_time_out_naming_them() {
    let tmp = tempfile::tempdir().unwrap();
    let extra = [("RANKTUNE_TEST_EXIT_RANK", "2"), ("RANKTUNE_TEST_KILL_RANK", "3")];
    let mut job = spawn_job("die", 4, tmp.path(), "job-die", &tmp.path().join("out"), &extra);
    job.wait();
    let results = job.results("calls");
    assert!(results[2].is_none() && results[3].is_none(), "ranks 2 and 3 never finish");
    for rank in [0, 1] {
        let calls =
            results[rank].clone().unwrap_or_else(|| panic!("rank {rank}: {}", job.stderr()));
        let err = err_of(&calls[calls.len() - 2]);
        assert_eq!(err["variant"], "Timeout", "rank {rank}: {err}");
        assert_eq!(err["ranks"], json!([2, 3]), "rank {rank}: {err}");
        let text = err["text"].as_str().unwrap();
        assert!(text.contains("gemm [[64,512],[512,512]] hit?"), "{text}");
        assert!(text.contains("rank(s) [2, 3] did not arrive"), "{text}");
        // It waited the timeout, and no longer than a loaded machine needs on top.
        let waited = err["waited"].as_f64().unwrap();
        assert!(waited >= SHORT.as_secs_f64(), "waited {waited}");
    }
}

#[test]
fn concurrent_jobs_sharing_a_directory_never_mix() {
    let tmp = tempfile::tempdir().unwrap();
    let salt = [("RANKTUNE_TEST_SALT", "same-salt")];
    let mut a = spawn_job("rounds", 3, tmp.path(), "job-x", &tmp.path().join("out-x"), &salt);
    let mut b = spawn_job("rounds", 3, tmp.path(), "job-y", &tmp.path().join("out-y"), &salt);
    a.wait();
    b.wait();
    for (job, id) in [(&a, "job-x"), (&b, "job-y")] {
        let want = expected_rounds(id, "same-salt", 3, 8);
        for (rank, got) in job.results("calls").into_iter().enumerate() {
            assert_eq!(got.unwrap_or_else(|| panic!("{}", job.stderr())), want, "{id} rank {rank}");
        }
    }
}

#[test]
fn a_reused_job_id_ignores_the_leftovers_of_a_dead_run() {
    let tmp = tempfile::tempdir().unwrap();
    // The first run dies mid-way (one rank exits, one is killed), leaving
    // messages, an abandoned marker and its session behind.
    let extra = [
        ("RANKTUNE_TEST_EXIT_RANK", "1"),
        ("RANKTUNE_TEST_KILL_RANK", "2"),
        ("RANKTUNE_TEST_SALT", "old"),
    ];
    let mut first = spawn_job("die", 3, tmp.path(), "reused", &tmp.path().join("out-1"), &extra);
    first.wait();
    let ns = tmp.path().join(collective::NAMESPACE_DIR);
    assert!(files_under(&ns).iter().any(|p| p.extension().is_some_and(|e| e == "msg")));
    // The next run with the same id gets exactly its own data.
    let salt = [("RANKTUNE_TEST_SALT", "new")];
    let mut second = spawn_job("rounds", 3, tmp.path(), "reused", &tmp.path().join("out-2"), &salt);
    second.wait();
    let want = expected_rounds("reused", "new", 3, 8);
    for (rank, got) in second.results("calls").into_iter().enumerate() {
        assert_eq!(got.unwrap_or_else(|| panic!("{}", second.stderr())), want, "rank {rank}");
    }
}

#[test]
fn mismatched_calls_are_errors_on_every_rank_then_work_again() {
    let tmp = tempfile::tempdir().unwrap();
    let mut job = spawn_job("mismatch", 3, tmp.path(), "job-mm", &tmp.path().join("out"), &[]);
    job.wait();
    for (rank, calls) in job.results("calls").into_iter().enumerate() {
        let calls = calls.unwrap_or_else(|| panic!("rank {rank}: {}", job.stderr()));
        let first = err_of(&calls[0]);
        assert_eq!(first["variant"], "Mismatch", "{first}");
        let text = first["text"].as_str().unwrap();
        assert!(text.contains("softmax [[8,4096]] hit?") && text.contains("[[16,4096]]"), "{text}");
        if rank != 1 {
            assert_eq!(first["ranks"], json!([1]), "rank {rank} blames the diverging rank");
        }
        let second = err_of(&calls[1]);
        assert_eq!(second["variant"], "Mismatch", "{second}");
        assert!(second["text"].as_str().unwrap().contains("barrier"), "{second}");
        assert_eq!(calls[2], json!({ "ok": ["r0|2", "r1|2", "r2|2"] }), "rank {rank}");
    }
}

// ------------------------------------------------------- over a Redis server

/// Starts `world` ranks of `collective_child` meeting on the Redis server at
/// `url`, each in its own working directory with its own temporary directory
/// (`<root>/rank<r>`, also its `RANKTUNE_TEST_DIR`): nothing is shared
/// through the filesystem but the test's own result files.
fn spawn_redis_job(
    scenario: &str,
    world: u32,
    root: &Path,
    job_id: &str,
    url: &str,
    extra: &[(&str, &str)],
) -> RankJob {
    let mut vars = vec![("RANKTUNE_TEST_SCENARIO", scenario), ("RANKTUNE_COLLECTIVE", url)];
    vars.extend_from_slice(extra);
    let out = root.join("out");
    let spec = JobSpec {
        test: "collective_child",
        world,
        job_id,
        dir: root,
        out: &out,
        vars: &vars,
        limit: JOB_LIMIT,
    };
    spec.start_each(|rank, cmd| {
        let own = root.join(format!("rank{rank}"));
        fs::create_dir_all(own.join("tmp")).unwrap();
        cmd.current_dir(&own).env("RANKTUNE_TEST_DIR", &own).env("TMPDIR", own.join("tmp"));
    })
}

/// Nothing but the ranks' (empty) temporary directories in their own directories.
fn assert_nothing_shared_on_disk(root: &Path, world: u32) {
    for rank in 0..world {
        let own = root.join(format!("rank{rank}"));
        let files = files_under(&own);
        assert!(files.is_empty(), "rank {rank} wrote {files:?}");
        assert!(!own.join(collective::NAMESPACE_DIR).exists());
    }
}

#[test]
fn four_processes_over_redis_get_identical_results() {
    let Some(server) = ranktune_testkit::redis::RedisServer::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("{}?prefix=procs", server.url(0));
    let salt = [("RANKTUNE_TEST_SALT", "s")];
    let mut job = spawn_redis_job("rounds", 4, tmp.path(), "job-r", &url, &salt);
    job.wait();
    let want = expected_rounds("job-r", "s", 4, 8);
    for (rank, got) in job.all_results("calls").into_iter().enumerate() {
        assert_eq!(got, want, "rank {rank}");
    }
    assert_nothing_shared_on_disk(tmp.path(), 4);
}

#[test]
fn ranks_killed_mid_collective_over_redis_are_named_within_the_timeout() {
    let Some(server) = ranktune_testkit::redis::RedisServer::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let extra = [("RANKTUNE_TEST_EXIT_RANK", "2"), ("RANKTUNE_TEST_KILL_RANK", "3")];
    let mut job = spawn_redis_job("die", 4, tmp.path(), "job-rdie", &server.url(0), &extra);
    job.wait();
    let results = job.results("calls");
    assert!(results[2].is_none() && results[3].is_none(), "ranks 2 and 3 never finish");
    for rank in [0, 1] {
        let calls =
            results[rank].clone().unwrap_or_else(|| panic!("rank {rank}: {}", job.stderr()));
        let err = err_of(&calls[calls.len() - 2]);
        assert_eq!(err["variant"], "Timeout", "rank {rank}: {err}");
        assert_eq!(err["ranks"], json!([2, 3]), "rank {rank}: {err}");
        let text = err["text"].as_str().unwrap();
        assert!(text.contains("rank(s) [2, 3] did not arrive"), "{text}");
        let waited = err["waited"].as_f64().unwrap();
        assert!(waited >= SHORT.as_secs_f64(), "waited {waited}");
        // Bounded: the timeout, plus what a loaded machine needs on top.
        let elapsed = calls[calls.len() - 1]["elapsed"].as_f64().unwrap();
        assert!(elapsed < SHORT.as_secs_f64() + 10.0, "took {elapsed}");
    }
    // The next run with the same id on the same server gets exactly its own data.
    let salt = [("RANKTUNE_TEST_SALT", "new")];
    let again = tmp.path().join("again");
    let mut second = spawn_redis_job("rounds", 4, &again, "job-rdie", &server.url(0), &salt);
    second.wait();
    let want = expected_rounds("job-rdie", "new", 4, 8);
    for (rank, got) in second.all_results("calls").into_iter().enumerate() {
        assert_eq!(got, want, "rank {rank}");
    }
}

#[test]
fn a_server_stopped_mid_collective_is_the_timeout_that_ran_out() {
    let Some(server) = ranktune_testkit::redis::RedisServer::start() else { return };
    let pid = server.pid().unwrap() as libc::pid_t;
    let tmp = tempfile::tempdir().unwrap();
    let mut job = spawn_redis_job("stopped", 2, tmp.path(), "job-stop", &server.url(0), &[]);
    let out = tmp.path().join("out");
    let limit = Instant::now() + LONG;
    while !(0..2).all(|r| out.join(format!("ready-{r}")).exists()) && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signals to the server this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    fs::write(out.join("stopped"), b"").unwrap();
    job.wait();
    unsafe { libc::kill(pid, libc::SIGCONT) };
    for (rank, calls) in job.all_results("calls").into_iter().enumerate() {
        let text = err_of(&calls[calls.len() - 2])["text"].as_str().unwrap().to_string();
        assert!(text.contains("no answer within "), "rank {rank}: {text}");
        assert!(text.contains("RANKTUNE_STRATEGY_TIMEOUT") && text.contains("SIGSTOP"), "{text}");
        assert!(!text.contains("os error 11"), "rank {rank}: {text}");
        let elapsed = calls[calls.len() - 1]["elapsed"].as_f64().unwrap();
        assert!(elapsed < SHORT.as_secs_f64() + 10.0, "took {elapsed}: {text}");
    }
}

#[test]
fn mismatched_calls_over_redis_are_errors_then_work_again() {
    let Some(server) = ranktune_testkit::redis::RedisServer::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut job = spawn_redis_job("mismatch", 3, tmp.path(), "job-rmm", &server.url(0), &[]);
    job.wait();
    for (rank, calls) in job.all_results("calls").into_iter().enumerate() {
        assert_eq!(err_of(&calls[0])["variant"], "Mismatch", "rank {rank}");
        assert_eq!(err_of(&calls[1])["variant"], "Mismatch", "rank {rank}");
        assert_eq!(calls[2], json!({ "ok": ["r0|2", "r1|2", "r2|2"] }), "rank {rank}");
    }
}

#[test]
fn an_unreachable_redis_server_is_a_clear_error_at_once() {
    // A port nobody listens on (1, privileged and unused: a port from
    // bind(0) and dropped could be handed to a Redis server another test of
    // this binary starts meanwhile), and a password that must never be printed.
    let port = 1;
    let url = format!("redis://:hunter2@127.0.0.1:{port}/0");
    let info = RankInfo {
        rank: 1,
        world_size: 2,
        local_rank: 1,
        source: ranktune_core::rank::RankSource::Explicit,
    };
    let vars = |n: &str| match n {
        "RANKTUNE_COLLECTIVE" => Some(url.clone()),
        "RANKTUNE_JOB_ID" => Some("j".to_string()),
        _ => None,
    };
    let start = Instant::now();
    let err = collective::from_env_with(&info, Path::new("."), vars).err().unwrap().to_string();
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    assert!(err.contains(&format!("redis://:***@127.0.0.1:{port}/0")), "{err}");
    assert!(err.contains("connecting failed") && !err.contains("hunter2"), "{err}");
}
