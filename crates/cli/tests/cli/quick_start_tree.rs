//! After the quick start in a clone, `git status` is clean: local ranks
//! meet in a private per-job directory (0700 under `$TMPDIR`, removed
//! afterwards), not in `.ranktune-collective/` beside the cache, and the
//! repository's `.gitignore` covers the cache and its lock.

use ranktune_testkit::{Cli, LAUNCHER_VARS};
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_quick_start_leaves_a_clean_tree_and_no_meeting_place() {
    if Command::new("git").arg("--version").output().is_err() {
        eprintln!("SKIPPED: git is not installed");
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::copy(root.join(".gitignore"), repo.path().join(".gitignore")).unwrap();
    git(repo.path(), &["init", "-q"]);
    git(repo.path(), &["add", ".gitignore"]);
    git(
        repo.path(),
        &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ignore rules"],
    );

    let out = Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .current_dir(repo.path())
        .env_remove(LAUNCHER_VARS)
        .env_remove(["RANKTUNE_CACHE", "TLLM_AUTOTUNER_CACHE_PATH", "RANKTUNE_COLLECTIVE"])
        .env_remove(["RANKTUNE_COLLECTIVE_DIR", "RANKTUNE_STRATEGY", "RANKTUNE_TRACE"])
        .env("TMPDIR", tmp.path())
        .args(["tune", "--ranks", "2", "--quick", "--ops", "softmax", "--max-tokens", "4"])
        .run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(repo.path().join("ranktune-cache.json").is_file());
    assert!(!repo.path().join(".ranktune-collective").exists(), "ranks met in the working tree");
    assert_eq!(git(repo.path(), &["status", "--porcelain", "--untracked-files=all"]), "");
    // The private meeting place is gone.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ranktune-job-"))
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}
