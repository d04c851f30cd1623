//! Durable progress under SIGKILL: a 4-rank `ranktune tune` killed outright
//! — the launcher and its ranks at once, its whole process group — at
//! seeded random points, again and again. After each kill:
//!
//! - every bucket a rank logged as durable (`rank R: durable: … op:BUCKET`)
//!   is in the cache file itself (not only in the spool), in `shared` or in
//!   that rank's section;
//! - the cache is healthy (`cache check` exits 0);
//! - the next run — itself the next one killed — tunes exactly what is
//!   missing: each bucket a rank reaches is a cache hit if the cache held
//!   it for that rank when the run started (for a collective strategy: for
//!   every rank, as the ranks agree on hits), and tuned if not; a run that
//!   completes reports exactly those hits and the rest as misses.
//!
//! Rounds alternate the strategy: collective (`parallel`: `shared` entries,
//! saved through the edit lock) and `independent` (rank entries, saved
//! through the spool and the group commit, which a kill can cut short with
//! a spool file written and not folded yet); within a round the runs are
//! chained (each rerun is the next run to kill) until one completes, to
//! keep the test short. Every second run saves after each bucket, the
//! others by the default policy. `RANKTUNE_TEST_SEED` replays a sequence of
//! kill points. The same holds on a `redis://` cache (one kill, against a
//! real server). `--save-every end` (or `RANKTUNE_SAVE_EVERY=end`) keeps the
//! old behaviour: one save at the end, nothing left by a kill; bad values
//! are one clear error before any rank starts.

#![cfg(target_os = "linux")]

use ranktune_testkit::redis::RedisServer;
use ranktune_testkit::{Cli, Output, LAUNCHER_VARS};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Kill points, at least.
const KILLS: usize = 30;
/// Ranks of each run.
const RANKS: u32 = 4;
/// Buckets each rank looks up: 3 ops × tokens 1, 2, 4, 8, 16.
const BUCKETS: usize = 15;

/// An (op, bucket label) pair, e.g. ("gemm", "1x64,1x64").
type Bucket = (String, String);

/// A cache's buckets by section name (`shared`, `rank_0`, …).
type Held = BTreeMap<String, BTreeSet<Bucket>>;

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
/// `killpg` reaches the launcher and every rank), with `strategy`, saving
/// as `save_every` says.
fn start(dir: &Path, cache: &str, strategy: &str, save_every: &str) -> ranktune_testkit::Running {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ranktune"));
    cmd.process_group(0);
    Cli::from(cmd)
        .current_dir(dir)
        .args(["tune", "--ranks", "4", "--quick", "--max-tokens", "16", "--json"])
        .args(["--cache", cache, "--strategy", strategy, "--save-every", save_every])
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

fn bucket_of(e: &serde_json::Value) -> Bucket {
    (e["op"].as_str().unwrap().to_string(), label(&e["bucket"]))
}

/// The buckets of each section of `doc`, a cache document as stored.
fn held_in_file(doc: &serde_json::Value) -> Held {
    let mut held = Held::new();
    for (name, entries) in doc.as_object().into_iter().flatten() {
        if name == "shared" || name.starts_with("rank_") {
            let set = held.entry(name.clone()).or_default();
            set.extend(entries.as_array().into_iter().flatten().map(bucket_of));
        }
    }
    held
}

/// The buckets `cache` holds as a tuner loads it (file and spool), from
/// `cache show --json`; and checks it is healthy.
fn cached(dir: &Path, cache: &str, ctx: &str) -> Held {
    if cache == "c.json" && !dir.join("c.json").exists() && !dir.join("c.json.spool").exists() {
        return Held::new();
    }
    let run =
        |args: &[&str]| Cli::new(env!("CARGO_BIN_EXE_ranktune")).current_dir(dir).args(args).run();
    // Healthy: nothing unparseable, bad or stale. Independent ranks may
    // choose differently (check says so, and exits 1): that is their
    // strategy, not damage.
    let check = run(&["cache", "check", cache]);
    let text = check.stdout_text();
    let only_disagreement =
        text.lines().all(|l| l.starts_with("ranks disagree on ")) && !text.trim().is_empty();
    assert!(
        check.status.success() || (check.status.code() == Some(1) && only_disagreement),
        "{ctx}: the cache is not healthy: {check}"
    );
    let show = run(&["cache", "show", cache, "--json"]).expect_success().json();
    let mut held = Held::new();
    for e in show["entries"].as_array().unwrap() {
        let section = e["section"].as_str().unwrap().to_string();
        held.entry(section).or_default().insert(bucket_of(e));
    }
    held
}

/// What `rank` finds in `held`: `shared` and its own section.
fn for_rank(held: &Held, rank: u32) -> BTreeSet<Bucket> {
    let own = held.get(&format!("rank_{rank}")).into_iter().flatten();
    held.get("shared").into_iter().flatten().chain(own).cloned().collect()
}

/// The buckets each rank hits in a run that starts from `held`: its own
/// for independent ranks; for a collective strategy those every rank holds
/// (the ranks agree on a hit, and tune together what any of them misses).
fn hits_per_rank(held: &Held, collective: bool) -> Vec<BTreeSet<Bucket>> {
    let own: Vec<_> = (0..RANKS).map(|r| for_rank(held, r)).collect();
    if !collective {
        return own;
    }
    let all = own.iter().skip(1).fold(own[0].clone(), |a, b| &a & b);
    vec![all; RANKS as usize]
}

/// `[rank R] …` → R.
fn rank_of(line: &str) -> u32 {
    let r = line.strip_prefix("[rank ").and_then(|l| l.split_once(']')).map(|(r, _)| r);
    r.and_then(|r| r.parse().ok()).unwrap_or_else(|| panic!("no rank in {line:?}"))
}

/// What a run's stderr says, per line's rank: the buckets logged as
/// durable, and each bucket's source (`Tuned`, `Cache`).
type Logged = (Vec<(u32, Bucket)>, Vec<(u32, Bucket, String)>);

fn logged(out: &Output) -> Logged {
    let (mut durable, mut done) = (Vec::new(), Vec::new());
    for line in out.stderr_text().lines() {
        if line.contains(": durable: ") {
            let (_, list) = line.rsplit_once(" ms:").unwrap_or_else(|| panic!("{line}"));
            for b in list.split_whitespace() {
                let (op, bucket) = b.split_once(':').unwrap_or_else(|| panic!("{line}"));
                durable.push((rank_of(line), (op.to_string(), bucket.to_string())));
            }
        } else if let Some((what, source)) = line.rsplit_once(" done (") {
            // `[rank R] debug: rank R: gemm 1x64,1x64 done (Tuned)`
            let what = what.rsplit_once(": ").map_or(what, |w| w.1);
            let (op, bucket) = what.split_once(' ').unwrap_or_else(|| panic!("{line}"));
            let source = source.trim_end_matches(')').to_string();
            done.push((rank_of(line), (op.to_string(), bucket.to_string()), source));
        }
    }
    (durable, done)
}

/// Checks one run that started from `at_start`: every logged durable bucket
/// is in `file` for its rank, and every bucket a rank reached was a hit
/// exactly when `hits` says. Returns the number of buckets logged durable.
fn check_run(out: &Output, file: &Held, hits: &[BTreeSet<Bucket>], ctx: &str) -> usize {
    let (durable, done) = logged(out);
    for (rank, bucket) in &durable {
        assert!(
            for_rank(file, *rank).contains(bucket),
            "{ctx}: rank {rank} logged {bucket:?} durable but c.json does not hold it\n{out}"
        );
    }
    for (rank, bucket, source) in &done {
        let want = if hits[*rank as usize].contains(bucket) { "Cache" } else { "Tuned" };
        assert_eq!(source, want, "{ctx}: rank {rank} {bucket:?}\n{out}");
    }
    durable.len()
}

#[test]
fn a_tune_killed_outright_keeps_every_durable_bucket_and_the_rerun_tunes_only_the_rest() {
    let seed = std::env::var("RANKTUNE_TEST_SEED").ok().and_then(|s| s.parse().ok());
    let seed = seed.unwrap_or(0x5eed_2026_u64);
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let started = Instant::now();
    let (mut kills, mut completed, mut durable_seen, mut cut_short, mut run) = (0, 0, 0, 0, 0);
    let mut collective = true;
    while kills < KILLS || completed < 2 {
        run += 1;
        let strategy = if collective { "parallel" } else { "independent" };
        let at_start = cached(dir, "c.json", &format!("seed {seed:#x}, before run {run}"));
        let hits = hits_per_rank(&at_start, collective);
        let ctx = format!(
            "seed {seed:#x}, run {run} ({strategy}; the ranks held {:?} buckets)",
            (0..RANKS).map(|r| for_rank(&at_start, r).len()).collect::<Vec<_>>()
        );
        let policy = if run % 2 == 0 { "0" } else { "auto" };
        let job = start(dir, "c.json", strategy, policy);
        let pgid = job.id();
        // A kill point: after a random number of buckets tuned over the
        // ranks (0: during start-up), then a random few milliseconds more;
        // past the end of the run the run completes. Late in the test, let
        // runs complete.
        let missing: usize = hits.iter().map(|h| BUCKETS - h.len()).sum();
        let dones = if kills >= KILLS { u64::MAX } else { rng.below(missing as u64 + 6) };
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
        // Durable means in the file itself, not only in a spool.
        let file = match std::fs::read(dir.join("c.json")) {
            Ok(bytes) => held_in_file(
                &serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{ctx}: {e}")),
            ),
            Err(_) => Held::new(),
        };
        durable_seen += check_run(&out, &file, &hits, &ctx);
        let now = cached(dir, "c.json", &ctx);
        for r in 0..RANKS {
            let lost: Vec<_> =
                for_rank(&at_start, r).difference(&for_rank(&now, r)).cloned().collect();
            assert!(lost.is_empty(), "{ctx}: the cache lost rank {r}'s {lost:?}");
        }
        // A save cut short leaves its spool file or temp file behind.
        let left = ranktune_testkit::file_names(dir);
        let short = left.iter().any(|n| n.starts_with("c.json.tmp") || n == "c.json.spool");
        cut_short += usize::from(short);
        // Shown when the test fails (or with --nocapture).
        eprintln!(
            "{ctx} saving {policy}: killed after {dones} tuned buckets (+{extra:?}); completed \
             {finished}, a save cut short {short}; now {:?}",
            (0..RANKS).map(|r| for_rank(&now, r).len()).collect::<Vec<_>>()
        );
        if finished || out.status.success() {
            let doc = out.expect_success().json();
            let hit: usize = hits.iter().map(BTreeSet::len).sum();
            let lookups = RANKS as usize * BUCKETS;
            assert_eq!(doc["hits"].as_u64(), Some(hit as u64), "{ctx}: {doc}");
            assert_eq!(doc["misses"].as_u64(), Some((lookups - hit) as u64), "{ctx}: {doc}");
            completed += 1;
        } else {
            kills += 1;
        }
        if (0..RANKS).all(|r| for_rank(&now, r).len() == BUCKETS) {
            // Every rank holds every bucket: the next round starts from an
            // empty cache (a killed save's temp file may still wait in the
            // spool until it is old), with the other strategy.
            std::fs::remove_file(dir.join("c.json")).unwrap();
            match std::fs::remove_dir_all(dir.join("c.json.spool")) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{ctx}: {e}"),
                _ => {}
            }
            collective = !collective;
        }
    }
    assert!(durable_seen > 0, "seed {seed:#x}: no durable save was ever logged");
    eprintln!(
        "{kills} kills ({cut_short} cutting a save short), {completed} complete runs, \
         {durable_seen} durable buckets logged, {:?}",
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
    let job = start(dir, &url, "parallel", "0");
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
    let held = cached(dir, &url, "after the kill");
    // The killed run started from nothing: it tuned every bucket it reached.
    let none = hits_per_rank(&Held::new(), true);
    assert!(check_run(&out, &held, &none, "the killed run") > 0, "{out}");
    let hits = hits_per_rank(&held, true);
    let rerun = start(dir, &url, "parallel", "auto").wait().expect_success();
    check_run(&rerun, &cached(dir, &url, "after the rerun"), &hits, "the rerun");
    let doc = rerun.json();
    for rank in doc["ranks"].as_array().unwrap() {
        // auto: the first decision at once, the rest at the end or between.
        assert!(rank["saves"].as_u64().is_some_and(|n| n >= 1), "{rank}");
    }
    let hit = (RANKS as usize * hits[0].len()) as u64;
    assert_eq!(doc["hits"].as_u64(), Some(hit), "{doc}");
    assert_eq!(doc["misses"].as_u64(), Some((RANKS as usize * BUCKETS) as u64 - hit), "{doc}");
    assert_eq!(for_rank(&cached(dir, &url, "at the end"), 0).len(), BUCKETS);
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
    // Killed after its first bucket of 15: it cannot have finished.
    assert!(!out.status.success(), "the job ended before the kill: {out}");
    assert!(!out.stderr_text().contains(": durable: "), "{out}");
    assert!(!dir.join("c.json").exists(), "a killed job saved with end: {out}");
    let out = run(&["--json"]).wait().expect_success();
    let text = out.stderr_text();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(": durable: ")).collect();
    assert_eq!(lines.len(), 2, "one save per rank, at the end: {out}");
    for l in lines {
        assert!(l.contains(&format!(": durable: {BUCKETS} bucket(s) saved to c.json")), "{l}");
    }
    // The report counts them, with what they took.
    for rank in out.json()["ranks"].as_array().unwrap() {
        assert_eq!(rank["saves"].as_u64(), Some(1), "{rank}");
        assert!(rank["save_seconds"].as_f64().is_some_and(|s| s > 0.0), "{rank}");
        assert_eq!(rank["entries_saved"].as_u64(), Some(BUCKETS as u64), "{rank}");
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

/// A rank killed during its very first save, with its entries written to
/// the spool and the cache file not made yet (here: while another process
/// holds the lock): the tuner loads those entries, so `cache check` and
/// `cache show` read them too, and the next run hits them.
#[test]
fn a_first_save_killed_before_its_fold_leaves_a_cache_that_reads() {
    use std::os::unix::io::AsRawFd;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let lock = std::fs::File::create(dir.join("c.json.lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let tune = |args: &[&str]| {
        Cli::new(env!("CARGO_BIN_EXE_ranktune"))
            .current_dir(dir)
            .args(["tune", "--quick", "--ops", "softmax", "--max-tokens", "2", "--cache", "c.json"])
            .args(args)
            .env_remove(LAUNCHER_VARS)
            .env_remove(["RANKTUNE_STRATEGY", "RANKTUNE_SAVE_EVERY", "RANKTUNE_LOG"])
    };
    let job = tune(&["--save-every", "0"]).spawn();
    let spool = dir.join("c.json.spool");
    let deadline = Instant::now() + Duration::from_secs(30);
    let written = || {
        let names = std::fs::read_dir(&spool).into_iter().flatten().flatten();
        names.map(|e| e.file_name().to_string_lossy().into_owned()).any(|n| !n.starts_with('.'))
    };
    while !written() {
        assert!(Instant::now() < deadline, "no spool file was written");
        std::thread::sleep(Duration::from_millis(5));
    }
    job.signal(libc::SIGKILL).unwrap();
    let out = job.wait();
    drop(lock);
    assert!(!dir.join("c.json").exists(), "{out}");
    let run = |args: &[&str]| {
        Cli::new(env!("CARGO_BIN_EXE_ranktune")).current_dir(dir).args(args).run().expect_success()
    };
    let check = run(&["cache", "check", "c.json"]).stdout_text();
    assert_eq!(check.trim(), "c.json: healthy (1 entries in 1 section(s))");
    let show = run(&["cache", "show", "c.json", "--json"]).json();
    assert_eq!(show["entries"].as_array().map(Vec::len), Some(1), "{show}");
    let again = tune(&["--json"]).run().expect_success().json();
    assert_eq!((again["hits"].as_u64(), again["misses"].as_u64()), (Some(1), Some(1)), "{again}");
}
