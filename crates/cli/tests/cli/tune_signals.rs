//! Stopping `ranktune tune --ranks 2` with a signal: the launcher forwards
//! SIGTERM to its ranks, each rank saves the buckets it finished and writes
//! its trace, and everything exits 143; a launcher killed outright (SIGKILL)
//! still lets its ranks stop the same way (they get SIGTERM when it dies).

#![cfg(target_os = "linux")]

use ranktune_testkit::{Cli, Running, LAUNCHER_VARS};
use std::path::Path;
use std::time::{Duration, Instant};

/// Starts a 2-rank job tuning gemm into `dir/c.json` with traces in
/// `dir/t/`, logging each finished bucket (`[rank N] … done`).
fn start_job(dir: &Path) -> Running {
    let scrub = ["RANKTUNE_TRACE", "TLLM_TORCH_PROFILE_TRACE", "RANKTUNE_PROFILE_ITERS"];
    let cache = dir.join("c.json");
    let trace = dir.join("t/");
    Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(["tune", "--ranks", "2", "--ops", "gemm", "--max-tokens", "4096"])
        .arg("--cache")
        .arg(&cache)
        .arg("--trace")
        .arg(&trace)
        .env_remove(scrub)
        .env_remove(LAUNCHER_VARS)
        .env_remove(["RANKTUNE_CACHE", "TLLM_AUTOTUNER_CACHE_PATH", "TLLM_PROFILE_START_STOP"])
        .env("RANKTUNE_LOG", "ranktune=debug")
        .env("RANKTUNE_STRATEGY", "independent")
        .limit(Duration::from_secs(180))
        .spawn()
}

/// Waits until both ranks have logged a finished bucket.
fn wait_until_both_ranks_tuned(job: &Running) {
    let mut seen = [false, false];
    let deadline = Instant::now() + Duration::from_secs(120);
    while !(seen[0] && seen[1]) {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = job.stderr().next_within(left).unwrap_or_else(|e| {
            panic!("the ranks never reported a finished bucket ({e:?}); seen {seen:?}")
        });
        for (r, s) in seen.iter_mut().enumerate() {
            if line.starts_with(&format!("[rank {r}]")) && line.contains(" done (") {
                *s = true;
            }
        }
    }
}

fn send(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions; the pid is our own
    // unreaped child.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0);
}

/// The processes whose command line mentions `needle` (the job's unique
/// cache path): the launcher and its ranks.
fn processes_mentioning(needle: &Path) -> Vec<u32> {
    let needle = needle.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        // A zombie has an empty command line; it runs no more.
        if String::from_utf8_lossy(&cmd).contains(&needle) {
            pids.push(pid);
        }
    }
    pids
}

fn wait_for_no_process(needle: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let left = processes_mentioning(needle);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "still running after {limit:?}: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Each rank's trace is complete JSON with at least one bucket in it; the
/// cache holds at least one entry of each rank's section; returns the
/// entries per rank.
fn check_saved(dir: &Path) -> [usize; 2] {
    let mut counts = [0; 2];
    let cache: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("c.json")).expect("the cache was saved"))
            .expect("the cache is complete JSON");
    for (r, count) in counts.iter_mut().enumerate() {
        let path = dir.join(format!("t/trace_{r}.json"));
        let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let doc: serde_json::Value = serde_json::from_slice(&text)
            .unwrap_or_else(|e| panic!("{} is not complete JSON: {e}", path.display()));
        let steps = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("ProfilerStep#")))
            .count();
        assert!(steps >= 1, "rank {r}'s trace holds its finished buckets");
        *count = cache[format!("rank_{r}")].as_array().map_or(0, Vec::len);
        assert!(*count >= 1, "rank {r} saved the buckets it finished: {cache}");
    }
    let names = ranktune_testkit::file_names(&dir.join("t"));
    assert_eq!(names, ["trace_0.json", "trace_1.json"], "no temp file left");
    counts
}

#[test]
fn sigterm_to_the_launcher_stops_every_rank_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let job = start_job(dir);
    wait_until_both_ranks_tuned(&job);
    let sent = Instant::now();
    send(job.id(), libc::SIGTERM);
    let out = job.wait();
    assert!(sent.elapsed() < Duration::from_secs(60), "took {:?}", sent.elapsed());
    assert_eq!(out.status.code(), Some(143), "{out}");
    let stderr = out.stderr_text();
    assert!(stderr.contains("ranktune: SIGTERM: stopped 2 ranks"), "{out}");
    let counts = check_saved(dir);
    for (r, count) in counts.iter().enumerate() {
        // Each rank says how many buckets it finished; all of them are saved.
        let said = format!("[rank {r}] ranktune: SIGTERM: rank {r} stopped after {count} buckets");
        assert!(stderr.contains(&said), "{said:?} in {out}");
    }
    wait_for_no_process(&dir.join("c.json"), Duration::from_secs(5));
}

#[test]
fn ranks_of_a_killed_launcher_stop_cleanly() {
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let job = start_job(dir);
    wait_until_both_ranks_tuned(&job);
    send(job.id(), libc::SIGKILL);
    let out = job.wait();
    assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{out}");
    // The ranks get SIGTERM from the kernel, finish their bucket, save and
    // exit, although nobody reads their output any more.
    wait_for_no_process(&dir.join("c.json"), Duration::from_secs(60));
    check_saved(dir);
}
