//! Trace recording across real processes: many ranks given one path, a
//! panic inside a profiled region, and SIGTERM/SIGINT. The test binary
//! re-executes itself (test `child`) with `TRACE_TEST_CHILD` naming the
//! role it should play.

mod trace_support;

use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_testkit::{child_test, signal, Cli, LineReader};
use ranktune_trace as trace;
use ranktune_trace::{TraceConfig, TraceSession};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use trace_support::{check_trace, named, steps};

const ROLE: &str = "TRACE_TEST_CHILD";

/// The child side; does nothing in a normal test run.
#[test]
fn child() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let rank = RankInfo::detect(&RankOverrides::default()).unwrap();
    let cfg = TraceConfig::from_env().unwrap().expect("RANKTUNE_TRACE set by the parent");
    let session = TraceSession::start(cfg, &rank).unwrap();
    match role.as_str() {
        "normal" => {
            for i in 0..5u64 {
                let _s = trace::span("work", "test").with_arg("iter", i);
                std::thread::sleep(Duration::from_millis(1));
                session.step();
            }
            std::thread::spawn(|| drop(trace::span("helper", "test"))).join().unwrap();
            session.stop().unwrap();
        }
        "panic-hook" | "panic-unwind" => {
            for _ in 0..3 {
                drop(trace::span("done", "test"));
            }
            if role == "panic-hook" {
                // No guard left to drop: only the panic hook can write the file.
                std::mem::forget(session);
                let _s = trace::span("in_flight", "test");
                panic!("boom inside a profiled region");
            } else {
                let _keep = session;
                let _s = trace::span("in_flight", "test");
                panic!("boom inside a profiled region");
            }
        }
        "signal" => {
            for _ in 0..3 {
                drop(trace::span("before_signal", "test"));
            }
            println!("\nCHILD-READY");
            let deadline = Instant::now() + Duration::from_secs(120);
            while Instant::now() < deadline {
                let _s = trace::span("waiting", "test");
                std::thread::sleep(Duration::from_millis(2));
                session.step();
            }
            std::process::exit(3); // the signal never came
        }
        "stop-race" => {
            // A trace big enough that its export takes a while, then stop():
            // the parent sends SIGTERM while that export is being written.
            for i in 0..150_000u64 {
                drop(trace::span("big", "test").with_arg("i", i));
            }
            println!("CHILD-STOPPING");
            session.stop().unwrap();
            // The program would go on after stop(); the signal that arrived
            // during the export must still end it.
            std::thread::sleep(Duration::from_secs(5));
            std::process::exit(4);
        }
        "stop-panic" => {
            // Another thread panics the moment stop()'s export has its temp
            // file: the panic hook's export must not replace the file.
            for i in 0..150_000u64 {
                drop(trace::span("big", "test").with_arg("i", i));
            }
            let dir = session.path().parent().unwrap().to_path_buf();
            let watcher = std::thread::spawn(move || loop {
                let names = ranktune_testkit::file_names(&dir);
                if names.iter().any(|n| n.starts_with(".panic_0.json.tmp")) {
                    panic!("boom during stop");
                }
                if names.iter().any(|n| n == "panic_0.json") {
                    return; // the export was faster than this poll
                }
            });
            session.stop().unwrap();
            let panicked = watcher.join().is_err();
            println!("PANICKED={panicked}");
        }
        other => panic!("unknown role {other}"),
    }
}

fn child_cmd(role: &str, trace: &Path, rank: u32, world: u32) -> Command {
    let mut cmd = child_test("child", false);
    cmd.env(ROLE, role)
        .env("RANKTUNE_TRACE", trace)
        .env("RANKTUNE_RANK", rank.to_string())
        .env("RANKTUNE_WORLD_SIZE", world.to_string())
        .env("RANKTUNE_LOCAL_RANK", rank.to_string())
        .env_remove("RANKTUNE_PROFILE_ITERS")
        .env_remove("TLLM_PROFILE_START_STOP")
        .env_remove("RANKTUNE_TRACE_SIGNALS")
        .stdin(Stdio::null());
    cmd
}

#[test]
fn eight_ranks_same_path_eight_valid_files() {
    let dir = tempfile::tempdir().unwrap();
    for template in ["trace.json", "gz/trace.json.gz", "byhost/{host}-r{rank}.json"] {
        let trace = dir.path().join(template);
        let children: Vec<_> = (0..8)
            .map(|r| child_cmd("normal", &trace, r, 8).stdout(Stdio::null()).spawn().unwrap())
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        let host = {
            // The {host} case: learn the host name from rank 0's own file.
            let f = std::fs::read_dir(dir.path().join("byhost")).ok();
            f.and_then(|mut d| d.next()).map(|e| {
                let n = e.unwrap().file_name().into_string().unwrap();
                n.rsplit_once("-r").unwrap().0.to_string()
            })
        };
        let mut pids = std::collections::BTreeSet::new();
        for r in 0..8u64 {
            let file = match template {
                "trace.json" => dir.path().join(format!("trace_{r}.json")),
                "gz/trace.json.gz" => dir.path().join(format!("gz/trace_{r}.json.gz")),
                _ => dir.path().join(format!("byhost/{}-r{r}.json", host.as_deref().unwrap())),
            };
            let doc = check_trace(&file, r, 8);
            assert_eq!(steps(&doc), vec![0, 1, 2, 3, 4], "{}", file.display());
            assert_eq!(named(&doc, "work").len(), 5);
            assert_eq!(named(&doc, "helper").len(), 1);
            pids.insert(doc["otherData"]["pid"].as_u64().unwrap());
        }
        assert_eq!(pids.len(), 8, "eight distinct processes wrote");
    }
    // Nothing but the traces: no temp files, no probes.
    let top: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(top.is_empty(), "{top:?}");
}

#[test]
fn panic_in_a_profiled_region_leaves_a_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    for (role, in_flight) in [("panic-hook", 0), ("panic-unwind", 1)] {
        let trace = dir.path().join(format!("{role}.json"));
        let out = Cli::from(child_cmd(role, &trace, 1, 2)).run();
        assert!(!out.status.success(), "the child panicked");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("boom inside a profiled region"), "{stderr}");
        assert!(stderr.contains("ranktune: panic: trace written to"), "{stderr}");
        let doc = check_trace(&dir.path().join(format!("{role}_1.json")), 1, 2);
        assert_eq!(named(&doc, "done").len(), 3, "{role}: events so far");
        // The hook writes before unwinding; the guard dropped by unwinding
        // rewrites the file with the span the panic ended.
        assert_eq!(named(&doc, "in_flight").len(), in_flight, "{role}");
    }
}

#[cfg(unix)]
#[test]
fn sigterm_and_sigint_leave_a_valid_file_and_still_kill() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    for (sig, name) in [(libc::SIGTERM, "term"), (libc::SIGINT, "int")] {
        let trace = dir.path().join(format!("{name}.json"));
        let mut child = child_cmd("signal", &trace, 2, 4)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = LineReader::read(child.stdout.take().unwrap());
        let ready = lines.wait_for(|l| l.trim() == "CHILD-READY", Duration::from_secs(120));
        assert!(ready.is_ok(), "child never got ready");
        std::thread::sleep(Duration::from_millis(50)); // let it record a few iterations
        let sent = signal(&child, sig);
        assert!(sent.is_ok(), "{sent:?}");
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(sig),
            "{name}: the process died by the signal: {status:?}"
        );
        let doc = check_trace(&dir.path().join(format!("{name}_2.json")), 2, 4);
        assert_eq!(named(&doc, "before_signal").len(), 3, "{name}");
    }
}

/// A SIGTERM that arrives while `stop()` is exporting waits for that export,
/// writes nothing more (no empty session over the complete file, no temp
/// file left) and then ends the process by the signal.
#[cfg(unix)]
#[test]
fn sigterm_during_stop_keeps_the_complete_trace() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let mut caught = 0;
    for round in 0..20 {
        let sub = dir.path().join(format!("r{round}"));
        std::fs::create_dir(&sub).unwrap();
        let trace = sub.join("race.json");
        let child = child_cmd("stop-race", &trace, 0, 1)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = ranktune_testkit::KillOnDrop(child);
        let lines = LineReader::read(child.0.stdout.take().unwrap());
        let ready = lines.wait_for(|l| l.trim() == "CHILD-STOPPING", Duration::from_secs(120));
        assert!(ready.is_ok(), "round {round}: child never got to stop()");
        // Send the signal the moment the export's temp file appears.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut saw_temp = false;
        while Instant::now() < deadline {
            let temp = std::fs::read_dir(&sub)
                .unwrap()
                .any(|e| e.unwrap().file_name().to_string_lossy().starts_with(".race_0.json.tmp"));
            if temp {
                saw_temp = true;
                break;
            }
            if sub.join("race_0.json").exists() {
                break; // the export was faster than this poll
            }
        }
        assert!(signal(&child.0, libc::SIGTERM).is_ok());
        caught += usize::from(saw_temp);
        let status = ranktune_testkit::wait_within(&mut child.0, Duration::from_secs(120))
            .unwrap_or_else(|| panic!("round {round}: child did not end"));
        assert_eq!(status.signal(), Some(libc::SIGTERM), "round {round}: {status:?}");
        let doc = check_trace(&sub.join("race_0.json"), 0, 1);
        assert_eq!(named(&doc, "big").len(), 150_000, "round {round}: the complete trace");
        let left = ranktune_testkit::file_names(&sub);
        assert_eq!(left, vec!["race_0.json".to_string()], "round {round}: no temp file");
    }
    assert!(caught >= 10, "the signal met an export in only {caught} of 20 rounds");
}

/// A panic on another thread while `stop()` exports: the panic hook waits
/// for that export and writes nothing over the complete file.
#[test]
fn panic_during_stop_keeps_the_complete_trace() {
    let dir = tempfile::tempdir().unwrap();
    let mut caught = 0;
    for round in 0..5 {
        let sub = dir.path().join(format!("r{round}"));
        std::fs::create_dir(&sub).unwrap();
        let out = Cli::from(child_cmd("stop-panic", &sub.join("panic.json"), 0, 1)).run();
        assert!(out.status.success(), "{out}");
        caught += usize::from(out.stdout_text().contains("PANICKED=true"));
        let doc = check_trace(&sub.join("panic_0.json"), 0, 1);
        assert_eq!(named(&doc, "big").len(), 150_000, "round {round}: the complete trace");
        assert_eq!(ranktune_testkit::file_names(&sub), ["panic_0.json"], "round {round}");
    }
    assert!(caught >= 3, "the panic met an export in only {caught} of 5 rounds");
}
