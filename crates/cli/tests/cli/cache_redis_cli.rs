//! `ranktune` with a Redis cache, against a real `redis-server` (one per
//! test on a free loopback port; skipped loudly outside CI when none is
//! installed, never in CI): `tune --ranks 4` into Redis then `cache check`
//! on the URL; every `cache` subcommand on a URL; passwords never printed;
//! and a tune whose server died before the save keeps what it measured in
//! a local file that `cache import` pushes later.

use ranktune_testkit::redis::RedisServer;
use ranktune_testkit::{Cli, Output};
use std::path::Path;
use std::time::{Duration, Instant};

fn ranktune(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
    Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .env_remove([
            "RANKTUNE_LOG",
            "RANKTUNE_CACHE",
            "TLLM_AUTOTUNER_CACHE_PATH",
            "RANKTUNE_STRATEGY",
            "RANKTUNE_REDIS_PASSWORD",
            "RANKTUNE_COLLECTIVE",
        ])
        .current_dir(dir)
        .args(args)
        .envs(envs.to_vec())
        .run()
}

fn raw(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url(0)).unwrap().get_connection().unwrap()
}

#[test]
fn tune_four_ranks_into_redis_then_check_and_every_cache_command_on_the_url() {
    let Some(server) = RedisServer::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("redis://127.0.0.1:{}/0?prefix=t", server.port());
    let out = ranktune(
        dir.path(),
        &["tune", "--ranks", "4", "--quick", "--ops", "softmax", "--cache", &url, "--json"],
        &[],
    )
    .expect_success();
    let report = out.json();
    assert_eq!(report["cache"], url.as_str());
    assert_eq!(report["world_size"], 4);
    let out = ranktune(dir.path(), &["cache", "check", &url], &[]).expect_success();
    assert!(out.stdout_text().starts_with(&format!("{url}: healthy (")), "{}", out.stdout_text());
    // Nothing of the cache went into the working directory.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // show, merge -o a file, import the file into another prefix, diff,
    // prune --dry-run, export.
    let show = ranktune(dir.path(), &["cache", "show", &url, "--json"], &[]).expect_success();
    let n = show.json()["entries"].as_array().unwrap().len();
    assert!(n > 0);
    let merged =
        ranktune(dir.path(), &["cache", "merge", "-o", "all.json", &url], &[]).expect_success();
    assert!(merged.stdout_text().contains(&format!("{n} entries")), "{}", merged.stdout_text());
    let other = format!("redis://127.0.0.1:{}/0?prefix=copy", server.port());
    let imported =
        ranktune(dir.path(), &["cache", "import", &other, "all.json"], &[]).expect_success();
    assert!(
        imported.stdout_text().contains(&format!("imported {n} entries into {other}")),
        "{}",
        imported.stdout_text()
    );
    ranktune(dir.path(), &["cache", "diff", &url, &other], &[]).expect_success();
    let prune =
        ranktune(dir.path(), &["cache", "prune", &other, "--dry-run"], &[]).expect_success();
    assert!(
        prune.stdout_text().contains("would remove 0 stale entries"),
        "{}",
        prune.stdout_text()
    );
    let pruned = ranktune(dir.path(), &["cache", "prune", &other], &[]).expect_success();
    assert!(
        pruned.stdout_text().contains(&format!("{n} entries left")),
        "{}",
        pruned.stdout_text()
    );
    ranktune(dir.path(), &["cache", "export", &url, "-o", "trt.json"], &[]).expect_success();
    assert!(dir.path().join("trt.json").is_file());
}

#[test]
fn passwords_are_never_printed_and_reach_the_ranks_through_the_environment() {
    let Some(server) = RedisServer::start_with(&["--requirepass", "s3cret-pw"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let port = server.port();
    let with_pw = format!("redis://:s3cret-pw@127.0.0.1:{port}/0?prefix=p");
    let out = ranktune(
        dir.path(),
        &["tune", "--ranks", "2", "--quick", "--ops", "rmsnorm", "--cache", &with_pw],
        &[],
    );
    let all = format!("{}{}", out.stdout_text(), out.stderr_text());
    assert!(out.status.success(), "{all}");
    assert!(!all.contains("s3cret"), "{all}");
    assert!(all.contains(&format!("redis://:***@127.0.0.1:{port}/0?prefix=p")), "{all}");
    // The password from the environment, for a URL without one.
    let plain = format!("redis://127.0.0.1:{port}/0?prefix=p");
    let out = ranktune(
        dir.path(),
        &["cache", "check", &plain],
        &[("RANKTUNE_REDIS_PASSWORD", "s3cret-pw")],
    )
    .expect_success();
    assert!(out.stdout_text().contains("healthy"), "{}", out.stdout_text());
    // Without it: a clear error, exit 2, no hang.
    let out = ranktune(dir.path(), &["cache", "show", &plain], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stderr_text().contains("needs a password and none was given"),
        "{}",
        out.stderr_text()
    );
    let wrong = format!("redis://:wrong-pw@127.0.0.1:{port}/0");
    let out = ranktune(dir.path(), &["cache", "show", &wrong], &[]);
    assert!(!out.stderr_text().contains("wrong-pw"), "{}", out.stderr_text());
}

#[test]
fn an_unreachable_server_is_a_clear_error_before_tuning() {
    let Some(mut server) = RedisServer::start() else { return };
    let port = server.port();
    server.stop();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("redis://127.0.0.1:{port}/0");
    let t = Instant::now();
    let out = ranktune(
        dir.path(),
        &["tune", "--quick", "--ops", "softmax", "--cache", &url],
        &[("RANKTUNE_REDIS_CONNECT_TIMEOUT", "2")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr_text());
    assert!(t.elapsed() < Duration::from_secs(20));
    let err = out.stderr_text();
    assert!(err.contains("cannot connect") && err.contains(&url), "{err}");
    let out = ranktune(dir.path(), &["cache", "check", "valkey://h/0"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr_text().contains("not a cache location this build knows"));
}

#[test]
fn a_tune_whose_server_died_keeps_what_it_measured_for_cache_import() {
    // A server that keeps every write it acknowledged across a kill (the
    // test server's default keeps nothing): a checkpoint that landed before
    // the kill must be there after the restart, as on a real server.
    let always = ["--appendonly", "yes", "--appendfsync", "always"];
    let Some(mut server) = RedisServer::start_with(&always) else { return };
    let port = server.port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("redis://127.0.0.1:{port}/0?prefix=f");
    let running = Cli::new(env!("CARGO_BIN_EXE_ranktune"))
        .env_remove(["RANKTUNE_CACHE", "RANKTUNE_STRATEGY"])
        .env("RANKTUNE_LOG", "debug")
        .env("RANKTUNE_REDIS_CONNECT_TIMEOUT", "1")
        .current_dir(dir.path())
        .args(["tune", "--ops", "gemm", "--max-tokens", "256", "--cache", &url])
        .spawn();
    // Once the rank reports its first measured bucket it has loaded the
    // cache (an open connection alone is not enough: the load may still be
    // under way). Stop it there, kill the server, and let it go on: the
    // server is gone at save time, whatever the machine's speed.
    running
        .stderr()
        .wait_for(|l| l.contains(" done ("), Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("the rank never finished a bucket: {e:?}"));
    running.signal(libc::SIGSTOP).unwrap();
    server.stop();
    running.signal(libc::SIGCONT).unwrap();
    let out = running.wait();
    let err = out.stderr_text();
    assert_eq!(out.status.code(), Some(2), "{err}");
    let file = err
        .split_whitespace()
        .find(|w| w.contains("ranktune-unsaved-f-rank0-"))
        .unwrap_or_else(|| panic!("no fallback file named: {err}"))
        .trim_end_matches([';', ','])
        .to_string();
    assert!(err.contains(&format!("ranktune cache import '{url}'")), "{err}");
    let fallback = dir.path().join(&file);
    assert!(fallback.is_file(), "{err}");
    server.restart();
    let out = ranktune(dir.path(), &["cache", "import", &url, &file], &[]).expect_success();
    assert!(out.stdout_text().contains("imported"), "{}", out.stdout_text());
    let check = ranktune(dir.path(), &["cache", "check", &url], &[]).expect_success();
    assert!(check.stdout_text().contains("healthy"), "{}", check.stdout_text());
    // Durable progress: what the checkpoints saved before the server died
    // is in Redis, the rest in the file: all 9 buckets (1 … 256), none
    // lost; failing checkpoints warned once, not at every bucket.
    let show = ranktune(dir.path(), &["cache", "show", &url, "--json"], &[]).expect_success();
    assert_eq!(show.json()["entries"].as_array().map(Vec::len), Some(9), "{}", show.stdout_text());
    assert!(err.matches("could not save progress").count() <= 1, "{err}");
}

/// The cache and the collective read a Redis URL by one rule (ranktune-redis):
/// what one accepts the other accepts, what one refuses the other refuses.
#[test]
fn the_cache_and_the_collective_accept_and_refuse_the_same_urls() {
    use ranktune_cache::CacheLocation;
    use ranktune_collective::CollectiveChoice;
    let long = "p".repeat(200);
    let too_long = "p".repeat(201);
    for (url, good) in [
        ("redis://h:1/0?prefix=team/a".to_string(), true),
        (format!("redis://h:1/0?prefix={long}"), true),
        ("redis://h:1/0?prefix=a:b.c_d-e".to_string(), true),
        ("redis://u:pa/ss@h:1/0".to_string(), true),
        (format!("redis://h:1/0?prefix={too_long}"), false),
        ("redis://h:1/0?prefix=a*b".to_string(), false),
        ("redis://h:1/0?prefix=".to_string(), false),
        ("redis://h:99999/0".to_string(), false),
        ("redis://h/notadb".to_string(), false),
    ] {
        let cache = CacheLocation::parse(&url).map(|_| ()).map_err(|e| e.to_string());
        let coll = CollectiveChoice::parse(&url).map(|_| ()).map_err(|e| e.to_string());
        assert_eq!((cache.is_ok(), coll.is_ok()), (good, good), "{url}: {cache:?} {coll:?}");
    }
}

/// A prefix with `/` (refused by the collective before the two shared one
/// rule) works for a job whose ranks meet on the cache's server; a password
/// holding `/` is never printed.
#[test]
fn a_prefix_with_a_slash_serves_the_cache_and_the_ranks_and_a_slashed_password_stays_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let url = "redis://u:se/cret@127.0.0.1:1/0";
    let out = ranktune(
        dir.path(),
        &["tune", "--ranks", "2", "--quick", "--ops", "softmax", "--cache", url],
        &[("RANKTUNE_REDIS_CONNECT_TIMEOUT", "1")],
    );
    let text = format!("{}{}", out.stdout_text(), out.stderr_text());
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("redis://u:***@127.0.0.1:1/0"), "{text}");
    assert!(!text.contains("se/cret") && !text.contains("cret@"), "{text}");

    let Some(server) = RedisServer::start() else { return };
    let url = format!("redis://127.0.0.1:{}/0?prefix=team/a", server.port());
    let out = ranktune(
        dir.path(),
        &["tune", "--ranks", "2", "--quick", "--ops", "softmax", "--cache", &url],
        &[],
    );
    assert!(out.status.success(), "{}{}", out.stdout_text(), out.stderr_text());
    let keys: Vec<String> =
        redis::cmd("KEYS").arg("team/a:collective:*").query(&mut raw(&server)).unwrap();
    assert!(!keys.is_empty(), "the ranks met elsewhere");
}

/// One rule for "nothing there": a Redis prefix holding nothing is exit 2
/// with a message naming the prefix, as a missing file is.
#[test]
fn an_empty_or_mistyped_prefix_is_nothing_there_like_a_missing_file() {
    let Some(server) = RedisServer::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("redis://127.0.0.1:{}/0?prefix=mistyped", server.port());
    let out = ranktune(dir.path(), &["cache", "show", &url], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stdout_text());
    assert!(
        out.stderr_text().contains("holds no cache: nothing is stored under the prefix `mistyped`"),
        "{}",
        out.stderr_text()
    );
    let out = ranktune(dir.path(), &["cache", "show", "missing.json"], &[]);
    assert_eq!(out.status.code(), Some(2));
    // A file without metadata says so, not "written by ranktune ? on ?".
    std::fs::write(dir.path().join("nometa.json"), br#"{"shared": []}"#).unwrap();
    let out = ranktune(dir.path(), &["cache", "show", "nometa.json"], &[]).expect_success();
    assert!(out.stdout_text().contains("the cache records no metadata"), "{}", out.stdout_text());
    assert!(!out.stdout_text().contains('?'), "{}", out.stdout_text());
}

/// One prefix rule for the cache and the collective: a prefix the cache
/// takes (a `/`, 80 characters) also carries a 2-rank collective `tune`.
#[test]
fn a_prefix_the_cache_allows_also_carries_the_collective() {
    let Some(server) = RedisServer::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("team/a{}", "x".repeat(74));
    let url = format!("redis://127.0.0.1:{}/0?prefix={prefix}", server.port());
    let args = ["tune", "--ranks", "2", "--quick", "--ops", "softmax", "--max-tokens", "2"];
    let out = ranktune(dir.path(), &[&args[..], &["--cache", &url]].concat(), &[]).expect_success();
    assert!(
        out.stdout_text().contains("in the shared section, written by every rank"),
        "{}",
        out.stdout_text()
    );
    let out = ranktune(dir.path(), &["cache", "check", &url], &[]).expect_success();
    assert!(out.stdout_text().contains("healthy (2 entries"), "{}", out.stdout_text());
}

/// An import into a server that needs a password, without one: the message
/// names the save once and says what is missing (the server drops a long
/// unauthenticated command before it can answer NOAUTH).
#[test]
fn an_import_without_the_password_says_what_is_missing_once() {
    let Some(server) = RedisServer::start_with(&["--requirepass", "s3cret-pw"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("redis://127.0.0.1:{}/0?prefix=z", server.port());
    let src = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/tests/fixtures/trtllm/timings_238.json");
    let out = ranktune(dir.path(), &["cache", "import", &url, src.to_str().unwrap()], &[]);
    let err = out.stderr_text();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("saving into").count(), 1, "{err}");
    assert!(err.contains("needs a password and none was given"), "{err}");
}
