//! What durable progress costs: the same buckets tuned through a session
//! that saves only at the end (`SaveEvery::End`, the behaviour before
//! checkpoints), by the default policy (`Auto`) and after every bucket
//! (`Every(0)`), interleaved in one run, into the JSON file store and (when
//! `redis-server` is installed) a Redis store.
//!
//! `cargo bench -p ranktune-tune --bench durable [-- --rounds N]`
//!
//! Each round, for each policy (in rotating order), a fresh tuner and a
//! fresh cache tune 16 buckets of one op with a checkpoint after each, then
//! finish (the final save); the time counted is the whole session, load to
//! final save. Three ops: candidates of ~2 µs (about 1 ms a bucket: the
//! worst case, tiny CPU kernels as `tune --quick` has them), of ~80 µs
//! (a few ms a bucket) and of ~1 ms (tens of ms a bucket; real kernels take
//! longer still). The medians of the rounds are compared: cost per bucket,
//! what saving adds per bucket over `End`, and the ratio.

use ranktune_cache::{CacheLocation, FileStore, Store};
use ranktune_testkit::redis::RedisServer;
mod support;

use ranktune_tune::isolation::Isolation;
use ranktune_tune::*;
use std::hint::black_box;
use std::time::{Duration, Instant};
use support::{tuner, Rows, Spin};

/// Buckets per session.
const BUCKETS: u32 = 16;

/// One session under `policy` into `store`: (seconds in all, saves made,
/// seconds spent saving).
fn session(op: &Op<Rows>, store: &dyn Store, policy: SaveEvery) -> (f64, u32, f64) {
    let t = tuner(Isolation::Off);
    let t0 = Instant::now();
    let mut s = Session::start(&t, store).unwrap_or_else(|e| panic!("{e}")).save_every(policy);
    let (mut saves, mut saving) = (0, Duration::ZERO);
    for b in 0..BUCKETS {
        black_box(t.choose_one(op, &Rows { shapes: [[1 << b]] }));
        if let Some(c) = s.checkpoint().unwrap_or_else(|e| panic!("{e}")) {
            saves += 1;
            saving += c.took;
        }
    }
    let end = Instant::now();
    if s.flush().unwrap_or_else(|e| panic!("{e}")).is_some() {
        saves += 1;
        saving += end.elapsed();
    }
    drop(s);
    (t0.elapsed().as_secs_f64(), saves, saving.as_secs_f64())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

const POLICIES: [(&str, SaveEvery); 3] = [
    ("end (save at the end)", SaveEvery::End),
    ("auto (the default)", SaveEvery::Auto),
    ("every bucket (0)", SaveEvery::Every(Duration::ZERO)),
];

/// Runs `rounds` interleaved rounds of every policy into stores made by
/// `store(round, policy)`, and prints the comparison.
fn compare(what: &str, rounds: usize, store: &dyn Fn(usize, usize) -> Box<dyn Store>) {
    for (label, work) in [
        ("candidates of ~2 µs", 2_000u64),
        ("candidates of ~80 µs", 80_000),
        ("candidates of ~1 ms", 1_000_000),
    ] {
        let runners: Vec<Box<dyn Runner<Rows>>> = vec![Box::new(Spin { work })];
        let config = TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)])
            .with_max_tokens(1 << (BUCKETS - 1));
        let op = Op::new("spin", runners, config).unwrap_or_else(|e| panic!("{e}"));
        let mut total = [vec![], vec![], vec![]];
        let mut saving = [vec![], vec![], vec![]];
        let mut saves = [0; 3];
        for round in 0..rounds {
            for k in 0..POLICIES.len() {
                let p = (round + k) % POLICIES.len();
                let st = store(round, p);
                let (secs, n, save_secs) = session(&op, st.as_ref(), POLICIES[p].1);
                total[p].push(secs);
                saving[p].push(save_secs);
                saves[p] = n;
            }
        }
        let per = |v: &mut Vec<f64>| median(v) * 1e3 / f64::from(BUCKETS);
        let end = per(&mut total[0]);
        println!("{what}, {label}, {BUCKETS} buckets a session, median of {rounds} rounds:");
        for (p, (name, _)) in POLICIES.iter().enumerate() {
            let ms = per(&mut total[p]);
            println!(
                "  {name:24} {ms:7.3} ms per bucket, {:2} saves, saving {:6.3} ms per bucket \
                 ({:4.1}% of the session); +{:6.3} ms per bucket over end, {:.3}x",
                saves[p],
                per(&mut saving[p]),
                100.0 * per(&mut saving[p]) / ms,
                ms - end,
                ms / end
            );
        }
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().to_path_buf();
    println!("durable progress: the cost of saving as tuning goes, one run, rounds interleaved");
    compare("file store", rounds, &move |round, p| {
        Box::new(FileStore::new(path.join(format!("c-{round}-{p}.json"))))
    });
    match RedisServer::start() {
        Some(server) => {
            let url = server.url(0);
            compare("Redis store", rounds, &move |round, p| {
                let loc = format!("{url}?prefix=b{round}p{p}");
                let loc = CacheLocation::parse(&loc).unwrap_or_else(|e| panic!("{e}"));
                loc.open().unwrap_or_else(|e| panic!("{e}"))
            });
        }
        None => println!("Redis store: skipped (no redis-server)"),
    }
}
