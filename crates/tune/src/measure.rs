//! Measuring candidates: the [`Timer`] abstraction, sample statistics, and
//! the sampling policies (fixed and adaptive).
//!
//! Owns *how long* things take. It never decides which candidate wins (that
//! is `decide`) and never runs on the hot path.

use ranktune_cache::Stats;
use std::time::Instant;

/// Times one region. A CPU monotonic clock today; a CUDA-event timer (record
/// start/stop events on the stream, elapsed time after sync) plugs in later.
pub trait Timer {
    /// Marks the start of a timed region.
    fn start(&mut self);
    /// Ends the region; returns its duration in microseconds.
    fn stop(&mut self) -> f64;
}

/// [`Timer`] on `std::time::Instant` (monotonic).
#[derive(Debug, Default)]
pub struct CpuTimer {
    t0: Option<Instant>,
}

impl Timer for CpuTimer {
    fn start(&mut self) {
        self.t0 = Some(Instant::now());
    }
    fn stop(&mut self) -> f64 {
        self.t0.take().map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e6)
    }
}

/// How many samples to take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// The reference scheme: `warmups` untimed runs, then `samples` timed ones,
    /// for every candidate.
    Fixed {
        /// Untimed runs first.
        warmups: u32,
        /// Timed runs.
        samples: u32,
    },
    /// Adaptive: one warm-up and one sample for every candidate, then the
    /// candidates are refined fastest first; a candidate stops once its median
    /// is stable (`stable_runs` samples in a row that do not improve it by more
    /// than `stable_tol`) or as soon as its best sample is slower than
    /// `eliminate_ratio` × the leader's median. A candidate in a close race
    /// with the leader (median within the widest tie band) takes
    /// `max_samples`: that race is what decides.
    Adaptive {
        /// Untimed runs first.
        warmups: u32,
        /// Samples a contender takes at least.
        min_samples: u32,
        /// Samples any candidate takes at most.
        max_samples: u32,
        /// Slower than this × the leader → eliminated.
        eliminate_ratio: f64,
        /// Relative improvement that still counts as "moving".
        stable_tol: f64,
        /// Non-improving samples in a row that make a median stable.
        stable_runs: u32,
    },
}

impl Sampling {
    /// TensorRT-LLM's scheme: 2 warm-ups, 10 samples.
    pub const FIXED_10: Sampling = Sampling::Fixed { warmups: 2, samples: 10 };
    /// The default adaptive scheme (after CubeCL's adaptive scheduler).
    pub const ADAPTIVE: Sampling = Sampling::Adaptive {
        warmups: 1,
        min_samples: 4,
        max_samples: 10,
        eliminate_ratio: 1.5,
        stable_tol: 0.02,
        stable_runs: 3,
    };
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling::ADAPTIVE
    }
}

/// Statistics of samples (µs): min, median, p90 (nearest rank), spread.
pub fn stats_of(samples: &[f64]) -> Stats {
    let mut s: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return Stats { min_us: 0.0, median_us: 0.0, p90_us: 0.0, spread: 0.0, samples: 0 };
    }
    let n = s.len();
    let median = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
    let p90 = s[((n as f64 * 0.9).ceil() as usize).clamp(1, n) - 1];
    let spread = if median > 0.0 { (p90 - s[0]) / median } else { 0.0 };
    Stats { min_us: s[0], median_us: median, p90_us: p90, spread, samples: n as u32 }
}

fn median(samples: &[f64]) -> f64 {
    stats_of(samples).median_us
}

/// A timed sample shorter than this is repeated so the clock's resolution and
/// overhead do not dominate (runs per sample are calibrated once).
pub const MIN_SAMPLE_US: f64 = 50.0;

/// Measures `n` candidates. `run(i, reps)` runs candidate `i` `reps` times
/// in a row; `timer` times each call. Returns, per candidate, its
/// statistics or the error of its first failing run.
///
/// A wrapper of [`measure_timed`] (same sampling), for callers whose runs
/// do not time themselves.
pub fn measure_all(
    policy: Sampling,
    timer: &mut dyn Timer,
    n: usize,
    run: &mut dyn FnMut(usize, u32) -> Result<(), String>,
) -> Vec<Result<Stats, String>> {
    measure_timed(policy, n, &mut |i, reps| {
        timer.start();
        let r = run(i, reps);
        let t = timer.stop();
        r.map(|()| t)
    })
}

/// Measures `n` candidates whose runs time themselves: `run(i, reps)` runs
/// candidate `i` `reps` times in a row and returns how long that took (µs,
/// all `reps` together), e.g. in an isolated worker with its own copy of
/// the timer. The sampling is [`measure_all`]'s, so both give the same
/// statistic.
pub fn measure_timed(
    policy: Sampling,
    n: usize,
    run: &mut dyn FnMut(usize, u32) -> Result<f64, String>,
) -> Vec<Result<Stats, String>> {
    let mut m =
        Measurer { run, reps: vec![1; n], samples: vec![Vec::new(); n], err: vec![None; n] };
    match policy {
        Sampling::Fixed { warmups, samples } => {
            for i in 0..n {
                if m.warm_up(i, warmups) {
                    for _ in 0..samples {
                        if !m.sample(i) {
                            break;
                        }
                    }
                }
            }
        }
        Sampling::Adaptive {
            warmups,
            min_samples,
            max_samples,
            eliminate_ratio,
            stable_tol,
            stable_runs,
        } => {
            // Pass 1: one sample each, to find a leader.
            for i in 0..n {
                if m.warm_up(i, warmups) {
                    m.sample(i);
                }
            }
            let mut order: Vec<usize> = (0..n).filter(|&i| m.err[i].is_none()).collect();
            order.sort_by(|&a, &b| median(&m.samples[a]).total_cmp(&median(&m.samples[b])));
            // Pass 2: refine fastest first; the leader is the best median of
            // those already refined.
            let mut leader: Option<f64> = None;
            for &i in &order {
                let mut stable = 0;
                loop {
                    let s = &m.samples[i];
                    if let Some(lead) = leader {
                        let best = s.iter().copied().fold(f64::INFINITY, f64::min);
                        if best > eliminate_ratio * lead {
                            break;
                        }
                    }
                    // A close race (within the widest tie band of the
                    // leader) is what decides: sample it fully.
                    let close = leader.is_some_and(|lead| {
                        median(s) <= lead * (1.0 + super::decide::NOISE_BAND_CAP)
                    });
                    if s.len() >= max_samples as usize
                        || (!close && s.len() >= min_samples as usize && stable >= stable_runs)
                    {
                        break;
                    }
                    let before = median(s);
                    if !m.sample(i) {
                        break;
                    }
                    let after = median(&m.samples[i]);
                    if after >= before * (1.0 - stable_tol) {
                        stable += 1;
                    } else {
                        stable = 0;
                    }
                }
                if m.err[i].is_none() && m.samples[i].len() >= min_samples as usize {
                    let med = median(&m.samples[i]);
                    leader = Some(leader.map_or(med, |l: f64| l.min(med)));
                }
            }
        }
    }
    m.samples
        .into_iter()
        .zip(m.err)
        .map(|(s, e)| match e {
            Some(e) => Err(e),
            None => Ok(stats_of(&s)),
        })
        .collect()
}

struct Measurer<'a> {
    run: &'a mut dyn FnMut(usize, u32) -> Result<f64, String>,
    reps: Vec<u32>,
    samples: Vec<Vec<f64>>,
    err: Vec<Option<String>>,
}

impl Measurer<'_> {
    /// Untimed runs, then calibrates runs per sample. `false` on failure.
    fn warm_up(&mut self, i: usize, warmups: u32) -> bool {
        for _ in 0..warmups.max(1) {
            let t = match (self.run)(i, 1) {
                Ok(t) => t,
                Err(e) => {
                    self.err[i] = Some(e);
                    return false;
                }
            };
            if t > 0.0 && t < MIN_SAMPLE_US {
                self.reps[i] = ((MIN_SAMPLE_US / t).ceil() as u32).clamp(1, 10_000);
            } else if t >= MIN_SAMPLE_US {
                self.reps[i] = 1;
            }
        }
        true
    }

    /// One timed sample (µs per run). `false` on failure.
    fn sample(&mut self, i: usize) -> bool {
        if self.err[i].is_some() {
            return false;
        }
        let reps = self.reps[i];
        let t = match (self.run)(i, reps) {
            Ok(t) => t / f64::from(reps),
            Err(e) => {
                self.err[i] = Some(e);
                return false;
            }
        };
        // A zero-duration sample means the clock did not tick: not a result.
        if t > 0.0 {
            self.samples[i].push(t);
        }
        true
    }
}
