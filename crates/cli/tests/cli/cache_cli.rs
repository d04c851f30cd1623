//! `ranktune cache show|check|prune` as users run them.

use ranktune_cache::{CacheData, Entry, EntryKey, FileStore, Identity, Section, Store};
use ranktune_testkit::cache_fixtures as fixtures;
use ranktune_testkit::{Cli, Output};
use std::os::fd::AsRawFd;
use std::path::Path;

/// ranktune without the variables that would change what it does here.
fn ranktune(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let cli = Cli::new(env!("CARGO_BIN_EXE_ranktune"));
    cli.env_remove(["RANKTUNE_LOG", "RANKTUNE_LOCK_TIMEOUT"]).args(args).envs(envs.to_vec()).run()
}

fn key(op: &str, m: u64) -> EntryKey {
    fixtures::key(op, &[&[m, 64]])
}

fn entry(tactic: i64, env: &str) -> Entry {
    Entry {
        time_us: 10.0 + tactic as f64,
        checksum: "c".into(),
        env: env.into(),
        created_unix: 1_764_480_000,
        ..fixtures::entry(serde_json::json!(tactic))
    }
}

/// rank 0 and 1 agree on gemm 64 but disagree on gemm 128; rank 2's entry
/// was measured on another machine; one shared entry.
fn sample(path: &Path) -> (String, String) {
    let here = Identity::current();
    let mut other = here.clone();
    other.device_name = "Another CPU".into();
    let (h, o) = (here.digest(), other.digest());
    let mut d = CacheData::default();
    d.metadata.environments.insert(h.clone(), here);
    d.metadata.environments.insert(o.clone(), other);
    d.insert(Section::Rank(0), key("gemm", 64), entry(3, &h));
    d.insert(Section::Rank(1), key("gemm", 64), entry(3, &h));
    d.insert(Section::Rank(0), key("gemm", 128), entry(5, &h));
    d.insert(Section::Rank(1), key("gemm", 128), entry(7, &h));
    d.insert(Section::Rank(2), key("softmax", 8), entry(1, &o));
    d.insert(Section::Shared, key("rmsnorm", 8), entry(2, &h));
    FileStore::new(path).save(&d).unwrap();
    (h, o)
}

#[test]
fn show_prints_a_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    sample(&path);
    let p = path.to_str().unwrap();
    let out = ranktune(&["cache", "show", p], &[]);
    assert!(out.status.success(), "{}", out.stderr_text());
    let text = out.stdout_text();
    assert!(text.starts_with("SECTION"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("rank_") || l.starts_with("shared")).count(),
        6,
        "{text}"
    );
    assert!(text.contains("6 entries in 4 section(s), 1 stale"), "{text}");

    let out = ranktune(&["cache", "show", p, "--json"], &[]);
    assert!(out.status.success(), "{}", out.stderr_text());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 6);
    assert!(v["metadata"]["environments"].as_object().unwrap().len() == 2);
    let shared = entries.iter().find(|e| e["op"] == "rmsnorm").unwrap();
    assert!(shared["rank"].is_null());
    let stale: Vec<_> = entries.iter().filter(|e| e["stale"] == true).collect();
    assert_eq!(stale.len(), 1);
    assert_eq!(stale[0]["rank"], 2);
    for field in ["op", "runner", "fingerprint", "bucket", "tactic", "time_us"] {
        assert!(entries.iter().all(|e| !e[field].is_null()), "{field}");
    }

    let out = ranktune(&["cache", "show", p, "--rank", "1", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // What rank 1 loads: its own entries and the shared one.
    let got = v["entries"].as_array().unwrap();
    assert!(got.iter().all(|e| e["rank"] == 1 || e["section"] == "shared"), "{v}");
    assert_eq!(got.iter().filter(|e| e["rank"] == 1).count(), 2);
    assert_eq!(got.iter().filter(|e| e["section"] == "shared").count(), 1);
}

#[test]
fn check_reports_one_line_per_problem() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let (_, other) = sample(&path);
    let p = path.to_str().unwrap();
    let out = ranktune(&["cache", "check", p], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", out.stdout_text());
    let text = out.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("measured elsewhere: rank_2: 1 entries") && lines[0].contains(&other),
        "{text}"
    );
    assert!(lines[1].starts_with("ranks disagree on gemm 128x64:"), "{text}");
    assert!(lines[1].contains("rank_0 chose") && lines[1].contains("rank_1 chose"), "{text}");

    // Bad entries are problems too; a damaged file is reported, not moved.
    let mut damaged = std::fs::read_to_string(&path).unwrap();
    damaged = damaged.replacen("\"time_us\":15.0", "\"time_us\":-15.0", 1);
    std::fs::write(&path, &damaged).unwrap();
    let text = ranktune(&["cache", "check", p], &[]).stdout_text();
    assert!(text.lines().any(|l| l.contains("bad entry") && l.contains("time_us")), "{text}");
    std::fs::write(&path, b"{\"rank_0\": [").unwrap();
    let out = ranktune(&["cache", "check", p], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout_text().starts_with("unusable:") && out.stdout_text().contains("does not parse"),
        "{}",
        out.stdout_text()
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"rank_0\": [");

    let out = ranktune(&["cache", "check", dir.path().join("nope.json").to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2), "a missing file is an error, as for show");
    assert!(out.stderr_text().contains("does not exist"), "{}", out.stderr_text());
}

#[test]
fn check_passes_a_healthy_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let here = Identity::current().digest();
    let mut d = CacheData::default();
    d.insert(Section::Rank(0), key("gemm", 64), entry(3, &here));
    d.insert(Section::Rank(1), key("gemm", 64), entry(3, &here));
    FileStore::new(&path).save(&d).unwrap();
    let out = ranktune(&["cache", "check", path.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", out.stdout_text());
    assert!(
        out.stdout_text().contains("healthy (2 entries in 2 section(s))"),
        "{}",
        out.stdout_text()
    );
}

#[test]
fn prune_removes_stale_entries_through_the_locked_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let (here, other) = sample(&path);
    let p = path.to_str().unwrap();
    let out = ranktune(&["cache", "prune", p, "--env", &other], &[]);
    assert!(out.status.success(), "{}", out.stderr_text());
    assert!(out.stdout_text().contains("removed 5 stale entries"), "{}", out.stdout_text());
    let left = FileStore::new(&path).load().unwrap().data;
    assert_eq!(left.len(), 1);
    assert!(left.iter().all(|(_, _, e)| e.env == other));

    sample(&path);
    let out = ranktune(&["cache", "prune", p], &[]);
    assert!(out.status.success(), "{}", out.stderr_text());
    let left = FileStore::new(&path).load().unwrap().data;
    assert_eq!(left.len(), 5, "{}", out.stdout_text());
    assert!(left.iter().all(|(_, _, e)| e.env == here));

    let out = ranktune(&["cache", "prune", p, "--env", "not-hex!"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr_text().contains("--env"), "{}", out.stderr_text());
}

#[test]
fn a_held_lock_is_announced_once_then_times_out_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    sample(&path);
    let lock = dir.path().join("c.json.lock");
    let holder = std::fs::OpenOptions::new().write(true).open(&lock).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(unsafe { libc::flock(holder.as_raw_fd(), libc::LOCK_EX) }, 0);
    std::fs::write(&lock, format!("pid {} on testhost\n", std::process::id())).unwrap();
    let out =
        ranktune(&["cache", "prune", path.to_str().unwrap()], &[("RANKTUNE_LOCK_TIMEOUT", "1.5")]);
    assert_eq!(out.status.code(), Some(2));
    let err = out.stderr_text();
    assert_eq!(
        err.lines().filter(|l| l.contains("warning:") && l.contains("waiting for lock on")).count(),
        1,
        "{err}"
    );
    assert!(err.contains(&format!("pid {} on testhost", std::process::id())), "{err}");
    assert!(err.contains("timed out") && err.contains(lock.to_str().unwrap()), "{err}");
    // Nothing changed.
    assert_eq!(FileStore::new(&path).load().unwrap().data.len(), 6);
    drop(holder);

    let out =
        ranktune(&["cache", "prune", path.to_str().unwrap()], &[("RANKTUNE_LOCK_TIMEOUT", "soon")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr_text().contains("RANKTUNE_LOCK_TIMEOUT"), "{}", out.stderr_text());
}
