//! Text a user, a file or a server controls never leaks a secret and never
//! crashes a printer: a Redis password holding any character is never
//! printed by the command, whichever path gives it the location (argument,
//! `RANKTUNE_CACHE`, `RANKTUNE_COLLECTIVE`); a cell wider than Rust's format
//! width limit (65,535) is clipped, not a panic.

use ranktune_cache::{Entry, EntryKey, FileStore, Section, Store};
use ranktune_testkit::cache_fixtures as fixtures;
use ranktune_testkit::{Cli, Output, LAUNCHER_VARS};
use std::path::Path;

fn ranktune(dir: &Path) -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .current_dir(dir)
        .env_remove(LAUNCHER_VARS)
        .env_remove(["RANKTUNE_CACHE", "TLLM_AUTOTUNER_CACHE_PATH", "RANKTUNE_COLLECTIVE"])
        .env_remove(["RANKTUNE_STRATEGY", "RANKTUNE_REDIS_PASSWORD"])
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Passwords built from the characters that end a URL's parts early, each
/// with a long run of letters that no message has by chance.
fn passwords() -> Vec<String> {
    let specials = ["/", "?", "#", "@", ":", "%", "+", "=", "&", " ", "/?#@"];
    let mut out = Vec::new();
    for (i, s) in specials.iter().enumerate() {
        let n = (i * 7919) % 97;
        out.push(format!("Zq{n}Xw{s}Vb9Kp{s}Lm"));
        out.push(format!("{s}Qr{n}Tz7Hc"));
    }
    out
}

/// The pieces of a password long enough to be recognised if printed.
fn leaked(pw: &str, text: &str) -> Option<String> {
    pw.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| p.len() >= 4)
        .find(|p| text.contains(p))
        .map(str::to_string)
}

#[test]
fn a_password_with_any_character_is_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    for pw in passwords() {
        for url in [
            format!("redis://:{pw}@127.0.0.1:1/0?prefix=x"),
            format!("redis://user:{pw}@127.0.0.1:1/0"),
            format!("redis://:{pw}@/0"),
        ] {
            let runs = [
                ranktune(dir.path()).args(["cache", "show"]).arg(&url).run(),
                ranktune(dir.path()).args(["cache", "check"]).arg(&url).run(),
                ranktune(dir.path())
                    .args(["tune", "--quick", "--ops", "softmax", "--max-tokens", "1"])
                    .env("RANKTUNE_CACHE", &url)
                    .run(),
                ranktune(dir.path())
                    .args(["tune", "--quick", "--ops", "softmax", "--max-tokens", "1"])
                    .args(["--rank", "0", "--world-size", "2", "--strategy", "parallel"])
                    .env("RANKTUNE_COLLECTIVE", &url)
                    .env("RANKTUNE_STRATEGY_TIMEOUT", "2")
                    .run(),
            ];
            for (i, out) in runs.iter().enumerate() {
                let t = text(out);
                assert_ne!(out.status.code(), Some(0), "run {i} with {url:?} should fail: {t}");
                assert_ne!(out.status.code(), Some(101), "run {i} panicked: {t}");
                if let Some(piece) = leaked(&pw, &t) {
                    panic!("run {i}: password piece {piece:?} of {pw:?} printed:\n{t}");
                }
            }
        }
    }
}

fn save(path: &Path, op: &str, bucket: Vec<Vec<u64>>) {
    let key = EntryKey { runner: "r".repeat(70_000), ..fixtures::key(op, &[&[1, 2]]) };
    let key = EntryKey { bucket: ranktune_cache::sizes_bucket(&bucket), ..key };
    let entry = Entry { checksum: "c".into(), ..fixtures::entry(serde_json::json!(1)) };
    FileStore::new(path).save(&fixtures::cache_of(&[(Section::Rank(0), key, entry)])).unwrap();
}

#[test]
fn cells_wider_than_any_format_width_are_clipped_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    save(&a, &"o".repeat(70_000), vec![vec![1; 200_000]]);
    save(&b, "gemm\u{1b}[31mred", vec![vec![8, 512]]);
    for args in [
        vec!["cache", "show", "a.json"],
        vec!["cache", "show", "b.json"],
        vec!["cache", "diff", "a.json", "b.json"],
    ] {
        let out = ranktune(dir.path()).args(&args).run();
        let t = text(&out);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{args:?}: {t}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        for line in stdout.lines() {
            assert!(line.chars().count() < 2_000, "{args:?}: a line of {} chars", line.len());
        }
        assert!(!stdout.contains('\u{1b}'), "{args:?}: a raw escape code printed: {stdout:?}");
    }
}

/// A file whose names hold terminal escape codes: no message, warning or
/// table of `show`, `check` or `import` lets one through.
#[test]
fn escape_codes_in_a_file_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let esc = "\u{1b}[2J\u{1b}]0;owned\u{7}";
    // One good entry whose op holds the codes, one bad one (negative time),
    // and a section named with them.
    let good = serde_json::json!({
        "op": format!("gemm{esc}"), "runner": format!("r{esc}"), "fingerprint": "f",
        "bucket": [[1, 2]], "runner_index": 0, "tactic": format!("t{esc}"), "time_us": 1.0,
        "checksum": "c", "env": "e", "created_unix": 0, "candidates": []
    });
    let mut bad = good.clone();
    bad["time_us"] = serde_json::json!(-1.0);
    bad["bucket"] = serde_json::json!([[3, 4]]);
    // Rank 1 chose another tactic: `check` says the ranks disagree, naming both.
    let mut other = good.clone();
    other["tactic"] = serde_json::json!(format!("u{esc}"));
    let mut doc = serde_json::json!({
        "format": "ranktune-cache", "version": "1.0",
        "metadata": {"lib_version": "0", "host": "h", "created_unix": 0, "updated_unix": 0,
                     "environments": {}},
        "rank_0": [good, bad],
        "rank_1": [other],
    });
    doc[format!("rank_{esc}")] = serde_json::json!([]);
    let path = dir.path().join("c.json");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let p = path.to_str().unwrap();
    let into = dir.path().join("into.json");
    for args in [
        vec!["cache", "show", p],
        vec!["cache", "check", p],
        vec!["cache", "import", into.to_str().unwrap(), p],
    ] {
        let out = ranktune(dir.path()).args(&args).run();
        let all = text(&out);
        assert!(!all.contains('\u{1b}') && !all.contains('\u{7}'), "{args:?}: {all:?}");
        assert!(all.contains("\\u{1b}[2J"), "{args:?} names it, escaped: {all}");
    }
}
