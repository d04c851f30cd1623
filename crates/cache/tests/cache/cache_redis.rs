//! The Redis store against a real `redis-server` (one per test, on a free
//! loopback port; see `ranktune_testkit::redis`): merging saves, loading
//! only a rank's sections, untrusted values, foreign prefixes, many
//! processes saving at once, writers killed mid-save, and a server that is
//! stopped (SIGSTOP) or killed and restarted.
//!
//! Children are this test binary itself, started with `RANKTUNE_TEST_CHILD`
//! set; the `child` test below is their entry point and does nothing when
//! the variable is unset. Outside CI, without `redis-server` installed,
//! every test here skips loudly; in CI they must run.

use ranktune_cache::{
    new_wins, CacheData, CacheError, CacheLocation, EntryKey, Identity, RedisConfig, RedisStore,
    RedisUrl, Section, Store,
};
use ranktune_testkit::cache_fixtures::{self as fixtures, tiled_entry as entry};
use ranktune_testkit::redis::RedisServer;
use ranktune_testkit::{child_test, child_var, child_var_parsed, kill, test_path, LineReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "RANKTUNE_TEST_CHILD";

fn key(op: &str, a: u64, b: u64) -> EntryKey {
    fixtures::key(op, &[&[a, b]])
}

fn url(server: &RedisServer, prefix: &str) -> RedisUrl {
    match CacheLocation::parse(&format!("{}?prefix={prefix}", server.url(0))).unwrap() {
        CacheLocation::Redis(u) => u,
        other => panic!("{other:?}"),
    }
}

fn store(server: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::new(url(server, prefix), RedisConfig::default()).unwrap()
}

fn quick(server: &RedisServer, prefix: &str, timeout: Duration) -> RedisStore {
    let cfg = RedisConfig { connect_timeout: timeout, timeout, ..RedisConfig::default() };
    RedisStore::new(url(server, prefix), cfg).unwrap()
}

/// A raw command on the test server (planting bad values, reading keys).
fn raw(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url(0)).unwrap().get_connection().unwrap()
}

fn field(k: &EntryKey) -> String {
    serde_json::to_string(&(&k.op, &k.runner, &k.fingerprint, &k.bucket)).unwrap()
}

/// The entries rank `rank` saves in save `save`.
fn batch(rank: u32, save: u64, n: u64) -> CacheData {
    let mut d = CacheData::default();
    for i in 0..n {
        d.insert(Section::Rank(rank), key("gemm", save, i), entry(i));
    }
    d.insert(Section::Shared, key(&format!("shared{rank}"), save, 0), entry(rank as u64));
    d
}

fn spawn_child(mode: &str, url: &str, extra: &[(&str, String)]) -> Child {
    let mut cmd = child_test(&test_path(module_path!(), "child"), false);
    cmd.env(CHILD_ENV, mode).env("CHILD_URL", url).envs(extra.iter().map(|(k, v)| (k, v)));
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap()
}

/// Child entry point (a no-op in a normal test run).
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else { return };
    let store = CacheLocation::parse(&child_var("CHILD_URL")).unwrap().open().unwrap();
    match mode.as_str() {
        "burst" => {
            let (rank, saves, n) = (
                child_var_parsed::<u32>("RANK"),
                child_var_parsed::<u64>("SAVES"),
                child_var_parsed::<u64>("N"),
            );
            let go_at: u128 = child_var_parsed("GO_AT_MS");
            let now =
                || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
            while now().as_millis() < go_at {
                std::thread::sleep(Duration::from_millis(1));
            }
            for s in 0..saves {
                store.save(&batch(rank, s, n)).unwrap();
            }
        }
        "crash" => {
            // Save big batches forever, announcing every save that returned.
            use std::io::Write;
            let mut out = std::io::stdout();
            for i in 0.. {
                store.save(&batch(7, i, 2000)).unwrap();
                writeln!(out, "saved {i}").unwrap();
                out.flush().unwrap();
            }
        }
        other => panic!("unknown child mode {other}"),
    }
}

#[test]
fn saves_merge_and_a_rank_loads_only_its_sections() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server, "t");
    assert!(s.load().unwrap().data.is_empty(), "a new prefix is an empty cache");
    let mut id_update = batch(0, 0, 3);
    let id = Identity::current();
    id_update.metadata.environments.insert("env0".into(), id.clone());
    let r = s.save(&id_update).unwrap();
    assert_eq!((r.written, r.total), (4, 4));
    let r = s.save(&batch(1, 0, 2)).unwrap();
    assert_eq!((r.written, r.total), (3, 7), "other ranks' entries are kept");
    // The later save wins under the same key.
    let mut again = CacheData::default();
    again.insert(Section::Rank(0), key("gemm", 0, 1), entry(99));
    s.save(&again).unwrap();
    let all = s.load().unwrap();
    assert!(all.warnings.is_empty(), "{:?}", all.warnings);
    assert_eq!(all.data.len(), 7);
    assert_eq!(all.data.get(Section::Rank(0), &key("gemm", 0, 1)), Some(&entry(99)));
    assert_eq!(all.data.metadata.environments.get("env0"), Some(&id));
    assert_eq!(all.data.metadata.lib_version, env!("CARGO_PKG_VERSION"));
    assert!(all.data.metadata.created_unix > 0 && all.data.metadata.updated_unix > 0);

    let mine = s.load_sections(&[Section::Shared, Section::Rank(1)]).unwrap();
    let sections: Vec<Section> = mine.data.sections.keys().copied().collect();
    assert_eq!(sections, [Section::Shared, Section::Rank(1)]);
    assert_eq!(mine.data.len(), 2 + 2);
    assert_eq!(mine.data.metadata.environments.len(), 1, "metadata comes with a partial load");

    // Another prefix is another cache.
    assert!(store(&server, "other").load().unwrap().data.is_empty());
    // The documented layout.
    let mut c = raw(&server);
    let format: String = redis::cmd("HGET").arg("{t}:meta").arg("format").query(&mut c).unwrap();
    assert_eq!(format, "ranktune-cache");
    let mut members: Vec<String> =
        redis::cmd("SMEMBERS").arg("{t}:sections").query(&mut c).unwrap();
    members.sort();
    assert_eq!(members, ["rank_0", "rank_1", "shared"]);
    let n: usize = redis::cmd("HLEN").arg("{t}:s:rank_0").query(&mut c).unwrap();
    assert_eq!(n, 3);
}

#[test]
fn removals_prune_merge_and_superseding_decide_on_what_is_stored() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server, "t");
    s.save(&batch(0, 0, 4)).unwrap();
    s.save(&batch(1, 0, 4)).unwrap();
    // remove
    let r = s.remove(&[(Section::Rank(0), key("gemm", 0, 0))]).unwrap();
    assert_eq!((r.written, r.total), (1, 9));
    // remove_where
    let r = s
        .remove_where(&|sec, k, _| sec == Section::Rank(1) && k.bucket[0][1].as_u64() < Some(2))
        .unwrap();
    assert_eq!((r.written, r.total), (2, 7));
    // save_resolving: newest wins against the stored entry.
    let mut older = CacheData::default();
    let mut old_entry = entry(50);
    old_entry.created_unix = 1;
    older.insert(Section::Rank(0), key("gemm", 0, 1), old_entry);
    let mut newer_entry = entry(51);
    newer_entry.created_unix = 1_800_000_000;
    older.insert(Section::Rank(0), key("gemm", 0, 2), newer_entry.clone());
    let r = s.save_resolving(&older, &|_, _, stored, new| new_wins(stored, new)).unwrap();
    assert_eq!(r.written, 1, "only the newer entry is stored");
    let data = s.load().unwrap().data;
    assert_eq!(data.get(Section::Rank(0), &key("gemm", 0, 1)), Some(&entry(1)));
    assert_eq!(data.get(Section::Rank(0), &key("gemm", 0, 2)), Some(&newer_entry));
    // save_superseding: a shared entry replaces the ranks' own choices for
    // that op and bucket.
    let mut shared = CacheData::default();
    let mut agreed = entry(3);
    agreed.created_unix = 1_800_000_000;
    shared.insert(Section::Shared, key("gemm", 0, 3), agreed);
    let r = s.save_superseding(&shared).unwrap();
    assert_eq!((r.written, r.superseded), (1, 2));
    let data = s.load().unwrap().data;
    assert!(data.get(Section::Rank(0), &key("gemm", 0, 3)).is_none());
    assert!(data.get(Section::Rank(1), &key("gemm", 0, 3)).is_none());
    assert!(data.get(Section::Shared, &key("gemm", 0, 3)).is_some());
}

#[test]
fn bad_values_are_skipped_and_named_and_prune_drops_them() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server, "t");
    s.save(&batch(0, 0, 2)).unwrap();
    let mut c = raw(&server);
    let planted = field(&key("gemm", 9, 9));
    let _: () = redis::cmd("HSET")
        .arg("{t}:s:rank_0")
        .arg(&planted)
        .arg("{\"op\": __import__('os')")
        .query(&mut c)
        .unwrap();
    // A valid entry under the field of another key.
    let mut text = serde_json::to_value(entry(1)).unwrap();
    for (k, v) in [("op", "gemm"), ("runner", "blocked"), ("fingerprint", "f0")] {
        text[k] = v.into();
    }
    text["bucket"] = serde_json::json!([[0, 0]]);
    let _: () = redis::cmd("HSET")
        .arg("{t}:s:rank_0")
        .arg(field(&key("gemm", 5, 5)))
        .arg(text.to_string())
        .query(&mut c)
        .unwrap();
    // A value over the size limit.
    let _: () = redis::cmd("HSET")
        .arg("{t}:s:rank_0")
        .arg(field(&key("gemm", 6, 6)))
        .arg("x".repeat(ranktune_cache::MAX_ENTRY_BYTES + 1))
        .query(&mut c)
        .unwrap();
    let loaded = s.load().unwrap();
    assert_eq!(loaded.data.len(), 3, "the good entries load");
    assert_eq!(loaded.bad_entries, 3);
    let w = loaded.warnings.join("\n");
    assert!(w.contains(&format!("bad entry rank_0 {planted} in redis://127.0.0.1:")), "{w}");
    assert!(w.contains("another key"), "{w}");
    assert!(w.contains("more than the 1048576-byte limit"), "{w}");
    // A save keeps them as they are; prune drops them, naming each.
    s.save(&batch(1, 0, 1)).unwrap();
    assert_eq!(s.load().unwrap().bad_entries, 3);
    let r = s.remove_where(&|_, _, _| false).unwrap();
    assert_eq!(r.written, 3);
    assert_eq!(
        r.warnings.iter().filter(|w| w.contains(" dropped: ")).count(),
        3,
        "{:?}",
        r.warnings
    );
    assert_eq!(s.load().unwrap().bad_entries, 0);
}

#[test]
fn a_prefix_holding_something_else_is_refused_and_left_alone() {
    let Some(server) = RedisServer::start() else { return };
    let mut c = raw(&server);
    let _: () =
        redis::cmd("HSET").arg("{x}:meta").arg("format").arg("other").query(&mut c).unwrap();
    let s = store(&server, "x");
    assert!(matches!(s.load(), Err(CacheError::Unsupported { .. })));
    let e = s.save(&batch(0, 0, 1)).unwrap_err();
    assert!(matches!(e, CacheError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("Choose another ?prefix="), "{e}");
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 1, "nothing was written");
    // A future major version.
    let _: () = redis::cmd("HSET").arg("{y}:meta").arg("version").arg("2.0").query(&mut c).unwrap();
    let e = store(&server, "y").load().unwrap_err().to_string();
    assert!(e.contains("version \"2.0\""), "{e}");
    // A section key of another type: the save is refused whole.
    let _: () = redis::cmd("SET").arg("{z}:s:rank_1").arg("str").query(&mut c).unwrap();
    let z = store(&server, "z");
    let e = z.save(&batch(1, 0, 3)).unwrap_err();
    assert!(e.to_string().contains("not a hash"), "{e}");
    assert_eq!(z.load_sections(&[Section::Shared]).unwrap().data.len(), 0, "nothing applied");
}

#[test]
fn credentials_come_from_the_url_or_the_environment_and_are_never_printed() {
    let Some(server) = RedisServer::start_with(&["--requirepass", "s3cret-pw"]) else { return };
    let base = format!("redis://127.0.0.1:{}/0?prefix=t", server.port());
    let no_pw = CacheLocation::parse(&base).unwrap();
    let e = no_pw.open().unwrap().load().unwrap_err().to_string();
    assert!(e.contains("the server needs a password and none was given"), "{e}");
    assert!(!e.contains("()"), "{e}");
    let wrong =
        CacheLocation::parse(&format!("redis://:wrong-pw@127.0.0.1:{}/0", server.port())).unwrap();
    let e = wrong.open().unwrap().load().unwrap_err().to_string();
    assert!(
        e.contains("refused user `default` with the password given") && !e.contains("wrong-pw"),
        "{e}"
    );
    assert!(e.contains("redis://:***@127.0.0.1"), "{e}");
    let good =
        CacheLocation::parse(&format!("redis://:s3cret-pw@127.0.0.1:{}/0", server.port())).unwrap();
    assert!(!good.to_string().contains("s3cret"));
    good.open().unwrap().save(&batch(0, 0, 1)).unwrap();
}

#[test]
fn an_unreachable_server_fails_within_the_connect_timeout() {
    let Some(mut server) = RedisServer::start() else { return };
    let timeout = Duration::from_secs(2);
    let s = quick(&server, "t", timeout);
    server.stop();
    let t = Instant::now();
    let e = s.load().unwrap_err().to_string();
    // The timeout, plus what a loaded machine needs on top; never a hang.
    assert!(t.elapsed() < timeout + Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(e.contains("cannot connect") && e.contains("redis://127.0.0.1:"), "{e}");
}

#[test]
fn a_stopped_server_fails_the_save_within_the_timeout_and_it_resumes_whole() {
    let Some(server) = RedisServer::start() else { return };
    let s = quick(&server, "t", Duration::from_secs(1));
    s.save(&batch(0, 0, 10)).unwrap();
    let pid = server.pid().unwrap() as libc::pid_t;
    let send = |sig| {
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is
        // the test's own server.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    };
    send(libc::SIGSTOP);
    let t = Instant::now();
    let e = s.save(&batch(0, 1, 500)).unwrap_err().to_string();
    let waited = t.elapsed();
    // A fresh connection is refused within the connect timeout too.
    let e2 = quick(&server, "t", Duration::from_secs(1)).load().unwrap_err().to_string();
    send(libc::SIGCONT);
    // The 1 s timeout, plus what a loaded machine needs on top; never a hang.
    assert!(waited < Duration::from_secs(1 + 5), "{waited:?}");
    assert!(e.contains("no answer within 1.0s (RANKTUNE_REDIS_TIMEOUT)"), "{e}");
    assert!(e2.contains("no connection within 1.0s"), "{e2}");
    // The save that timed out is there whole or not at all, never in part.
    let s = store(&server, "t");
    let deadline = Instant::now() + Duration::from_secs(5);
    let n = loop {
        let n = s.load().unwrap().data.sections[&Section::Rank(0)].len();
        if n == 510 || Instant::now() > deadline {
            break n;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(n == 10 || n == 510, "a half-applied save: {n} entries");
    // And the store works again.
    s.save(&batch(0, 2, 5)).unwrap();
}

#[test]
fn a_killed_and_restarted_server_fails_clearly_then_works_again() {
    let Some(mut server) = RedisServer::start() else { return };
    let s = quick(&server, "t", Duration::from_secs(2));
    s.save(&batch(0, 0, 3)).unwrap();
    server.stop();
    let e = s.save(&batch(0, 1, 3)).unwrap_err().to_string();
    assert!(
        e.contains("the connection failed") || e.contains("cannot connect"),
        "a clear message: {e}"
    );
    server.restart();
    // Persistence is off in the test server: the data is gone, the store
    // reconnects and saves.
    let r = s.save(&batch(0, 2, 3)).unwrap();
    assert_eq!(r.total, 4);
}

#[test]
fn many_processes_saving_at_once_lose_nothing() {
    const PROCS: u32 = 32;
    const SAVES: u64 = 3;
    const N: u64 = 100;
    let Some(server) = RedisServer::start() else { return };
    let url = format!("{}?prefix=burst", server.url(0));
    let go_at =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            + 1500;
    let children: Vec<Child> = (0..PROCS)
        .map(|rank| {
            spawn_child(
                "burst",
                &url,
                &[
                    ("RANK", rank.to_string()),
                    ("SAVES", SAVES.to_string()),
                    ("N", N.to_string()),
                    ("GO_AT_MS", go_at.to_string()),
                ],
            )
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a writer failed");
    }
    let loaded = store(&server, "burst").load().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let mut expected = CacheData::default();
    for rank in 0..PROCS {
        for s in 0..SAVES {
            for (sec, k, e) in batch(rank, s, N).iter() {
                expected.insert(sec, k.clone(), e.clone());
            }
        }
    }
    assert_eq!(loaded.data.len(), expected.len(), "entries lost");
    for (sec, k, e) in expected.iter() {
        assert_eq!(loaded.data.get(sec, k), Some(e), "{sec} {k} missing");
    }
}

#[test]
fn writers_killed_mid_save_leave_whole_saves_only() {
    let Some(server) = RedisServer::start() else { return };
    let url = format!("{}?prefix=crash", server.url(0));
    let s = store(&server, "crash");
    let mut kills = 0;
    for round in 0..8u64 {
        let mut child = spawn_child("crash", &url, &[]);
        let lines = LineReader::read(child.stdout.take().unwrap());
        lines
            .wait_for(|l| l.starts_with("saved "), Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("round {round}: the writer made no progress"));
        std::thread::sleep(Duration::from_millis(round * 7 % 20));
        let status = kill(&mut child).unwrap();
        kills += usize::from(status.code().is_none());
        let returned: Vec<u64> = lines
            .rest()
            .iter()
            .filter_map(|l| l.strip_prefix("saved ").map(|i| i.parse().unwrap()))
            .collect();
        // Let the server finish whatever it had received.
        std::thread::sleep(Duration::from_millis(100));
        let data = s.load().unwrap().data;
        let rank = &data.sections[&Section::Rank(7)];
        let mut per_save = std::collections::BTreeMap::<ranktune_cache::Dim, usize>::new();
        for k in rank.keys() {
            *per_save.entry(k.bucket[0][0]).or_default() += 1;
        }
        for (save, n) in &per_save {
            assert_eq!(*n, 2000, "round {round}: save {save} is in part ({n} of 2000 entries)");
        }
        for i in returned {
            assert!(
                per_save.contains_key(&ranktune_cache::Dim::size(i)),
                "round {round}: save {i} returned but is missing"
            );
        }
        // Clean slate for the next round.
        let keys: Vec<_> = rank.keys().map(|k| (Section::Rank(7), k.clone())).collect();
        s.remove(&keys).unwrap();
    }
    assert_eq!(kills, 8, "every writer died by the signal");
}

/// An ACL user whose credentials are accepted but who may not use the
/// cache's keys is told so, with the key pattern; not "refused credentials".
#[test]
fn a_user_without_permission_for_the_prefix_is_told_which_keys() {
    let Some(server) = RedisServer::start() else { return };
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("limited")
        .arg("on")
        .arg(">lim-pw-123")
        .arg("~other:*")
        .arg("+@all")
        .query(&mut raw(&server))
        .unwrap();
    let url = format!("redis://limited:lim-pw-123@127.0.0.1:{}/0?prefix=team", server.port());
    let e = CacheLocation::parse(&url).unwrap().open().unwrap().load().unwrap_err().to_string();
    assert!(e.contains("accepted the credentials, but user `limited` may not use"), "{e}");
    assert!(e.contains("`team:*`") && !e.contains("lim-pw-123"), "{e}");
}
