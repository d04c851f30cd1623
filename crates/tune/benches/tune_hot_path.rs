//! The hot path: `choose_one` on a cache hit, next to a raw `HashMap::get`
//! with a precomputed key, in one run. Target: at most 2× the raw lookup.
//!
//! `cargo bench --bench tune_hot_path` (criterion figures for both, then a
//! side-by-side ratio from interleaved rounds, printed at the end). The
//! interleaved rounds also time a hit of the same op built
//! `with_validation`, its cached tactics loaded and used once (checked):
//! after its first use a validated hit must cost what any hit does.

use criterion::{black_box, criterion_group, Criterion};
use ranktune_cache::{Identity, Section};
use ranktune_tune::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

struct Rows {
    shapes: [[usize; 2]; 2],
}

impl TuneInputs for Rows {
    fn num_inputs(&self) -> usize {
        2
    }
    fn shape(&self, i: usize) -> &[usize] {
        &self.shapes[i]
    }
    fn synthetic(s: &[Vec<u64>]) -> Result<Self, RunError> {
        Ok(Rows {
            shapes: [[s[0][0] as usize, s[0][1] as usize], [s[1][0] as usize, s[1][1] as usize]],
        })
    }
}

struct Noop(&'static str);

impl Runner<Rows> for Noop {
    fn name(&self) -> &str {
        self.0
    }
    fn fingerprint(&self) -> String {
        fingerprint_of(self.0)
    }
    fn tactics(&self) -> Vec<serde_json::Value> {
        (0..4).map(serde_json::Value::from).collect()
    }
    fn valid(&self, _: usize, _: &[Vec<u64>]) -> bool {
        true
    }
    fn run(&self, t: usize, _: &mut Rows) -> Result<(), RunError> {
        std::hint::black_box(t);
        Ok(())
    }
}

type Setup = (Tuner, Op<Rows>, Rows, HashMap<u64, (u32, u32)>, u64);

fn setup() -> Setup {
    let runners: Vec<Box<dyn Runner<Rows>>> = vec![Box::new(Noop("a")), Box::new(Noop("b"))];
    let config = TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)])
        .with_constraint(Constraint::same_as(1, 0, 0, 0));
    let op = Op::new("bench", runners, config).unwrap();
    let id = Identity {
        lib_version: "bench".into(),
        device_kind: "cpu".into(),
        device_name: "bench".into(),
        capability: String::new(),
        cores: 1,
    };
    let tuner = Tuner::new(TunerOptions::new(Section::Rank(0), id, "bench"));
    tuner.set_tuning(true);
    let mut raw = HashMap::new();
    for m in (0..14).map(|p| 1usize << p) {
        let io = Rows { shapes: [[m, 4096], [m, 4096]] };
        let c = tuner.choose_one(&op, &io);
        raw.insert(m as u64 * 7919, (c.runner_index, c.tactic_index));
    }
    tuner.set_tuning(false);
    let io = Rows { shapes: [[700, 4096], [700, 4096]] };
    assert_eq!(tuner.choose_one(&op, &io).source, ChoiceSource::Cache);
    (tuner, op, io, raw, 512 * 7919)
}

/// A tuner whose entries were loaded from a cache for an op built
/// `with_validation`, each bucket used (and so checked) once.
fn setup_validated() -> (Tuner, Op<Rows>, Rows) {
    let (tuner, op, io, _, _) = setup();
    let pending = tuner.take_pending();
    let runners: Vec<Box<dyn Runner<Rows>>> = vec![Box::new(Noop("a")), Box::new(Noop("b"))];
    let op2 = Op::new("bench", runners, op.config().clone()).unwrap().with_validation();
    let fresh = Tuner::new(tuner.options().clone());
    fresh.load(&pending);
    for m in (0..14).map(|p| 1usize << p) {
        let io = Rows { shapes: [[m, 4096], [m, 4096]] };
        assert_eq!(fresh.choose_one(&op2, &io).source, ChoiceSource::Cache);
    }
    (fresh, op2, io)
}

fn bench(c: &mut Criterion) {
    let (tuner, op, io, raw, key) = setup();
    let mut g = c.benchmark_group("hot_path");
    g.bench_function("choose_one_hit", |b| {
        b.iter(|| tuner.choose_one(black_box(&op), black_box(&io)))
    });
    g.bench_function("hashmap_get_precomputed_key", |b| {
        b.iter(|| raw.get(black_box(&key)).copied())
    });
    g.finish();
}

/// Interleaved rounds of both, so machine noise hits both alike; prints the
/// median per-call times and their ratio.
fn side_by_side() {
    let (tuner, op, io, raw, key) = setup();
    let (vtuner, vop, vio) = setup_validated();
    const N: u32 = 200_000;
    let mut ours = Vec::new();
    let mut base = Vec::new();
    let mut validated = Vec::new();
    for _ in 0..31 {
        let t = Instant::now();
        for _ in 0..N {
            black_box(tuner.choose_one(black_box(&op), black_box(&io)));
        }
        ours.push(t.elapsed());
        let t = Instant::now();
        for _ in 0..N {
            black_box(vtuner.choose_one(black_box(&vop), black_box(&vio)));
        }
        validated.push(t.elapsed());
        let t = Instant::now();
        for _ in 0..N {
            black_box(raw.get(black_box(&key)).copied());
        }
        base.push(t.elapsed());
    }
    let med = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e9 / f64::from(N)
    };
    let (o, b, v) = (med(&mut ours), med(&mut base), med(&mut validated));
    println!("side by side (median of 31 interleaved rounds of {N} calls):");
    println!("  choose_one hit:                 {o:6.2} ns/call");
    println!("  choose_one hit, validated op:   {v:6.2} ns/call ({:.2}x the plain hit)", v / o);
    println!("  HashMap::get (precomputed key): {b:6.2} ns/call");
    println!("  ratio: {:.2}x (target <= 2x)", o / b);
    // Where the time goes.
    let part = |f: &dyn Fn()| {
        let mut v: Vec<Duration> = (0..11)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..N {
                    f();
                }
                t.elapsed()
            })
            .collect();
        v.sort();
        v[5].as_secs_f64() * 1e9 / f64::from(N)
    };
    let key = op.key_of(&io).unwrap_or_default();
    println!(
        "  parts: bucket key {:.2} ns, key hash {:.2} ns, lookup by key {:.2} ns",
        part(&|| {
            black_box(black_box(&op).key_of(black_box(&io)));
        }),
        part(&|| {
            black_box(black_box(&key).hash_with(black_box(7)));
        }),
        part(&|| {
            black_box(tuner.choose_for_key(black_box(&op), black_box(&key)));
        })
    );
    // Two threads hitting the same tuner at once: no lock, no shared writes.
    let per_thread = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let t = Instant::now();
                    for _ in 0..N * 5 {
                        black_box(tuner.choose_one(black_box(&op), black_box(&io)));
                    }
                    t.elapsed().as_secs_f64() * 1e9 / f64::from(N * 5)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or(f64::NAN)).collect::<Vec<_>>()
    });
    println!(
        "  choose_one hit, 2 threads at once: {:.2} / {:.2} ns/call",
        per_thread[0], per_thread[1]
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench
}

/// `TUNE_HOT_PATH_ONLY=ours|validated|raw`: only run 1,000,000 calls of one side
/// (`TUNE_HOT_PATH_CALLS` to change), for counting instructions under
/// `valgrind --tool=callgrind` (load-independent) or profiling with `perf`.
fn only(which: &str) {
    let (tuner, op, io, raw, key) = setup();
    let (vtuner, vop, vio) = setup_validated();
    let calls: u64 =
        std::env::var("TUNE_HOT_PATH_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    for _ in 0..calls {
        if which == "ours" {
            black_box(tuner.choose_one(black_box(&op), black_box(&io)));
        } else if which == "validated" {
            black_box(vtuner.choose_one(black_box(&vop), black_box(&vio)));
        } else {
            black_box(raw.get(black_box(&key)).copied());
        }
    }
}

fn main() {
    if let Ok(which) = std::env::var("TUNE_HOT_PATH_ONLY") {
        only(&which);
        return;
    }
    benches();
    side_by_side();
    Criterion::default().configure_from_args().final_summary();
}
