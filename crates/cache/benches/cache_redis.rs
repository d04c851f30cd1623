//! The Redis store against the file store, side by side in one run, on a
//! redis-server this benchmark starts on a free loopback port:
//!
//! 1. P processes × N entries saved at the same moment (P = 8, 32, 64),
//!    into Redis and into the file store;
//! 2. one process saving all 64 × N entries into the same Redis in one
//!    save — the target: (1) at 64 within 2× of this;
//! 3. one rank's load of what it uses (`shared` and its own section) from
//!    a cache of 64 × N entries: Redis (`load_sections`) against the file
//!    store (which reads the whole file).
//!
//! Run: `cargo bench -p ranktune-cache --bench cache_redis` (env:
//! RANKTUNE_BENCH_ENTRIES, default 1000; RANKTUNE_BENCH_REPS, default 3).
//! Each burst's children build their entries, print `ready`, wait for one
//! byte on stdin; the clock runs from the release to the last exit.

use ranktune_cache::{CacheData, CacheLocation, Entry, EntryKey, FileStore, Section, Store};
use ranktune_testkit::redis::RedisServer;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "RANKTUNE_BENCH_CHILD";

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The entries ranks `ranks` save (the same shape as `cache_scale`'s).
fn entries(ranks: std::ops::Range<u32>, n: u64) -> CacheData {
    let mut d = CacheData::default();
    for rank in ranks {
        for i in 0..n {
            let m = 1u64 << (i % 14);
            let key = EntryKey {
                op: "fp8_gemm".into(),
                runner: "CutlassFp8GemmRunner".into(),
                fingerprint: format!("{:016x}", (u64::from(rank) << 32) | i),
                bucket: ranktune_cache::sizes_bucket(&[
                    vec![m, 4096],
                    vec![4096, 4096],
                    vec![4096],
                ]),
            };
            let entry = Entry {
                runner_index: (i % 3) as u32,
                tactic: serde_json::json!({"tile": [128, 256], "cluster": [1, 2], "stages": i % 7}),
                time_us: 12.3 + i as f64 * 1e-3,
                candidates: vec![],
                checksum: "9f86d081884c7d65".into(),
                env: "bench".into(),
                created_unix: 1_764_480_000,
            };
            d.insert(Section::Rank(rank), key, entry);
        }
    }
    d
}

/// A child: saves ranks `first..first+count` (N entries each) in one save.
fn child(first: &str) {
    let first: u32 = first.parse().unwrap_or(0);
    let count = env_num("RANKTUNE_BENCH_COUNT", 1) as u32;
    let n = env_num("RANKTUNE_BENCH_ENTRIES", 1000);
    let loc = std::env::var("RANKTUNE_BENCH_LOCATION").unwrap_or_default();
    let store = CacheLocation::parse(&loc).and_then(|l| l.open()).unwrap();
    let data = entries(first..first + count, n);
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut go = [0u8; 1];
    let _ = std::io::stdin().read(&mut go);
    if let Err(e) = store.save(&data) {
        eprintln!("ranks from {first}: save failed: {e}");
        std::process::exit(1);
    }
}

fn burst(mut cmds: Vec<Command>) -> Duration {
    let mut children: Vec<_> = cmds
        .iter_mut()
        .map(|c| {
            c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap()
        })
        .collect();
    for c in &mut children {
        let mut line = String::new();
        BufReader::new(c.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "child did not start");
    }
    let start = Instant::now();
    let mut stdins: Vec<_> = children.iter_mut().map(|c| c.stdin.take().unwrap()).collect();
    for s in &mut stdins {
        s.write_all(b"g").unwrap();
        s.flush().unwrap();
    }
    for c in &mut children {
        assert!(c.wait().unwrap().success(), "a writer failed");
    }
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Children saving `per_child` ranks each, `procs` of them, into `loc`.
fn commands(loc: &str, procs: u32, per_child: u32) -> Vec<Command> {
    let exe = std::env::current_exe().unwrap();
    (0..procs)
        .map(|p| {
            let mut c = Command::new(&exe);
            c.env(CHILD_ENV, (p * per_child).to_string())
                .env("RANKTUNE_BENCH_COUNT", per_child.to_string())
                .env("RANKTUNE_BENCH_LOCATION", loc);
            c
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    if let Ok(first) = std::env::var(CHILD_ENV) {
        child(&first);
        return;
    }
    let n = env_num("RANKTUNE_BENCH_ENTRIES", 1000);
    let reps = env_num("RANKTUNE_BENCH_REPS", 3).max(1);
    let Some(server) = RedisServer::start() else {
        println!("cache_redis: skipped (no redis-server)");
        return;
    };
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cache_redis");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let mut conn = redis::Client::open(server.url(0)).unwrap().get_connection().unwrap();
    let mut flush = || {
        let _: () = redis::cmd("FLUSHALL").query(&mut conn).unwrap();
    };
    println!(
        "cache_redis: N = {n} entries per process, {reps} repetitions (median), redis-server on \
         127.0.0.1:{}",
        server.port()
    );
    println!("{:<44} {:>12} {:>12} {:>8}", "case", "redis ms", "file ms", "file/redis");
    let mut at64 = Duration::ZERO;
    for procs in [8u32, 32, 64] {
        let mut redis_t = Vec::new();
        let mut file_t = Vec::new();
        for rep in 0..reps {
            flush();
            let url = format!("{}?prefix=b{procs}", server.url(0));
            redis_t.push(burst(commands(&url, procs, 1)));
            let got = CacheLocation::parse(&url).unwrap().open().unwrap().load().unwrap();
            assert_eq!(got.data.len() as u64, u64::from(procs) * n, "redis lost entries");
            let file = base.join(format!("f{procs}-{rep}.json"));
            file_t.push(burst(commands(file.to_str().unwrap(), procs, 1)));
            let got = FileStore::new(&file).load().unwrap();
            assert_eq!(got.data.len() as u64, u64::from(procs) * n, "file store lost entries");
        }
        let (r, f) = (median(redis_t), median(file_t));
        if procs == 64 {
            at64 = r;
        }
        println!(
            "{:<44} {:>12.1} {:>12.1} {:>7.2}x",
            format!("{procs} processes x {n} entries at once"),
            ms(r),
            ms(f),
            f.as_secs_f64() / r.as_secs_f64()
        );
    }
    // One process saving all 64 x N entries in one save.
    let mut one = Vec::new();
    for _ in 0..reps {
        flush();
        let url = format!("{}?prefix=one", server.url(0));
        one.push(burst(commands(&url, 1, 64)));
    }
    let one = median(one);
    println!(
        "{:<44} {:>12.1}\n64 processes at once / one process saving all: {:.2}x (target <= 2x)",
        format!("1 process x {} entries (one save)", 64 * n),
        ms(one),
        at64.as_secs_f64() / one.as_secs_f64()
    );
    // A rank's load of its sections from a cache of 64 x N entries.
    flush();
    let url = format!("{}?prefix=load", server.url(0));
    let redis_store = CacheLocation::parse(&url).unwrap().open().unwrap();
    let file = base.join("load.json");
    let file_store = FileStore::new(&file);
    let mut all = entries(0..64, n);
    let one_entry = entries(0..1, 1);
    if let Some((_, k, e)) = one_entry.iter().next() {
        all.insert(Section::Shared, k.clone(), e.clone());
    }
    redis_store.save(&all).unwrap();
    file_store.save(&all).unwrap();
    let mine = [Section::Shared, Section::Rank(17)];
    let time = |s: &dyn Store| {
        median(
            (0..reps.max(5))
                .map(|_| {
                    let t = Instant::now();
                    let got = s.load_sections(&mine).unwrap();
                    assert_eq!(got.data.len() as u64, n + 1);
                    t.elapsed()
                })
                .collect(),
        )
    };
    let (r, f) = (time(redis_store.as_ref()), time(&file_store));
    println!(
        "{:<44} {:>12.1} {:>12.1} {:>7.2}x",
        format!("one rank's load (shared + rank_17) of {} entries", all.len()),
        ms(r),
        ms(f),
        f.as_secs_f64() / r.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&base);
}
