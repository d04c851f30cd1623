//! Cost of one collective call: store-based (files in a temporary directory)
//! versus in-process, for 2 and 4 ranks that are threads of this process.
//!
//! Each measurement runs `iters` calls on every rank of a fresh group and
//! reports rank 0's time (the group's first call, which joins the job, is
//! made before the clock starts).
//!
//! Run: `cargo bench --bench collective -- --warm-up-time 1 --measurement-time 3`

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ranktune_collective::{Collective, FileCollective, JobId, LocalCollective};

const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy)]
enum Op {
    Barrier,
    Gather4k,
}

fn file_group(dir: &Path, world: u32, run: u64) -> Vec<Box<dyn Collective>> {
    let job = JobId { value: format!("bench-{run}"), source: "bench" };
    (0..world)
        .map(|r| Box::new(FileCollective::new(r, world, dir, job.clone()).unwrap()) as Box<_>)
        .collect()
}

fn local_group(world: u32) -> Vec<Box<dyn Collective>> {
    LocalCollective::group(world).unwrap().into_iter().map(|c| Box::new(c) as Box<_>).collect()
}

/// Runs `iters` calls of `op` on every rank; returns rank 0's elapsed time.
fn run(group: Vec<Box<dyn Collective>>, op: Op, iters: u64) -> Duration {
    let start_line = Arc::new(Barrier::new(group.len()));
    let threads: Vec<_> = group
        .into_iter()
        .map(|mut c| {
            let start_line = Arc::clone(&start_line);
            thread::spawn(move || {
                c.barrier("join", TIMEOUT).unwrap();
                start_line.wait();
                let data = vec![c.rank() as u8; 4096];
                let start = Instant::now();
                for _ in 0..iters {
                    match op {
                        Op::Barrier => c.barrier("b", TIMEOUT).unwrap(),
                        Op::Gather4k => {
                            c.all_gather("g", &data, TIMEOUT).unwrap();
                        }
                    }
                }
                start.elapsed()
            })
        })
        .collect();
    let times: Vec<Duration> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    times[0]
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let mut run_id = 0u64;
    for (name, op) in [("barrier", Op::Barrier), ("all_gather_4KiB", Op::Gather4k)] {
        let mut g = c.benchmark_group(name);
        g.sample_size(10);
        for world in [2u32, 4] {
            g.bench_with_input(BenchmarkId::new("file", world), &world, |b, &w| {
                b.iter_custom(|iters| {
                    run_id += 1;
                    run(file_group(tmp.path(), w, run_id), op, iters)
                })
            });
            g.bench_with_input(BenchmarkId::new("local", world), &world, |b, &w| {
                b.iter_custom(|iters| run(local_group(w), op, iters))
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
