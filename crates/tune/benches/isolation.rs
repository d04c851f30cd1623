//! What isolated measuring costs: tuning the same buckets in-process and
//! with a forked worker per bucket, interleaved in one run, and the cost per
//! candidate and per request that the difference comes to.
//!
//! `cargo bench -p ranktune-tune --bench isolation [-- --rounds N]`
//!
//! The op: 8 candidates whose runs do a fixed amount of arithmetic (about
//! 5 µs and 200 µs a run, two ops), adaptive sampling (the default), one
//! bucket per `choose_one`. Each round tunes 8 buckets of each op both ways
//! (fresh tuners); the medians of the rounds are compared.

mod support;

use ranktune_tune::isolation::*;
use ranktune_tune::*;
use std::hint::black_box;
use std::time::{Duration, Instant};
use support::{tuner, Rows, Spin};

/// One round: 8 buckets of `op` tuned; (seconds, worker starts, their
/// seconds, the winners' median run time in µs).
fn round(op: &Op<Rows>, isolation: Isolation) -> (f64, u64, f64, f64) {
    let t = tuner(isolation);
    let t0 = Instant::now();
    for b in 0..8 {
        black_box(t.choose_one(op, &Rows { shapes: [[1 << b]] }));
    }
    let secs = t0.elapsed().as_secs_f64();
    let s = t.stats().total;
    let mut best: Vec<f64> = t.records().iter().filter_map(|r| r.best_us).collect();
    (secs, s.worker_starts, s.worker_start_seconds, median(&mut best))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Requests one `measure_timed` pass makes for 8 candidates under the
/// default sampling (counted, not timed).
fn requests_per_bucket() -> u64 {
    let mut n = 0u64;
    measure_timed(Sampling::ADAPTIVE, 8, &mut |i, reps| {
        n += 1;
        // The spin op's timings: tactic i takes 1 + i/8 times tactic 0.
        Ok((100.0 + 12.5 * i as f64) * f64::from(reps))
    });
    n
}

fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let limits = Limits { timeout: Some(Duration::from_secs(60)), ..Limits::default() };
    let requests = requests_per_bucket();
    println!("isolation cost: {rounds} interleaved rounds of 8 buckets × 8 candidates per op");
    println!("  (adaptive sampling makes about {requests} requests per bucket of 8 candidates)");
    for (label, work) in [("short runs", 2_000u64), ("long runs", 80_000)] {
        let runners: Vec<Box<dyn Runner<Rows>>> = vec![Box::new(Spin { work })];
        let config = TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)]);
        let op = Op::new("spin", runners, config).unwrap_or_else(|e| panic!("{e}"));
        let (mut off, mut on, mut start) = (Vec::new(), Vec::new(), Vec::new());
        let (mut run_off, mut run_on) = (Vec::new(), Vec::new());
        let mut starts = 0;
        for _ in 0..rounds {
            let (s, _, _, b) = round(&op, Isolation::Off);
            off.push(s);
            run_off.push(b);
            let (s, n, st, b) = round(&op, Isolation::Fork(limits.clone()));
            on.push(s);
            run_on.push(b);
            starts = n;
            start.push(st / n.max(1) as f64);
        }
        let (off, on, start) = (median(&mut off), median(&mut on), median(&mut start));
        let per_cand = (on - off) / 64.0;
        println!(
            "{label} (the winners' median run: {:.1} µs in-process, {:.1} µs isolated):",
            median(&mut run_off),
            median(&mut run_on)
        );
        println!("  in-process: {:8.2} ms per bucket", off * 1e3 / 8.0);
        println!(
            "  isolated:   {:8.2} ms per bucket ({starts} worker starts per round)",
            on * 1e3 / 8.0
        );
        println!(
            "  ratio {:.2}x; isolation adds {:.1} µs per candidate ({:.1} µs per request), \
             of which a worker's start (fork to ready) {:.2} ms per bucket",
            on / off,
            per_cand * 1e6,
            (on - off) * 1e6 / (8.0 * requests as f64),
            start * 1e3
        );
    }
}
