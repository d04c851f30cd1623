//! Adaptive sampling vs the fixed 10-sample scheme, on the built-in kernels,
//! in one run: total tuning time of each, the ratio, and how often both pick
//! the same (runner, tactic). Target: ≥ 2× less time, same choice in ≥ 95%
//! of buckets.
//!
//! `cargo bench --bench tune_adaptive` (`-- --rounds N`, default 3).
//! Each bucket is tuned by both schemes back to back (alternating which goes
//! first), so machine noise hits both alike.

use ranktune_cache::{Identity, Section};
use ranktune_kernels::runners;
use ranktune_tune::*;

fn tuner(sampling: Sampling) -> Tuner {
    let id = Identity {
        lib_version: "bench".into(),
        device_kind: "cpu".into(),
        device_name: "bench".into(),
        capability: String::new(),
        cores: 1,
    };
    let mut opts = TunerOptions::new(Section::Rank(0), id, "bench");
    opts.sampling = sampling;
    Tuner::new(opts)
}

#[derive(Default)]
struct Tally {
    /// Buckets where two fixed-scheme runs agree: the machine's noise floor.
    fixed_same: u32,
    fixed_s: f64,
    adaptive_s: f64,
    buckets: u32,
    same: u32,
    equivalent: u32,
}

fn compare<I: TuneInputs>(op: &Op<I>, base: &[Vec<u64>], round: usize, t: &mut Tally) {
    let fixed = tuner(Sampling::FIXED_10);
    let fixed2 = tuner(Sampling::FIXED_10);
    let adaptive = tuner(Sampling::ADAPTIVE);
    for (i, key) in op.config().profiles(base).iter().enumerate() {
        let (f, a) = if (i + round) % 2 == 0 {
            let f = fixed.tune_key(op, key);
            (f, adaptive.tune_key(op, key))
        } else {
            let a = adaptive.tune_key(op, key);
            (fixed.tune_key(op, key), a)
        };
        let f2 = fixed2.tune_key(op, key);
        t.fixed_same +=
            u32::from((f.runner_index, f.tactic_index) == (f2.runner_index, f2.tactic_index));
        t.buckets += 1;
        if (f.runner_index, f.tactic_index) == (a.runner_index, a.tactic_index) {
            t.same += 1;
            t.equivalent += 1;
        } else {
            // Equivalent: by the fixed scheme's own figures, the adaptive
            // choice is within the tie tolerance of the fixed choice.
            let data = fixed.take_pending();
            let entry = data.iter().map(|(_, _, e)| e).last().cloned();
            let fixed_of = |r: u32, tac: u32| {
                let e = entry.as_ref()?;
                let tv = op.tactic(Choice {
                    runner_index: r,
                    tactic_index: tac,
                    source: ChoiceSource::Tuned,
                })?;
                e.candidates
                    .iter()
                    .find(|c| c.runner_index == r && &c.tactic == tv)
                    .and_then(|c| c.stats.as_ref())
                    .map(|s| s.median_us)
            };
            if let (Some(fm), Some(am)) =
                (fixed_of(f.runner_index, f.tactic_index), fixed_of(a.runner_index, a.tactic_index))
            {
                if am <= fm * (1.0 + DEFAULT_TIE_TOLERANCE) {
                    t.equivalent += 1;
                }
            }
            eprintln!(
                "  differs: {} {:?}: fixed {}/{} adaptive {}/{}",
                op.name(),
                key.input(0),
                op.runner_names()[f.runner_index as usize],
                op.tactic(f).map_or(String::new(), |v| v.to_string()),
                op.runner_names()[a.runner_index as usize],
                op.tactic(a).map_or(String::new(), |v| v.to_string()),
            );
        }
        fixed.take_pending();
    }
    t.fixed_s += fixed.stats().total.tuning_seconds;
    t.adaptive_s += adaptive.stats().total.tuning_seconds;
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(3usize);
    let max = 256;
    let gemm = runners::gemm_op(max).expect("gemm op");
    let softmax = runners::softmax_op(max).expect("softmax op");
    let rmsnorm = runners::rmsnorm_op(max).expect("rmsnorm op");
    let mut per_op: Vec<(&str, Tally)> = vec![
        ("gemm", Tally::default()),
        ("softmax", Tally::default()),
        ("rmsnorm", Tally::default()),
    ];
    for round in 0..rounds {
        compare(&gemm, &runners::gemm_base(256, 256), round, &mut per_op[0].1);
        compare(&softmax, &runners::rows_base(1024), round, &mut per_op[1].1);
        compare(&rmsnorm, &runners::rows_base(4096), round, &mut per_op[2].1);
    }
    println!(
        "adaptive vs fixed 10-sample tuning, built-in kernels, tokens 1..{max}, {rounds} rounds"
    );
    println!(
        "{:<8} {:>8} {:>10} {:>12} {:>7} {:>10} {:>11} {:>16}",
        "op", "buckets", "fixed s", "adaptive s", "ratio", "same", "equivalent", "fixed vs fixed"
    );
    let mut all = Tally::default();
    for (name, t) in &per_op {
        println!(
            "{:<8} {:>8} {:>10.3} {:>12.3} {:>6.2}x {:>9.1}% {:>10.1}% {:>15.1}%",
            name,
            t.buckets,
            t.fixed_s,
            t.adaptive_s,
            t.fixed_s / t.adaptive_s,
            100.0 * f64::from(t.same) / f64::from(t.buckets),
            100.0 * f64::from(t.equivalent) / f64::from(t.buckets),
            100.0 * f64::from(t.fixed_same) / f64::from(t.buckets)
        );
        all.fixed_same += t.fixed_same;
        all.fixed_s += t.fixed_s;
        all.adaptive_s += t.adaptive_s;
        all.buckets += t.buckets;
        all.same += t.same;
        all.equivalent += t.equivalent;
    }
    println!(
        "{:<8} {:>8} {:>10.3} {:>12.3} {:>6.2}x {:>9.1}% {:>10.1}% {:>15.1}%",
        "total",
        all.buckets,
        all.fixed_s,
        all.adaptive_s,
        all.fixed_s / all.adaptive_s,
        100.0 * f64::from(all.same) / f64::from(all.buckets),
        100.0 * f64::from(all.equivalent) / f64::from(all.buckets),
        100.0 * f64::from(all.fixed_same) / f64::from(all.buckets)
    );
    println!("targets: ratio >= 2x, same choice >= 95% of buckets");
}
