//! Cache paths that are not ordinary cache files: a huge (sparse) file, a
//! device, a FIFO. ranktune must refuse them with an error naming the path,
//! never allocate the file's size, never hang, and never replace them.

use ranktune_cache::{CacheData, FileStore, Store};
use ranktune_testkit::{within, Cli, Output};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::time::Duration;

/// Nothing here may hang: each step fails the test after this instead.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs ranktune with `args`, failing the test (instead of hanging) if it
/// has not finished after a generous deadline.
fn ranktune(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let scrub =
        ["RANKTUNE_LOG", "RANKTUNE_LOCK_TIMEOUT", "RANKTUNE_CACHE_MAX_BYTES", "RANKTUNE_TRACE"];
    let cli = Cli::new(env!("CARGO_BIN_EXE_ranktune")).env_remove(scrub).limit(DEADLINE);
    cli.args(args).envs(envs.to_vec()).run()
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// A character device like /dev/null at `path`, if this user may make one.
fn mknod_null(path: &Path) -> bool {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) == 0 }
}

#[test]
fn a_huge_sparse_file_is_refused_by_name_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.json");
    std::fs::File::create(&path).unwrap().set_len(1 << 40).unwrap();
    let p = path.to_str().unwrap();
    for args in [
        vec!["cache", "show", p],
        vec!["cache", "check", p],
        vec!["cache", "prune", p],
        vec!["tune", "--quick", "--ops", "softmax", "--cache", p],
    ] {
        let out = ranktune(&args, &[]);
        let err = out.stderr_text();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(p) && err.contains("limit"), "{args:?}: {err}");
        assert!(!err.contains("memory allocation"), "{args:?}: {err}");
    }
    // Never moved aside or rewritten.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 40);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing but the file");
    // The library refuses it the same way.
    let e = FileStore::new(&path).load().unwrap_err().to_string();
    assert!(e.contains("limit"), "{e}");
}

#[test]
fn the_size_limit_can_be_raised_or_lowered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.json");
    std::fs::write(&path, b"{}").unwrap();
    let p = path.to_str().unwrap();
    let out = ranktune(&["cache", "show", p], &[("RANKTUNE_CACHE_MAX_BYTES", "1")]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr_text());
    assert!(out.stderr_text().contains("RANKTUNE_CACHE_MAX_BYTES"), "{}", out.stderr_text());
    let out = ranktune(&["cache", "show", p], &[("RANKTUNE_CACHE_MAX_BYTES", "lots")]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr_text());
    let out = ranktune(&["cache", "show", p], &[("RANKTUNE_CACHE_MAX_BYTES", "2")]);
    assert!(out.status.success(), "{}", out.stderr_text());
}

#[test]
fn a_fifo_is_refused_without_hanging_and_stays_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fifo.json");
    mkfifo(&path);
    let p = path.to_str().unwrap();
    let good = dir.path().join("good.json");
    std::fs::write(&good, b"{}").unwrap();
    let g = good.to_str().unwrap();
    for args in [
        vec!["cache", "show", p],
        vec!["cache", "check", p],
        vec!["cache", "import", g, p],
        vec!["cache", "diff", g, p],
        vec!["tune", "--quick", "--ops", "softmax", "--cache", p],
    ] {
        let out = ranktune(&args, &[]);
        let err = out.stderr_text();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("FIFO") && err.contains(p), "{args:?}: {err}");
    }
    assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_fifo());
    // A save into it is refused too, and leaves nothing behind in the spool.
    let update = one_entry(1, 1);
    assert!(FileStore::new(&path).save(&update).is_err());
    assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_fifo());
}

#[test]
fn a_device_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nulldev");
    if !mknod_null(&path) {
        eprintln!("skipped: this user cannot create a device node");
        return;
    }
    let p = path.to_str().unwrap();
    let out = ranktune(&["tune", "--quick", "--ops", "softmax", "--cache", p], &[]);
    let err = out.stderr_text();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("character device") && err.contains(p), "{err}");
    assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_char_device());
    // Also as an export target: a rename must not replace it.
    let src = dir.path().join("src.json");
    std::fs::write(&src, b"{}").unwrap();
    let out = ranktune(&["cache", "export", src.to_str().unwrap(), "-o", p, "--force"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr_text());
    assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_char_device());
}

#[test]
fn an_empty_file_is_called_empty_by_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, b"").unwrap();
    let e = empty.to_str().unwrap();
    let out = ranktune(&["cache", "check", e], &[]);
    let text = out.stdout_text();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.starts_with("empty file"), "{text}");
    let out = ranktune(&["cache", "show", e], &[]);
    let text = out.stdout_text();
    assert!(out.status.success() && text.contains("empty cache") && !text.contains('?'), "{text}");
    let into = dir.path().join("into.json");
    let out = ranktune(&["cache", "import", into.to_str().unwrap(), e], &[]);
    let text = out.stdout_text();
    assert!(out.status.success(), "{}", out.stderr_text());
    assert!(text.contains("(empty)") && !text.contains("trtllm"), "{text}");
    // A missing file: the same error and exit code for show and check.
    let missing = dir.path().join("missing.json");
    for cmd in ["show", "check"] {
        let out = ranktune(&["cache", cmd, missing.to_str().unwrap()], &[]);
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        assert!(out.stderr_text().contains("does not exist"), "{cmd}: {}", out.stderr_text());
    }
}

#[test]
fn an_io_error_names_the_os_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    // The lock file's name is taken by a directory: opening it fails with
    // the OS's "Is a directory".
    std::fs::create_dir(dir.path().join("c.json.lock")).unwrap();
    let mut data = CacheData::default();
    data.metadata.environments.insert("e".into(), ranktune_cache::Identity::current());
    let e = FileStore::new(dir.path().join("c.json")).save(&data).unwrap_err();
    // The chain as anyhow's `{:#}` prints it.
    let mut text = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        text = format!("{text}: {s}");
        src = s.source();
    }
    assert_eq!(text.matches("os error").count(), 1, "{text}");
}

#[test]
fn store_warnings_are_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tune.json");
    std::fs::write(
        &cache,
        br#"{"format":"ranktune-cache","version":"1.0","rank_0":[{"op":"gemm","runner":"r","fingerprint":"f","bucket":[[1]],"runner_index":0,"tactic":1,"time_us":-1,"checksum":"c","env":"e","created_unix":1}]}"#,
    )
    .unwrap();
    let c = cache.to_str().unwrap();
    // The tuner's load (the session logs what the store returns) ...
    let out =
        ranktune(&["tune", "--quick", "--ops", "softmax", "--max-tokens", "2", "--cache", c], &[]);
    let err = out.stderr_text();
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("bad entry rank_0[0]").count(), 1, "{err}");
    // ... and prune, which drops it.
    let out = ranktune(&["cache", "prune", c], &[]);
    let err = out.stderr_text();
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("bad entry rank_0[0]").count(), 1, "{err}");
}

#[test]
fn a_malformed_lock_timeout_is_an_error_for_every_cache_command() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.json");
    std::fs::write(&src, b"{}").unwrap();
    let into = dir.path().join("into.json");
    let (s, i) = (src.to_str().unwrap(), into.to_str().unwrap());
    for args in [
        vec!["cache", "import", i, s],
        vec!["cache", "merge", "-o", i, s],
        vec!["cache", "show", s],
        vec!["cache", "check", s],
        vec!["cache", "prune", s],
    ] {
        let out = ranktune(&args, &[("RANKTUNE_LOCK_TIMEOUT", "abc")]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            out.stderr_text().contains("RANKTUNE_LOCK_TIMEOUT"),
            "{args:?}: {}",
            out.stderr_text()
        );
    }
    assert!(!into.exists());
}

#[test]
fn prune_refuses_an_unknown_environment_and_can_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.json");
    let data = one_entry_in("0123456789abcdef", 1, 1);
    FileStore::new(&path).save(&data).unwrap();
    let before = std::fs::read(&path).unwrap();
    let p = path.to_str().unwrap();
    let out = ranktune(&["cache", "prune", p, "--env", "deadbeef"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr_text().contains("Known environments"), "{}", out.stderr_text());
    let out = ranktune(&["cache", "prune", p, "--dry-run"], &[]);
    let text = out.stdout_text();
    assert!(out.status.success() && text.contains("would remove 1"), "{text}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing changed");
}

/// The key of gemm bucket `n`.
fn gemm_key(n: u64) -> ranktune_cache::EntryKey {
    ranktune_cache::EntryKey {
        op: "gemm".into(),
        runner: "r".into(),
        fingerprint: "f".into(),
        bucket: ranktune_cache::sizes_bucket(&[vec![n]]),
    }
}

/// One entry of gemm bucket `n` for rank 0.
fn one_entry(n: u64, tactic: i64) -> CacheData {
    one_entry_in("e", n, tactic)
}

/// One entry of gemm bucket `n` for rank 0, measured in environment `env`.
fn one_entry_in(env: &str, n: u64, tactic: i64) -> CacheData {
    let mut update = CacheData::default();
    update.insert(
        ranktune_cache::Section::Rank(0),
        gemm_key(n),
        ranktune_cache::Entry {
            runner_index: 0,
            tactic: serde_json::json!(tactic),
            time_us: 1.0,
            candidates: vec![],
            checksum: "c".into(),
            env: env.into(),
            created_unix: 1,
        },
    );
    update
}

#[test]
fn things_put_in_the_spool_are_skipped_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tune.json");
    let spool = dir.path().join("tune.json.spool");
    FileStore::new(&cache).save(&one_entry(1, 1)).unwrap();
    // (The save removed the spool it emptied; someone makes it again.)
    std::fs::create_dir_all(&spool).unwrap();
    // A FIFO, a directory and symlinks named like spool files, a device if
    // this user may make one, and a plain directory.
    let fifo = spool.join("00-fifo.json");
    mkfifo(&fifo);
    let subdir = spool.join("01-dir.json");
    std::fs::create_dir(&subdir).unwrap();
    std::fs::create_dir(spool.join("stuff")).unwrap();
    // The link points at a valid cache document: never read through it.
    let other = dir.path().join("other.json");
    FileStore::new(&other).save(&one_entry(99, 99)).unwrap();
    let other_bytes = std::fs::read(&other).unwrap();
    let link = spool.join("02-link.json");
    std::os::unix::fs::symlink(&other, &link).unwrap();
    let fifo_link = spool.join("03-fifo-link.json");
    std::os::unix::fs::symlink(&fifo, &fifo_link).unwrap();
    let device = spool.join("04-null.json");
    let have_device = mknod_null(&device);

    let c = cache.clone();
    let (saves, loaded, inspected) =
        within(DEADLINE, "saving beside odd spool entries", move || {
            let saves: Vec<_> =
                (2..5).map(|n| FileStore::new(&c).save(&one_entry(n, n as i64)).unwrap()).collect();
            (saves, FileStore::new(&c).load().unwrap(), FileStore::new(&c).inspect().unwrap())
        });
    // Every save went in, nothing came from the link.
    for l in [&loaded, &inspected] {
        assert_eq!(l.data.len(), 4, "{:?}", l.warnings);
        for n in 1..5 {
            let e = l.data.get(ranktune_cache::Section::Rank(0), &gemm_key(n)).unwrap();
            assert_eq!(e.tactic, serde_json::json!(n));
        }
    }
    // Each is named in the warnings, with what to do.
    let mut odd = vec![&fifo, &subdir, &link, &fifo_link];
    if have_device {
        odd.push(&device);
    }
    for w in [&saves[0].warnings, &loaded.warnings] {
        for p in &odd {
            let p = p.display().to_string();
            assert!(w.iter().any(|w| w.contains(&p) && w.contains("remove it")), "{p}: {w:?}");
        }
    }
    assert!(loaded.warnings.iter().any(|w| w.contains("FIFO")), "{:?}", loaded.warnings);
    // All left as they were.
    let kind = |p: &Path| std::fs::symlink_metadata(p).unwrap().file_type();
    assert!(kind(&fifo).is_fifo());
    assert!(kind(&subdir).is_dir() && kind(&spool.join("stuff")).is_dir());
    assert!(kind(&link).is_symlink() && kind(&fifo_link).is_symlink());
    assert_eq!(std::fs::read(&other).unwrap(), other_bytes);
    if have_device {
        assert!(kind(&device).is_char_device());
    }
    // The CLI reads such a cache too, without hanging, and says it once.
    let c = cache.to_str().unwrap();
    let out = ranktune(&["cache", "show", c], &[]);
    let err = out.stderr_text();
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches(&*fifo.display().to_string()).count(), 1, "{err}");
}
