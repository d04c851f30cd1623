//! What durable progress costs a whole job: the real CLI (`ranktune -v tune
//! --ranks R --save-every P --json`) with save at the end, the default
//! policy and a save after every bucket, on a fresh cache each time, the
//! policies interleaved round by round (rotating order) so a noisy machine
//! slows them alike; for a collective strategy (its saves are the `shared`
//! entries', the edit-lock path) and for independent ranks (rank entries:
//! the group-commit path, whose lone save waits ~20 ms for others).
//!
//! Per strategy and policy: the median job wall time per bucket (a bucket
//! = one lookup on every rank), what the ranks' durable saves cost per
//! bucket as each rank measured them (the `-v` lines' times, final save
//! included), their share of the wall time, and the ratio to `end`.
//!
//! ```text
//! cargo bench -p ranktune --bench tune_durable -- [--rounds 3] [--ranks 2] [--max-tokens 256] [--quick]
//! ```

mod support;

use std::collections::BTreeMap;
use std::process::Command;

const POLICIES: [&str; 3] = ["end", "auto", "0"];
const STRATEGIES: [&str; 2] = ["parallel", "independent"];

/// One job: (wall seconds, buckets per rank, saves per rank, seconds
/// saving per rank).
fn run_once(strategy: &str, policy: &str, ranks: u32, extra: &[String]) -> (f64, f64, f64, f64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(["-v", "tune", "--json", "--strategy", strategy, "--save-every", policy])
        .args(["--ranks", &ranks.to_string()])
        .arg("--cache")
        .arg(dir.path().join("c.json"))
        .args(extra)
        .env_remove("RANKTUNE_STRATEGY")
        .env_remove("RANKTUNE_SAVE_EVERY")
        .env_remove("RANKTUNE_LOG")
        .output()
        .expect("running ranktune");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the --json report");
    let wall = doc["wall_seconds"].as_f64().unwrap_or(0.0);
    let buckets = doc["tuned"].as_f64().unwrap_or(0.0) / f64::from(ranks);
    let (mut saves, mut ms) = (0.0, 0.0);
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        // `[rank R] info: rank R: durable: N bucket(s) saved to C in T ms: …`
        let Some((_, rest)) = line.split_once(": durable: ") else { continue };
        let took = rest.rsplit_once(" ms:").and_then(|(head, _)| head.rsplit_once(" in "));
        if let Some(t) = took.and_then(|(_, t)| t.parse::<f64>().ok()) {
            saves += 1.0;
            ms += t;
        }
    }
    let per_rank = f64::from(ranks);
    (wall, buckets, saves / per_rank, ms / 1e3 / per_rank)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let support::Job { rounds, ranks, extra } = support::Job::from_args();
    println!(
        "durable progress in `ranktune tune --ranks {ranks} {}`, {rounds} rounds",
        extra.join(" ")
    );
    for strategy in STRATEGIES {
        let mut runs: BTreeMap<&str, Vec<(f64, f64, f64, f64)>> = BTreeMap::new();
        for round in 0..rounds {
            for k in 0..POLICIES.len() {
                let p = POLICIES[(round + k) % POLICIES.len()];
                runs.entry(p).or_default().push(run_once(strategy, p, ranks, &extra));
            }
        }
        let col = |p: &str, f: fn(&(f64, f64, f64, f64)) -> f64| {
            let mut v: Vec<f64> = runs[p].iter().map(f).collect();
            median(&mut v)
        };
        let buckets = col("end", |r| r.1);
        let end = col("end", |r| r.0) / buckets;
        println!("--strategy {strategy}: {buckets} buckets per rank, medians:");
        for p in POLICIES {
            let wall = col(p, |r| r.0) / buckets;
            let saving = col(p, |r| r.3) / buckets;
            println!(
                "  --save-every {p:5} {:8.2} ms per bucket, {:5.1} saves per rank, saving \
                 {:6.2} ms per bucket per rank ({:4.1}% of the wall); {:+7.2} ms per bucket \
                 over end, {:.3}x",
                wall * 1e3,
                col(p, |r| r.2),
                saving * 1e3,
                100.0 * saving / wall,
                (wall - end) * 1e3,
                wall / end
            );
        }
    }
}
