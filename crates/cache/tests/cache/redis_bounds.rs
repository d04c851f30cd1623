//! A hostile Redis server's cache bounded by counts as well as bytes: a
//! section hash of hundreds of thousands of empty fields (few bytes, much
//! memory), a sections set of millions of names and a sections key of the
//! wrong type are each refused on the server, before the reply is built,
//! with an error naming the key (issue: trust, round 3, items 8 and 9).

use ranktune_cache::{
    CacheData, CacheError, CacheLocation, EntryKey, RedisConfig, RedisStore, RedisUrl, Section,
    Store,
};
use ranktune_testkit::cache_fixtures::{self as fixtures, tiled_entry as entry};
use ranktune_testkit::redis::RedisServer;
use std::time::{Duration, Instant};

fn url(server: &RedisServer, prefix: &str) -> RedisUrl {
    match CacheLocation::parse(&format!("{}?prefix={prefix}", server.url(0))).unwrap() {
        CacheLocation::Redis(u) => u,
        other => panic!("{other:?}"),
    }
}

fn store_with(server: &RedisServer, prefix: &str, cfg: RedisConfig) -> RedisStore {
    RedisStore::new(url(server, prefix), cfg).unwrap()
}

fn raw(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url(0)).unwrap().get_connection().unwrap()
}

fn key(op: &str, a: u64) -> EntryKey {
    fixtures::key(op, &[&[a, 1]])
}

/// Saves one real entry, then plants `fields` empty fields beside it in
/// the shared section's hash.
fn plant_empty_fields(server: &RedisServer, prefix: &str, fields: usize) {
    let mut d = CacheData::default();
    d.insert(Section::Shared, key("gemm", 1), entry(1));
    store_with(server, prefix, RedisConfig::default()).save(&d).unwrap();
    let mut c = raw(server);
    let hash = format!("{{{prefix}}}:s:shared");
    for chunk in (0..fields).collect::<Vec<_>>().chunks(10_000) {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&hash);
        for i in chunk {
            cmd.arg(format!("f{i}")).arg("");
        }
        let _: i64 = cmd.query(&mut c).unwrap();
    }
}

fn redis_reason(e: CacheError) -> String {
    match e {
        CacheError::Redis { reason, .. } => reason,
        other => panic!("expected a Redis error, got {other}"),
    }
}

#[test]
fn a_section_with_more_entries_than_the_limit_is_refused_by_its_count() {
    let Some(server) = RedisServer::start() else { return };
    plant_empty_fields(&server, "many", 300_000);
    let cfg = RedisConfig { max_section_entries: 100_000, ..RedisConfig::default() };
    let t = Instant::now();
    let e = store_with(&server, "many", cfg).load().unwrap_err();
    let reason = redis_reason(e);
    assert!(reason.contains("{many}:s:shared holds 300001 entries"), "{reason}");
    assert!(reason.contains("RANKTUNE_CACHE_MAX_ENTRIES"), "{reason}");
    // Refused by HLEN: nothing was gathered, so it takes no time at all.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[test]
fn empty_fields_count_toward_the_byte_cap() {
    let Some(server) = RedisServer::start() else { return };
    plant_empty_fields(&server, "empty", 300_000);
    // 300,000 fields of about 7 bytes of text each: 2 MB of text, but they
    // count 64 bytes more each (19 MB), past a 10 MB cap.
    let cfg = RedisConfig { max_total_bytes: 10_000_000, ..RedisConfig::default() };
    let reason = redis_reason(store_with(&server, "empty", cfg).load().unwrap_err());
    assert!(reason.contains("reading {empty}:s:shared would pass 10000000 bytes"), "{reason}");
    // Under a cap that holds them, they load: every planted field is a bad
    // entry (skipped and named), the real one is kept.
    let cfg = RedisConfig { max_total_bytes: 100_000_000, ..RedisConfig::default() };
    let loaded = store_with(&server, "empty", cfg).load().unwrap();
    assert_eq!(loaded.data.len(), 1);
    assert_eq!(loaded.bad_entries, 300_000);
}

#[test]
fn a_hash_past_the_byte_cap_is_refused_without_being_read_whole() {
    let Some(server) = RedisServer::start() else { return };
    let mut d = CacheData::default();
    for i in 0..2_000 {
        d.insert(Section::Shared, key("gemm", i), entry(i));
    }
    store_with(&server, "big", RedisConfig::default()).save(&d).unwrap();
    let cfg = RedisConfig { max_total_bytes: 50_000, ..RedisConfig::default() };
    let reason = redis_reason(store_with(&server, "big", cfg).load().unwrap_err());
    assert!(reason.contains("reading {big}:s:shared would pass 50000 bytes"), "{reason}");
}

#[test]
fn a_sections_set_of_too_many_names_is_refused_naming_it() {
    let Some(server) = RedisServer::start() else { return };
    let mut c = raw(&server);
    for chunk in (0..70_000u32).collect::<Vec<_>>().chunks(10_000) {
        let mut cmd = redis::cmd("SADD");
        cmd.arg("{sets}:sections");
        for i in chunk {
            cmd.arg(format!("rank_{i}"));
        }
        let _: i64 = cmd.query(&mut c).unwrap();
    }
    let reason =
        redis_reason(store_with(&server, "sets", RedisConfig::default()).load().unwrap_err());
    assert!(
        reason.contains("{sets}:sections lists 70000 sections, more than the 65537"),
        "{reason}"
    );
}

#[test]
fn a_sections_key_of_another_type_is_named_with_its_type() {
    let Some(server) = RedisServer::start() else { return };
    let mut c = raw(&server);
    let _: () = redis::cmd("SET").arg("{typed}:sections").arg("x").query(&mut c).unwrap();
    let reason =
        redis_reason(store_with(&server, "typed", RedisConfig::default()).load().unwrap_err());
    assert!(
        reason.contains("{typed}:sections is a string, not the set of section names"),
        "{reason}"
    );
    assert!(!reason.contains("WRONGTYPE"), "{reason}");
}

#[test]
fn field_names_from_the_server_are_quoted_with_control_characters_escaped() {
    let Some(server) = RedisServer::start() else { return };
    plant_empty_fields(&server, "esc", 0);
    let mut c = raw(&server);
    let _: i64 = redis::cmd("HSET")
        .arg("{esc}:s:shared")
        .arg("\u{1b}[2J\u{1b}]0;owned\u{7}field")
        .arg("\u{1b}[31mnot json")
        .query(&mut c)
        .unwrap();
    let loaded = store_with(&server, "esc", RedisConfig::default()).load().unwrap();
    assert_eq!(loaded.bad_entries, 1);
    let w = loaded.warnings.join("\n");
    assert!(!w.chars().any(|ch| ch.is_control() && ch != '\n'), "{w:?}");
    assert!(w.contains(r"\u{1b}[2J"), "{w}");
}
