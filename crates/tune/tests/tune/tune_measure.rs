//! Measuring: statistics, fixed and adaptive sampling (on a virtual clock, so
//! sample counts and decisions are exact on a loaded machine).

use ranktune_tune::*;
use std::cell::Cell;
use std::rc::Rc;

struct Virtual(Rc<Cell<f64>>, f64);

impl Timer for Virtual {
    fn start(&mut self) {
        self.1 = self.0.get();
    }
    fn stop(&mut self) -> f64 {
        self.0.get() - self.1
    }
}

/// Candidate costs in µs (each ≥ MIN_SAMPLE_US so one run per sample);
/// `None` fails.
fn run(
    policy: Sampling,
    costs: &[Option<f64>],
) -> (Vec<Result<ranktune_cache::Stats, String>>, Vec<u32>) {
    let clock = Rc::new(Cell::new(0.0));
    let mut timer = Virtual(Rc::clone(&clock), 0.0);
    let mut runs = vec![0u32; costs.len()];
    let res = measure_all(policy, &mut timer, costs.len(), &mut |i, reps| {
        runs[i] += reps;
        match costs[i] {
            Some(c) => {
                // A little deterministic jitter so medians move.
                let jitter = 1.0 + 0.001 * f64::from(runs[i] % 3);
                clock.set(clock.get() + c * jitter * f64::from(reps));
                Ok(())
            }
            None => Err("unsupported".into()),
        }
    });
    (res, runs)
}

#[test]
fn statistics() {
    let s = stats_of(&[5.0, 1.0, 3.0, 2.0, 4.0, f64::NAN]);
    assert_eq!((s.min_us, s.median_us, s.p90_us, s.samples), (1.0, 3.0, 5.0, 5));
    assert!((s.spread - 4.0 / 3.0).abs() < 1e-12);
    assert_eq!(stats_of(&[]).samples, 0);
    assert_eq!(stats_of(&[2.0, 4.0]).median_us, 3.0);
}

#[test]
fn fixed_takes_ten_samples_of_everything() {
    let (res, runs) = run(Sampling::FIXED_10, &[Some(100.0), Some(300.0), None]);
    assert_eq!(res[0].as_ref().unwrap().samples, 10);
    assert_eq!(res[1].as_ref().unwrap().samples, 10);
    assert_eq!(res[2].as_ref().unwrap_err(), "unsupported");
    assert_eq!(runs, vec![12, 12, 1]);
}

#[test]
fn adaptive_drops_slow_candidates_early_and_agrees() {
    let costs = [Some(300.0), Some(100.0), Some(102.0), Some(1000.0), None];
    let (fixed, fixed_runs) = run(Sampling::FIXED_10, &costs);
    let (adapt, adapt_runs) = run(Sampling::ADAPTIVE, &costs);
    let pick = |r: &[Result<ranktune_cache::Stats, String>]| {
        let s: Vec<Option<&ranktune_cache::Stats>> = r.iter().map(|x| x.as_ref().ok()).collect();
        decide(&s, 0.0)
    };
    assert_eq!(pick(&fixed), Some(1));
    assert_eq!(pick(&adapt), Some(1));
    // Clearly slower candidates: one sample, then eliminated.
    assert_eq!(adapt[0].as_ref().unwrap().samples, 1);
    assert_eq!(adapt[3].as_ref().unwrap().samples, 1);
    // Contenders get at least the minimum.
    assert!(adapt[1].as_ref().unwrap().samples >= 4);
    assert!(adapt[2].as_ref().unwrap().samples >= 4);
    let cost = |runs: &[u32]| -> f64 {
        runs.iter().zip(&costs).map(|(n, c)| f64::from(*n) * c.unwrap_or(0.0)).sum()
    };
    assert!(cost(&adapt_runs) * 2.0 < cost(&fixed_runs), "{adapt_runs:?} vs {fixed_runs:?}");
}

#[test]
fn tiny_kernels_are_batched_per_sample() {
    let (res, runs) = run(Sampling::FIXED_10, &[Some(0.5)]);
    let s = res[0].as_ref().unwrap();
    assert!(runs[0] > 12 * 50, "runs per sample calibrated: {runs:?}");
    assert!((s.median_us - 0.5).abs() < 0.01, "per-run time: {}", s.median_us);
}
