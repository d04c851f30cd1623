//! Durable progress under SIGKILL: a 4-rank `ranktune tune` killed outright
//! — the launcher and its ranks at once, its whole process group — at
//! seeded random points, again and again. After each kill:
//!
//! - every bucket any rank logged as durable (`rank R: durable: … op:BUCKET`)
//!   is in the cache file itself (not only in the spool);
//! - the cache is healthy (`cache check` exits 0);
//! - the next run — itself the next one killed — tunes exactly what is
//!   missing: each bucket it reaches is a cache hit on every rank if the
//!   cache held it when the run started, and tuned if not; a run that
//!   completes reports hits == 4 × cached and misses == 4 × (total − cached).
//!
//! The runs are chained (each rerun is the next run to kill) to keep the
//! test short. `RANKTUNE_TEST_SEED` replays a sequence of kill points. The
//! same holds on a `redis://` cache (one kill, against a real server).
//! `--save-every end` (or `RANKTUNE_SAVE_EVERY=end`) keeps the old
//! behaviour: one save at the end, nothing left by a kill; bad values are
//! one clear error before any rank starts.

#![cfg(target_os = "linux")]

use ranktune_testkit::redis::RedisServer;
use ranktune_testkit::{Cli, Output, LAUNCHER_VARS};
use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Kill points, at least.
const KILLS: usize = 30;
/// Ranks of each run.
const RANKS: u64 = 4;
/// Buckets each rank looks up: 3 ops × tokens 1, 2, 4, 8, 16.
const BUCKETS: usize = 15;

/// An (op, bucket label) pair, e.g. ("gemm", "1x64,1x64").
type Bucket = (String, String);

/// A small seeded generator (splitmix64): the kill points replay.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// Starts `tune` into `cache` in a process group of its own (so one
/// `killpg` reaches the launcher and every rank), saving as `save_every`
/// says.
fn start(dir: &Path, cache: &str, save_every: &str) -> ranktune_testkit::Running {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ranktune"));
    cmd.process_group(0);
    Cli::from(cmd)
        .current_dir(dir)
        .args(["tune", "--ranks", "4", "--quick", "--max-tokens", "16", "--json"])
        .args(["--cache", cache, "--save-every", save_every])
        .env_remove(LAUNCHER_VARS)
        .env_remove(["RANKTUNE_CACHE", "TLLM_AUTOTUNER_CACHE_PATH", "RANKTUNE_STRATEGY"])
        .env_remove(["RANKTUNE_TRACE", "TLLM_TORCH_PROFILE_TRACE", "RANKTUNE_COLLECTIVE"])
        .env_remove(["RANKTUNE_COLLECTIVE_DIR", "RANKTUNE_SAVE_EVERY", "RANKTUNE_JOB_ID"])
        // Each bucket's source (debug) and each durable save (info).
        .env("RANKTUNE_LOG", "warn,ranktune_cli::cli::tune=debug")
        // The ranks' meeting place, which a killed launcher cannot remove.
        .env("TMPDIR", dir)
        .limit(Duration::from_secs(60))
        .spawn()
}

/// Waits until no process of group `pgid` runs any more (a killed rank may
/// finish the system call it was in, e.g. a rename, before it dies).
fn wait_group_gone(pgid: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let alive = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { return false };
            // pid (comm) state ppid pgrp …; comm may hold spaces.
            let Some((_, rest)) = stat.rsplit_once(") ") else { return false };
            let f: Vec<&str> = rest.split(' ').collect();
            f.len() > 2 && f[0] != "Z" && f[2] == pgid.to_string()
        });
        if !alive {
            return;
        }
        assert!(Instant::now() < deadline, "process group {pgid} still runs after SIGKILL");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `[[1,64],[1,64]]` → `1x64,1x64`.
fn label(bucket: &serde_json::Value) -> String {
    let dims = |d: &serde_json::Value| {
        d.as_array().unwrap().iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x")
    };
    bucket.as_array().unwrap().iter().map(dims).collect::<Vec<_>>().join(",")
}

/// The buckets of the `shared` section of `doc` (a cache document).
fn shared_of(doc: &serde_json::Value) -> BTreeSet<Bucket> {
    let entries = doc["shared"].as_array().cloned().unwrap_or_default();
    entries.iter().map(|e| (e["op"].as_str().unwrap().to_string(), label(&e["bucket"]))).collect()
}

/// The buckets `cache` holds as a tuner loads it (file and spool), from
/// `cache show --json`; and checks it is healthy.
fn cached(dir: &Path, cache: &str, ctx: &str) -> BTreeSet<Bucket> {
    if cache == "c.json" && !dir.join("c.json").exists() && !dir.join("c.json.spool").exists() {
        return BTreeSet::new();
    }
    let run =
        |args: &[&str]| Cli::new(env!("CARGO_BIN_EXE_ranktune")).current_dir(dir).args(args).run();
    let check = run(&["cache", "check", cache]);
    assert!(check.status.success(), "{ctx}: the cache is not healthy: {check}");
    let show = run(&["cache", "show", cache, "--json"]).expect_success().json();
    let entries = show["entries"].as_array().unwrap();
    assert!(entries.iter().all(|e| e["section"] == "shared"), "{ctx}: {show}");
    entries.iter().map(|e| (e["op"].as_str().unwrap().to_string(), label(&e["bucket"]))).collect()
}

/// What a run's stderr says: the buckets logged as durable, and each
/// bucket's source per rank (`Tuned`, `Cache`).
fn logged(out: &Output) -> (BTreeSet<Bucket>, Vec<(Bucket, String)>) {
    let (mut durable, mut done) = (BTreeSet::new(), Vec::new());
    for line in out.stderr_text().lines() {
        if line.contains(": durable: ") {
            let (_, list) = line.rsplit_once(" ms:").unwrap_or_else(|| panic!("{line}"));
            for b in list.split_whitespace() {
                let (op, bucket) = b.split_once(':').unwrap_or_else(|| panic!("{line}"));
                durable.insert((op.to_string(), bucket.to_string()));
            }
        } else if let Some((what, source)) = line.rsplit_once(" done (") {
            // `[rank R] debug: rank R: gemm 1x64,1x64 done (Tuned)`
            let what = what.rsplit_once(": ").map_or(what, |w| w.1);
            let (op, bucket) = what.split_once(' ').unwrap_or_else(|| panic!("{line}"));
            let source = source.trim_end_matches(')').to_string();
            done.push(((op.to_string(), bucket.to_string()), source));
        }
    }
    (durable, done)
}

#[test]
fn a_tune_killed_outright_keeps_every_durable_bucket_and_the_rerun_tunes_only_the_rest() {
    let seed = std::env::var("RANKTUNE_TEST_SEED").ok().and_then(|s| s.parse().ok());
    let seed = seed.unwrap_or(0x5eed_2026_u64);
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let started = Instant::now();
    let (mut kills, mut completed, mut durable_seen, mut run) = (0, 0, 0, 0);
    while kills < KILLS || completed < 2 {
        run += 1;
        let at_start = cached(dir, "c.json", &format!("seed {seed:#x}, before run {run}"));
        let ctx = format!("seed {seed:#x}, run {run} (cache held {} buckets)", at_start.len());
        // Every second run saves after each bucket, the others by the
        // default policy.
        let job = start(dir, "c.json", if run % 2 == 0 { "0" } else { "auto" });
        let pgid = job.id();
        // A kill point: after a random number of buckets tuned over the
        // ranks (0: during start-up), then a random few milliseconds more;
        // past the end of the run the run completes. Late in the test, let
        // runs complete.
        let missing = RANKS * (BUCKETS - at_start.len()) as u64;
        let dones = if kills >= KILLS { u64::MAX } else { rng.below(missing + 6) };
        let extra = Duration::from_micros(rng.below(if dones == 0 { 60_000 } else { 6_000 }));
        let mut seen = 0;
        let finished = loop {
            if seen >= dones {
                break false;
            }
            match job.stderr().next_within(Duration::from_secs(30)) {
                Ok(line) => seen += u64::from(line.contains(" done (Tuned)")),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break true,
                Err(e) => panic!("{ctx}: no progress: {e:?}"),
            }
        };
        if !finished {
            std::thread::sleep(extra);
            // SAFETY: killpg has no memory-safety preconditions; the group
            // is the one the job leads, and its leader is not reaped yet.
            assert_eq!(unsafe { libc::killpg(pgid as libc::pid_t, libc::SIGKILL) }, 0, "{ctx}");
        }
        let out = job.wait();
        wait_group_gone(pgid);
        let (durable, done) = logged(&out);
        durable_seen += durable.len();
        // Durable means in the file itself, not only in a spool.
        let file: serde_json::Value = match std::fs::read(dir.join("c.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{ctx}: {e}")),
            Err(_) => serde_json::Value::Null,
        };
        let in_file = shared_of(&file);
        let lost: Vec<_> = durable.difference(&in_file).collect();
        assert!(lost.is_empty(), "{ctx}: logged as durable but not in c.json: {lost:?}\n{out}");
        let now = cached(dir, "c.json", &ctx);
        assert!(now.is_superset(&at_start), "{ctx}: the cache lost entries");
        // Shown when the test fails: where each kill landed.
        eprintln!(
            "{ctx}: killed after {dones} tuned buckets (+{extra:?}): {} tuned, {} logged \
             durable, {} cached now, completed {finished}",
            done.iter().filter(|d| d.1 == "Tuned").count(),
            durable.len(),
            now.len()
        );
        // The run tuned exactly what was missing when it started.
        for (bucket, source) in &done {
            let want = if at_start.contains(bucket) { "Cache" } else { "Tuned" };
            assert_eq!(source, want, "{ctx}: {bucket:?}\n{out}");
        }
        if finished || out.status.success() {
            let doc = out.expect_success().json();
            let hits = RANKS * at_start.len() as u64;
            let misses = RANKS * (BUCKETS - at_start.len()) as u64;
            assert_eq!(doc["hits"].as_u64(), Some(hits), "{ctx}: {doc}");
            assert_eq!(doc["misses"].as_u64(), Some(misses), "{ctx}: {doc}");
            assert_eq!(now.len(), BUCKETS, "{ctx}: a complete run leaves every bucket cached");
            completed += 1;
        } else {
            kills += 1;
        }
        if now.len() == BUCKETS {
            // Start over from an empty cache: a run of hits only is over at once.
            std::fs::remove_file(dir.join("c.json")).unwrap();
        }
    }
    assert!(durable_seen > 0, "seed {seed:#x}: no durable save was ever logged");
    eprintln!(
        "{kills} kills, {completed} complete runs, {durable_seen} durable buckets logged, {:?}",
        started.elapsed()
    );
}

/// A `redis://` cache goes through the same checkpoints: a job killed
/// outright after some durable saves left every logged bucket in Redis, and
/// the rerun tunes only the rest.
#[test]
fn a_tune_killed_outright_on_a_redis_cache_keeps_every_durable_bucket() {
    let Some(server) = RedisServer::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let url = format!("{}?prefix=kill", server.url(0));
    let job = start(dir, &url, "0");
    let pgid = job.id();
    // Kill once a few buckets were logged durable (or at the end).
    let mut durable_lines = 0;
    while durable_lines < 6 {
        match job.stderr().next_within(Duration::from_secs(30)) {
            Ok(line) => durable_lines += usize::from(line.contains(": durable: ")),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(e) => panic!("no progress: {e:?}"),
        }
    }
    // SAFETY: as above.
    assert_eq!(unsafe { libc::killpg(pgid as libc::pid_t, libc::SIGKILL) }, 0);
    let out = job.wait();
    wait_group_gone(pgid);
    let (durable, _) = logged(&out);
    assert!(!durable.is_empty(), "{out}");
    let held = cached(dir, &url, "after the kill");
    let lost: Vec<_> = durable.difference(&held).collect();
    assert!(lost.is_empty(), "logged as durable but not in Redis: {lost:?}\n{out}");
    let rerun = start(dir, &url, "auto").wait().expect_success();
    let (_, done) = logged(&rerun);
    for (bucket, source) in &done {
        let want = if held.contains(bucket) { "Cache" } else { "Tuned" };
        assert_eq!(source, want, "{bucket:?}\n{rerun}");
    }
    let doc = rerun.json();
    assert_eq!(doc["hits"].as_u64(), Some(RANKS * held.len() as u64), "{doc}");
    assert_eq!(doc["misses"].as_u64(), Some(RANKS * (BUCKETS - held.len()) as u64), "{doc}");
    assert_eq!(cached(dir, &url, "after the rerun").len(), BUCKETS);
}

/// `RANKTUNE_SAVE_EVERY=end` saves only at the end, as before durable
/// progress: a job killed outright leaves nothing, a complete one saves
/// once per rank (one durable line each, naming every bucket).
#[test]
fn save_every_end_saves_only_at_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ranktune"));
        cmd.process_group(0);
        Cli::from(cmd)
            .current_dir(dir)
            .args(["tune", "--ranks", "2", "--quick", "--max-tokens", "16", "--cache", "c.json"])
            .args(args)
            .env_remove(LAUNCHER_VARS)
            .env_remove(["RANKTUNE_STRATEGY", "RANKTUNE_COLLECTIVE", "RANKTUNE_COLLECTIVE_DIR"])
            .env("RANKTUNE_SAVE_EVERY", "end")
            .env("RANKTUNE_LOG", "warn,ranktune_cli::cli::tune=debug")
            .env("TMPDIR", dir)
            .limit(Duration::from_secs(60))
            .spawn()
    };
    let job = run(&[]);
    job.stderr()
        .wait_for(|l| l.contains(" done (Tuned)"), Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("no bucket tuned: {e:?}"));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::killpg(job.id() as libc::pid_t, libc::SIGKILL) }, 0);
    let pgid = job.id();
    let out = job.wait();
    wait_group_gone(pgid);
    if !out.status.success() {
        assert!(!out.stderr_text().contains(": durable: "), "{out}");
        assert!(!dir.join("c.json").exists(), "a killed job saved with end: {out}");
    }
    let out = run(&[]).wait().expect_success();
    let text = out.stderr_text();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(": durable: ")).collect();
    assert_eq!(lines.len(), 2, "one save per rank, at the end: {out}");
    for l in lines {
        assert!(l.contains(&format!(": durable: {BUCKETS} bucket(s) saved to c.json")), "{l}");
    }
}

/// A bad `--save-every` or `RANKTUNE_SAVE_EVERY` is one error naming it and
/// what to give, before any rank starts; the flag wins over the variable.
#[test]
fn bad_save_policies_are_one_error_naming_the_flag_or_the_variable() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str], env: &str| {
        Cli::new(env!("CARGO_BIN_EXE_ranktune"))
            .current_dir(tmp.path())
            .args(["tune", "--ranks", "2", "--quick", "--ops", "softmax", "--max-tokens", "2"])
            .args(args)
            .env_remove(LAUNCHER_VARS)
            .env_remove(["RANKTUNE_STRATEGY", "RANKTUNE_CACHE"])
            .env("RANKTUNE_SAVE_EVERY", env)
            .run()
    };
    for (args, env, named) in [
        (&["--save-every", "often"][..], "", "--save-every \"often\""),
        (&["--save-every", "-5"][..], "auto", "--save-every \"-5\""),
        (&[][..], "inf", "RANKTUNE_SAVE_EVERY=\"inf\""),
    ] {
        let out = run(args, env);
        let err = out.stderr_text();
        assert_eq!(out.status.code(), Some(2), "{out}");
        assert_eq!(err.lines().count(), 1, "one error, not one per rank: {err}");
        assert!(err.starts_with(&format!("error: {named} is not a save policy")), "{err}");
        assert!(err.contains("auto") && err.contains("end"), "{err}");
    }
    assert!(!tmp.path().join("ranktune-cache.json").exists(), "nothing tuned");
    // The flag wins over a bad variable.
    run(&["--save-every", "0"], "nonsense").expect_success();
}
