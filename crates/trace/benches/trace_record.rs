//! Cost per recorded span: ranktune's native API, ranktune's `tracing`
//! Layer on the Registry, ranktune's own lean `tracing` Subscriber (no
//! Registry), the Registry alone (the floor for any Layer), and the
//! `tracing-chrome` Layer on the same spans, in one run; plus the floor of
//! the native API (the two time-stamp-counter reads every span needs).
//!
//! Group `span_total` times the whole job instead: recording *and* writing
//! the file, in the process's CPU time (all threads), because
//! tracing-chrome serializes on a writer thread while it records and
//! ranktune serializes at the end.
//!
//! Each sample starts a fresh session sized for its iterations, so every
//! span is really stored (never counted as dropped); writing the file
//! happens after the timed loop. tracing-chrome writes to `io::sink()` from
//! its own thread; only the recording thread's time is measured for both.
//!
//! Times are the recording thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`),
//! not wall time: the bench machine is shared and oversubscribed, and wall
//! time would mostly measure how often the thread was descheduled.
//!
//! Run: `cargo bench --bench trace_record -- --warm-up-time 1 --measurement-time 3`

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ranktune_core::rank::RankInfo;
use ranktune_trace as trace;
use ranktune_trace::{TraceConfig, TraceSession};
use std::path::Path;
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;

/// CPU time consumed so far by `clock` (the thread's or the process's).
fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clock})");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time consumed by the calling thread so far.
fn cpu_now() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed by all threads of the process so far.
fn process_cpu_now() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Times `iters` calls of `f` in thread CPU time.
fn cpu_timed(iters: u64, f: impl Fn(u64)) -> Duration {
    let start = cpu_now();
    for i in 0..iters {
        f(i);
    }
    cpu_now() - start
}

fn session(dir: &Path, events: u64) -> TraceSession {
    let mut cfg = TraceConfig::new(dir.join("bench.json"));
    cfg.max_events = usize::try_from(events).unwrap_or(usize::MAX).max(1);
    cfg.handle_signals = false;
    TraceSession::start(cfg, &RankInfo::SINGLE).expect("start session")
}

/// Times `iters` calls of `f` inside a fresh session, exporting afterwards.
fn timed_in_session(dir: &Path, iters: u64, f: impl Fn(u64)) -> Duration {
    let s = session(dir, iters + 16);
    let elapsed = cpu_timed(iters, f);
    s.stop().expect("export");
    elapsed
}

fn native(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut g = c.benchmark_group("span");
    g.bench_function("native_no_session", |b| {
        b.iter_custom(|iters| {
            cpu_timed(iters, |_| drop(black_box(trace::span("measure", "bench"))))
        });
    });
    // The floor under any span with a start and an end: two reads of the
    // time-stamp counter, which is what the recorder's clock reads.
    #[cfg(target_arch = "x86_64")]
    g.bench_function("clock_floor_two_tsc_reads", |b| {
        b.iter_custom(|iters| {
            cpu_timed(iters, |_| {
                // SAFETY: RDTSC exists on every x86-64 CPU.
                let a = unsafe { core::arch::x86_64::_rdtsc() };
                // SAFETY: as above.
                let z = unsafe { core::arch::x86_64::_rdtsc() };
                black_box(z.wrapping_sub(black_box(a)));
            })
        });
    });
    g.bench_function("native_recorded", |b| {
        b.iter_custom(|iters| {
            timed_in_session(dir.path(), iters, |_| {
                drop(black_box(trace::span("measure", "bench")))
            })
        });
    });
    g.bench_function("native_recorded_macro", |b| {
        b.iter_custom(|iters| {
            timed_in_session(dir.path(), iters, |_| {
                drop(black_box(ranktune_trace::trace_span!("measure", "bench")))
            })
        });
    });
    g.bench_function("native_recorded_with_arg", |b| {
        b.iter_custom(|iters| {
            timed_in_session(dir.path(), iters, |i| {
                drop(black_box(trace::span("measure", "bench").with_arg("tactic", i)))
            })
        });
    });

    // The same `tracing` span (one field) through four subscribers.
    let span = |i: u64| {
        let _s = tracing::info_span!("measure", tactic = i).entered();
    };
    g.bench_function("tracing_registry_only", |b| {
        let sub = tracing_subscriber::registry();
        tracing::subscriber::with_default(sub, || b.iter_custom(|iters| cpu_timed(iters, span)));
    });
    g.bench_function("tracing_ranktune_layer", |b| {
        b.iter_custom(|iters| {
            let sub = tracing_subscriber::registry().with(trace::layer());
            tracing::subscriber::with_default(sub, || timed_in_session(dir.path(), iters, span))
        });
    });
    g.bench_function("tracing_ranktune_subscriber", |b| {
        b.iter_custom(|iters| {
            tracing::subscriber::with_default(trace::subscriber(), || {
                timed_in_session(dir.path(), iters, span)
            })
        });
    });
    g.bench_function("tracing_chrome_layer", |b| {
        b.iter_custom(|iters| {
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                .writer(std::io::sink())
                .include_args(true)
                .build();
            let sub = tracing_subscriber::registry().with(layer);
            let elapsed = tracing::subscriber::with_default(sub, || cpu_timed(iters, span));
            drop(guard); // waits for its writer thread, outside the timing
            elapsed
        });
    });
    g.finish();
}

/// Recording and writing the file, in process CPU time per span.
fn total(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut g = c.benchmark_group("span_total");
    let span = |i: u64| {
        let _s = tracing::info_span!("measure", tactic = i).entered();
    };
    let path = dir.path().join("total.json");
    g.bench_function("ranktune_subscriber_to_file", |b| {
        b.iter_custom(|iters| {
            let start = process_cpu_now();
            let s = session(dir.path(), iters + 16);
            tracing::subscriber::with_default(trace::subscriber(), || {
                for i in 0..iters {
                    span(i);
                }
            });
            s.stop().expect("export");
            process_cpu_now() - start
        });
    });
    g.bench_function("tracing_chrome_to_file", |b| {
        b.iter_custom(|iters| {
            let start = process_cpu_now();
            let (layer, guard) =
                tracing_chrome::ChromeLayerBuilder::new().file(&path).include_args(true).build();
            let sub = tracing_subscriber::registry().with(layer);
            tracing::subscriber::with_default(sub, || {
                for i in 0..iters {
                    span(i);
                }
            });
            drop(guard); // flushes and closes the file
            process_cpu_now() - start
        });
    });
    g.finish();
}

criterion_group!(benches, native, total);
criterion_main!(benches);
