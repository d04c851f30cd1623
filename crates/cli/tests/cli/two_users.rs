//! Two real Unix users sharing a sticky world-writable directory (as on a
//! cluster's scratch space): the attacker plants a directory link one level
//! up from the cache file, the victim's `cache import` must refuse it and
//! create nothing in the victim's private directory, whatever the kernel's
//! `protected_symlinks` says (issue: trust, round 3, item 6).
//!
//! The users are made with `useradd` (root only). Outside CI, when this is
//! not root or `useradd` is missing, the test skips loudly; in CI it must run.

use ranktune_testkit::redis::in_ci;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

const ATTACKER: &str = "ranktune-attacker";
const VICTIM: &str = "ranktune-victim";

/// The uid and gid of `name`, made with `useradd` when missing; `None` when
/// users cannot be made here.
fn user(name: &str) -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").arg(flag).arg(name).output().ok()?;
        String::from_utf8(out.stdout).ok()?.trim().parse().ok()
    };
    if id("-u").is_none() {
        let made = Command::new("useradd")
            .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
            .status();
        // Another test run may have made it meanwhile: look again.
        if !made.is_ok_and(|s| s.success()) && id("-u").is_none() {
            return None;
        }
    }
    Some((id("-u")?, id("-g")?))
}

fn skip(why: &str) {
    assert!(!in_ci(), "two-user test cannot run in CI: {why}");
    eprintln!("SKIPPED (not in CI): two-user symlink test: {why}");
}

fn chown(path: &Path, (uid, gid): (u32, u32)) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A temporary root (searchable by everyone) holding `shared`: root's,
/// sticky and world-writable, like /tmp; and the two users.
struct Scene {
    root: tempfile::TempDir,
    shared: std::path::PathBuf,
    attacker: (u32, u32),
    victim: (u32, u32),
}

/// The scene, or `None` (skipped loudly; a failure in CI) where users
/// cannot be made.
fn scene() -> Option<Scene> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip("not root, cannot make users");
        return None;
    }
    let (Some(attacker), Some(victim)) = (user(ATTACKER), user(VICTIM)) else {
        skip("useradd failed");
        return None;
    };
    let root = tempfile::tempdir().unwrap();
    chmod(root.path(), 0o755);
    let shared = root.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    chmod(&shared, 0o1777);
    Some(Scene { root, shared, attacker, victim })
}

/// `ranktune cache import CACHE SRC` run as `user` in `dir`.
fn import_as(user: (u32, u32), dir: &Path, cache: impl AsRef<Path>, src: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(["cache", "import"])
        .arg(cache.as_ref())
        .arg(src)
        .env_remove("RANKTUNE_LOG")
        .env_remove("RANKTUNE_CACHE")
        .current_dir(dir)
        .uid(user.0)
        .gid(user.1)
        .output()
        .unwrap()
}

#[test]
fn a_directory_link_planted_one_level_up_is_refused_for_another_user() {
    let Some(Scene { root, shared, attacker, victim }) = scene() else { return };
    // The victim's private directory, and an export the victim imports.
    let home = root.path().join("victim-home");
    std::fs::create_dir(&home).unwrap();
    chown(&home, victim);
    chmod(&home, 0o700);
    let src = home.join("src.json");
    std::fs::write(&src, b"{}").unwrap();
    chown(&src, victim);
    // The attacker's plant: a world-writable directory of theirs in the
    // shared one, `c.json` in it linking into the victim's home, and a
    // directory link to it under the name the victim uses.
    let evil = shared.join("evil");
    std::fs::create_dir(&evil).unwrap();
    chown(&evil, attacker);
    chmod(&evil, 0o777);
    let planted = home.join("planted-by-attacker.json");
    symlink(&planted, evil.join("c.json")).unwrap();
    chown(&evil.join("c.json"), attacker);
    let proj = shared.join("proj2");
    symlink(&evil, &proj).unwrap();
    chown(&proj, attacker);

    let cache = proj.join("c.json");
    let out = import_as(victim, root.path(), &cache, &src);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "stdout: {}\nstderr: {err}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(err.contains("refusing to follow the symbolic link") && err.contains("proj2"), "{err}");
    assert!(err.contains(ATTACKER), "names the link's owner: {err}");
    // Nothing was made in the victim's home: neither the planted name nor
    // its lock or spool.
    let mut made: Vec<String> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    made.sort();
    assert_eq!(made, vec!["src.json".to_string()], "{err}");
    // Nor in the attacker's directory.
    assert_eq!(std::fs::read_dir(&evil).unwrap().count(), 1);

    // The victim's own link in the same shared directory is followed.
    let mine = shared.join("mine");
    symlink(&home, &mine).unwrap();
    chown(&mine, victim);
    let out = import_as(victim, root.path(), mine.join("own.json"), &src);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(home.join("own.json").exists());
}

#[test]
fn a_foreign_damaged_cache_in_a_sticky_directory_names_its_owner() {
    let Some(Scene { root, shared, attacker, victim }) = scene() else { return };
    let garbage = shared.join("c.json");
    std::fs::write(&garbage, b"{ not json").unwrap();
    chown(&garbage, attacker);
    chmod(&garbage, 0o644);
    let src = shared.join("src.json");
    std::fs::write(&src, b"{}").unwrap();
    chown(&src, victim);
    let out = import_as(victim, root.path(), &garbage, &src);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot be set aside") && err.contains("sticky directory"), "{err}");
    assert!(err.contains(&format!("({ATTACKER})")) && err.contains(VICTIM), "{err}");
    assert!(!err.contains("Operation not permitted"), "{err}");
    assert_eq!(std::fs::read(&garbage).unwrap(), b"{ not json");
}
