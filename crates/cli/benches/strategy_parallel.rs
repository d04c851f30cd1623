//! Tuning wall time of a 2-rank job per strategy, and whether the parallel
//! strategy chooses what the merge strategy chooses.
//!
//! Runs the real CLI (`ranktune tune --ranks R --strategy S --json`) on a
//! fresh cache each time, strategies interleaved round by round so a noisy
//! machine slows them alike, and reports per strategy the median wall time,
//! the speed-up over `independent`, and per (op, bucket) how often the
//! choices match merge's in the same round — exactly, and "as good": the
//! choice is within the tie band of merge's winner by merge's own timings
//! (merge against itself in the next round gives the machine's noise floor).
//!
//! ```text
//! cargo bench --bench strategy_parallel -- [--rounds 3] [--ranks 2] [--max-tokens 256] [--quick]
//! ```

mod support;

use ranktune_cache::{Entry, FileStore, Section, Store};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

const STRATEGIES: [&str; 4] = ["independent", "parallel", "merge", "broadcast"];

/// (op, bucket) → (runner, tactic) of rank 0, and whether all ranks agree.
type Choices = BTreeMap<String, (String, bool)>;

struct Run {
    wall: f64,
    /// CPU seconds (user + system) of the job's processes.
    cpu: f64,
    choices: Choices,
    /// (op, bucket) → the stored entry (shared section, or rank 0's).
    entries: BTreeMap<String, Entry>,
}

fn run_once(strategy: &str, ranks: u32, extra: &[String]) -> Run {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path().join("cache.json");
    let cpu0 = children_cpu();
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_ranktune"))
        .args(["tune", "--json", "--strategy", strategy, "--ranks", &ranks.to_string()])
        .arg("--cache")
        .arg(&cache)
        .args(extra)
        .env_remove("RANKTUNE_STRATEGY")
        .output()
        .expect("running ranktune");
    let wall = start.elapsed().as_secs_f64();
    let cpu = children_cpu() - cpu0;
    let data = FileStore::new(&cache).load().expect("loading the cache").data;
    let mut entries = BTreeMap::new();
    for section in [Section::Rank(0), Section::Shared] {
        for (k, e) in data.sections.get(&section).into_iter().flatten() {
            let key = format!("{} {}", k.op, serde_json::to_string(&k.bucket).unwrap_or_default());
            entries.insert(key, e.clone());
        }
    }
    assert!(
        out.status.success(),
        "ranktune tune --strategy {strategy} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let mut per_rank: Vec<BTreeMap<String, String>> = Vec::new();
    for rank in report["ranks"].as_array().expect("ranks") {
        let mut m = BTreeMap::new();
        for row in rank["rows"].as_array().expect("rows") {
            let key = format!("{} {}", row["op"].as_str().unwrap_or("?"), row["bucket"]);
            m.insert(key, format!("{} {}", row["runner"].as_str().unwrap_or("?"), row["tactic"]));
        }
        per_rank.push(m);
    }
    let choices = per_rank[0]
        .iter()
        .map(|(k, v)| {
            let all = per_rank.iter().all(|r| r.get(k) == Some(v));
            (k.clone(), (v.clone(), all))
        })
        .collect();
    Run { wall, cpu, choices, entries }
}

/// CPU seconds used so far by waited-for descendants (the launcher and,
/// through it, the ranks).
fn children_cpu() -> f64 {
    // SAFETY: getrusage only writes the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return 0.0;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn same(a: &Choices, b: &Choices) -> (usize, usize) {
    let n = a.len();
    let eq = a.iter().filter(|(k, (v, _))| b.get(*k).is_some_and(|(w, _)| w == v)).count();
    (eq, n)
}

/// Buckets where `a`'s choice is as good as `reference`'s by `reference`'s
/// timings: its median within the tie band (3%, widened to the winner's
/// spread up to 10%, as the tuner decides) of the winner's.
fn as_good(a: &Run, reference: &Run) -> (usize, usize) {
    let mut ok = 0;
    let mut n = 0;
    for (k, e) in &a.entries {
        let Some(r) = reference.entries.get(k) else { continue };
        n += 1;
        let mine = r
            .candidates
            .iter()
            .find(|c| c.runner_index == e.runner_index && c.tactic == e.tactic)
            .and_then(|c| c.stats.as_ref())
            .map(|s| s.median_us);
        let best = r
            .candidates
            .iter()
            .filter_map(|c| c.stats.as_ref())
            .min_by(|x, y| x.median_us.total_cmp(&y.median_us));
        if let (Some(best), Some(mine)) = (best, mine) {
            let band = 0.03f64.max(best.spread.clamp(0.0, 0.10));
            if mine <= best.median_us * (1.0 + band) {
                ok += 1;
            }
        }
    }
    (ok, n)
}

fn main() {
    let support::Job { rounds, ranks, extra } = support::Job::from_args();
    let mut runs: BTreeMap<&str, Vec<Run>> = BTreeMap::new();
    for round in 0..rounds {
        for s in STRATEGIES {
            let r = run_once(s, ranks, &extra);
            eprintln!("round {round} {s:<11} {:.2} s wall {:.2} s CPU", r.wall, r.cpu);
            runs.entry(s).or_default().push(r);
        }
    }
    let wall = |s: &str| median(runs[s].iter().map(|r| r.wall).collect());
    let base = wall("independent");
    let cpu = |s: &str| median(runs[s].iter().map(|r| r.cpu).collect());
    // Per round, independent's wall time over this strategy's (same load).
    let ratio = |s: &str| {
        median(runs[s].iter().zip(&runs["independent"]).map(|(r, i)| i.wall / r.wall).collect())
    };
    println!("{ranks} ranks, {rounds} rounds, args {extra:?}; median wall time of the whole job");
    println!(
        "{:<12} {:>7} {:>9} {:>12} {:>7} {:>22} {:>22} {:>16}",
        "strategy",
        "wall s",
        "speed-up",
        "per round",
        "CPU s",
        "same as merge",
        "as good as merge's",
        "ranks agree"
    );
    for s in STRATEGIES {
        let mut eq = 0;
        let mut n = 0;
        let mut agree = 0;
        let mut total = 0;
        let mut good = 0;
        let mut good_n = 0;
        for (i, r) in runs[s].iter().enumerate() {
            // Same round's merge; for merge itself, the next round's (noise floor).
            let other = if s == "merge" { (i + 1) % rounds } else { i };
            if s != "merge" || rounds > 1 {
                let (e, k) = same(&r.choices, &runs["merge"][other].choices);
                eq += e;
                n += k;
                let (g, gn) = as_good(r, &runs["merge"][other]);
                good += g;
                good_n += gn;
            }
            agree += r.choices.values().filter(|(_, all)| *all).count();
            total += r.choices.len();
        }
        let pct = |a: usize, b: usize| {
            if b == 0 {
                "-".to_string()
            } else {
                format!("{:.1}% ({a}/{b})", 100.0 * a as f64 / b as f64)
            }
        };
        println!(
            "{:<12} {:>7.2} {:>8.2}x {:>11.2}x {:>7.2} {:>22} {:>22} {:>16}",
            s,
            wall(s),
            base / wall(s),
            ratio(s),
            cpu(s),
            pct(eq, n),
            pct(good, good_n),
            pct(agree, total)
        );
    }
}
