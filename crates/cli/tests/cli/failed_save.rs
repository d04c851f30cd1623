//! A save that fails writing (a full disk, a quota, a file-size limit)
//! leaves nothing new beside the cache: no empty `C.spool/` until the next
//! successful save, and the cache as it was.

use ranktune_testkit::Cli;
use std::path::PathBuf;

#[test]
fn a_save_that_cannot_write_leaves_no_spool_directory() {
    let dir = tempfile::tempdir().unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/tests/fixtures/trtllm/timings_238.json");
    // A file-size limit of one 1 KiB block makes the spool write fail with
    // EFBIG (SIGXFSZ ignored), as a full disk fails it with ENOSPC.
    let script = format!(
        "trap '' XFSZ; ulimit -f 1; exec {} cache import c.json {}",
        env!("CARGO_BIN_EXE_ranktune"),
        src.display()
    );
    let out = Cli::new("bash").args(["-c", &script]).current_dir(dir.path()).run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("File too large"), "{err}");
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!left.iter().any(|n| n.contains("spool")), "left beside the cache: {left:?}");
    assert!(!dir.path().join("c.json").exists(), "{left:?}");
}
