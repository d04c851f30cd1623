//! Cache paths that are not ordinary cache files: a huge (sparse) file, a
//! device, a FIFO. ranktune must refuse them with an error naming the path,
//! never allocate the file's size, never hang, and never replace them.

use ranktune::cache::{CacheData, FileStore, Store};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs ranktune with `args`, failing the test (instead of hanging) if it
/// has not finished after a generous deadline.
fn ranktune(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ranktune"));
    cmd.args(args)
        .env_remove("RANKTUNE_LOG")
        .env_remove("RANKTUNE_LOCK_TIMEOUT")
        .env_remove("RANKTUNE_CACHE_MAX_BYTES")
        .env_remove("RANKTUNE_TRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ranktune {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
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
        let err = stderr(&out);
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
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("RANKTUNE_CACHE_MAX_BYTES"), "{}", stderr(&out));
    let out = ranktune(&["cache", "show", p], &[("RANKTUNE_CACHE_MAX_BYTES", "lots")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = ranktune(&["cache", "show", p], &[("RANKTUNE_CACHE_MAX_BYTES", "2")]);
    assert!(out.status.success(), "{}", stderr(&out));
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
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("FIFO") && err.contains(p), "{args:?}: {err}");
    }
    assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_fifo());
    // A save into it is refused too, and leaves nothing behind in the spool.
    let mut update = CacheData::default();
    update.insert(
        ranktune::cache::Section::Rank(0),
        ranktune::cache::EntryKey {
            op: "gemm".into(),
            runner: "r".into(),
            fingerprint: "f".into(),
            bucket: vec![vec![1]],
        },
        ranktune::cache::Entry {
            runner_index: 0,
            tactic: serde_json::json!(1),
            time_us: 1.0,
            candidates: vec![],
            checksum: "c".into(),
            env: "e".into(),
            created_unix: 1,
        },
    );
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
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("character device") && err.contains(p), "{err}");
    assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_char_device());
    // Also as an export target: a rename must not replace it.
    let src = dir.path().join("src.json");
    std::fs::write(&src, b"{}").unwrap();
    let out = ranktune(&["cache", "export", src.to_str().unwrap(), "-o", p, "--force"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_char_device());
}
