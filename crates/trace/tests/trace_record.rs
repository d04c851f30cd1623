//! In-process tests of trace recording: what a session writes, the window,
//! the `tracing` Layer, the buffer bound, gzip, and start-time errors.
//! Sessions are per process, so these tests take a lock to run one at a time.

mod trace_support;

use ranktune_core::rank::{RankInfo, RankSource};
use ranktune_trace as trace;
use ranktune_trace::{IterWindow, TraceConfig, TraceError, TraceSession};
use std::sync::{Mutex, MutexGuard};
use trace_support::{check_trace, named, steps};
use tracing_subscriber::layer::SubscriberExt;

static ONE_SESSION: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    ONE_SESSION.lock().unwrap_or_else(|p| p.into_inner())
}

fn rank(r: u32, w: u32) -> RankInfo {
    RankInfo { rank: r, world_size: w, local_rank: r, source: RankSource::Explicit }
}

fn config(path: &std::path::Path) -> TraceConfig {
    let mut c = TraceConfig::new(path);
    c.handle_signals = false; // the test harness keeps its own signal behaviour
    c
}

#[test]
fn session_writes_spans_instants_counters_and_threads() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let session = TraceSession::start(config(&dir.path().join("trace.json")), &rank(3, 4)).unwrap();
    assert_eq!(session.path(), dir.path().join("trace_3.json"));
    {
        let _outer = trace::span("outer", "test").with_arg("m", 128).with_arg("who", "a\"b");
        let _inner = trace::span("inner", "test");
        trace::instant("mark", "test");
        trace::counter("queue", 7.5);
    }
    std::thread::Builder::new()
        .name("worker".into())
        .spawn(|| {
            let _s = trace::span("on_worker", "test");
        })
        .unwrap()
        .join()
        .unwrap();
    std::thread::spawn(|| {
        trace::set_thread_name("renamed");
        let _s = trace::span("on_renamed", "test");
    })
    .join()
    .unwrap();
    let path = session.stop().unwrap();
    let doc = check_trace(&path, 3, 4);

    let outer = named(&doc, "outer")[0];
    let inner = named(&doc, "inner")[0];
    assert_eq!((outer["ph"].as_str(), outer["cat"].as_str()), (Some("X"), Some("test")));
    assert_eq!(outer["args"]["m"], 128);
    assert_eq!(outer["args"]["who"], "a\"b");
    // Nesting: inner lies within outer.
    let (ots, odur) = (outer["ts"].as_f64().unwrap(), outer["dur"].as_f64().unwrap());
    let (its, idur) = (inner["ts"].as_f64().unwrap(), inner["dur"].as_f64().unwrap());
    assert!(ots <= its && its + idur <= ots + odur + 0.001, "{outer} {inner}");
    assert_eq!(named(&doc, "mark")[0]["ph"], "i");
    assert_eq!(named(&doc, "queue")[0]["args"]["value"], 7.5);

    // Thread names and distinct tids.
    let events = doc["traceEvents"].as_array().unwrap();
    let thread_names: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    for want in ["worker", "renamed"] {
        assert!(thread_names.contains(&want), "{thread_names:?}");
    }
    let worker_tid = named(&doc, "on_worker")[0]["tid"].clone();
    assert_ne!(worker_tid, outer["tid"]);
    assert_eq!(doc["otherData"]["dropped_events"], 0);
    // Nothing is left behind but the trace itself (no temp or probe files).
    let names: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("trace_3.json")]);
}

#[test]
fn nothing_is_recorded_without_a_session() {
    let _l = serial();
    let s = trace::span("idle", "test");
    assert!(!s.is_recording());
    trace::step(); // no session: no effect, no panic
}

#[test]
fn window_keeps_only_its_iterations_both_ends_included() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    for (window, want) in [("2-3", vec![2, 3]), ("7", vec![7]), ("0,4-5", vec![0, 4, 5])] {
        let mut cfg = config(&dir.path().join(format!("w{}.json", window.replace(',', "_"))));
        cfg.window = Some(window.parse::<IterWindow>().unwrap());
        let session = TraceSession::start(cfg, &rank(0, 1)).unwrap();
        for _ in 0..10 {
            let it = session.iteration();
            let _s = trace::span("body", "test").with_arg("iter", it);
            drop(_s);
            session.step();
        }
        let doc = check_trace(&session.stop().unwrap(), 0, 1);
        assert_eq!(steps(&doc), want, "window {window}");
        let iters: Vec<u64> =
            named(&doc, "body").iter().map(|e| e["args"]["iter"].as_u64().unwrap()).collect();
        assert_eq!(iters, want, "window {window}");
        let first = &named(&doc, &format!("ProfilerStep#{}", want[0]))[0];
        assert_eq!(
            (first["ph"].as_str(), first["cat"].as_str()),
            (Some("X"), Some("user_annotation"))
        );
        assert_eq!(doc["otherData"]["last_iteration"], 10);
    }
}

#[test]
fn tracing_layer_records_spans_with_fields_and_events() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let session = TraceSession::start(config(&dir.path().join("t.json")), &rank(1, 2)).unwrap();
    let subscriber = tracing_subscriber::registry().with(session.layer());
    tracing::subscriber::with_default(subscriber, || {
        let tune =
            tracing::info_span!("tune", op = "gemm", bucket = 64_u64, best = tracing::field::Empty);
        let _t = tune.enter();
        for tactic in 0..3_i64 {
            let _m = tracing::info_span!("measure", runner = "tiled", tactic).entered();
            tracing::info!(mean_us = 1.5, "measured");
        }
        tune.record("best", 2);
        // Only an empty field at creation, filled in later.
        let late = tracing::info_span!("late", result = tracing::field::Empty);
        late.record("result", "ok");
        drop(late);
        // Created on one thread, closed on another. (No parent: the other
        // thread has no default subscriber here, so it could not release a
        // parent reference; with a global subscriber that is no issue.)
        let moved = tracing::info_span!(parent: None, "moved", n = 1_u64);
        std::thread::spawn(move || drop(moved)).join().unwrap();
        let blob = "y".repeat(5000);
        drop(tracing::info_span!("big", blob = %blob, keep = 1_u64));
    });
    let doc = check_trace(&session.stop().unwrap(), 1, 2);
    let tune = named(&doc, "tune");
    assert_eq!(tune.len(), 1);
    assert_eq!(tune[0]["args"]["op"], "gemm");
    assert_eq!(tune[0]["args"]["bucket"], 64);
    assert_eq!(tune[0]["args"]["best"], 2, "fields recorded later are kept");
    assert_eq!(tune[0]["cat"], module_path!());
    let measures = named(&doc, "measure");
    let tactics: Vec<_> = measures.iter().map(|m| m["args"]["tactic"].as_i64().unwrap()).collect();
    assert_eq!(tactics, vec![0, 1, 2]);
    assert_eq!(measures[0]["args"]["runner"], "tiled");
    assert_eq!(named(&doc, "late")[0]["args"], serde_json::json!({"result": "ok"}));
    let moved = named(&doc, "moved");
    assert_eq!(moved.len(), 1, "a span closed on another thread is recorded");
    assert_eq!(moved[0]["args"]["n"], 1);
    assert_ne!(moved[0]["tid"], tune[0]["tid"], "recorded on the closing thread");
    // An oversized field is left out; the event and its other fields stay.
    assert_eq!(named(&doc, "big")[0]["args"], serde_json::json!({"keep": 1}));
    let ev = named(&doc, "measured");
    assert_eq!(ev.len(), 3);
    assert_eq!((ev[0]["ph"].as_str(), ev[0]["args"]["mean_us"].as_f64()), (Some("i"), Some(1.5)));
}

#[test]
fn buffer_is_bounded_and_drops_are_counted() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir.path().join("b.json"));
    cfg.max_events = 100;
    let session = TraceSession::start(cfg, &rank(0, 1)).unwrap();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..1000 {
                    let _s = trace::span("many", "test");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let doc = check_trace(&session.stop().unwrap(), 0, 1);
    let kept = named(&doc, "many").len() as u64;
    assert_eq!(kept, 100);
    assert_eq!(doc["otherData"]["dropped_events"], 3000 - kept);
    assert_eq!(doc["otherData"]["max_events"], 100);
}

#[test]
fn the_buffer_bound_is_in_bytes_so_long_args_cannot_multiply_it() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir.path().join("long.json"));
    cfg.max_events = 1000; // 24,000 bytes of event storage
    let session = TraceSession::start(cfg, &rank(0, 1)).unwrap();
    let subscriber = tracing_subscriber::registry().with(session.layer());
    let text = "z".repeat(900);
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..1000 {
            drop(tracing::info_span!("long", text = %text));
        }
    });
    let doc = check_trace(&session.stop().unwrap(), 0, 1);
    let long = named(&doc, "long");
    assert!(!long.is_empty());
    assert_eq!(long[0]["args"]["text"].as_str().map(str::len), Some(900));
    // Each event stores ~24 bytes + its ~920 bytes of text: 24,000 bytes
    // hold about 25 of them, not 1,000.
    let kept = long.len() as u64;
    assert!(kept <= 26, "{kept} events of ~944 bytes kept under a 24,000-byte bound");
    assert_eq!(doc["otherData"]["dropped_events"], 1000 - kept);
}

#[test]
fn gzip_paths_are_compressed() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let session = TraceSession::start(config(&dir.path().join("t.json.gz")), &rank(5, 8)).unwrap();
    assert_eq!(session.path(), dir.path().join("t_5.json.gz"));
    drop(trace::span("zipped", "test"));
    let path = session.stop().unwrap();
    assert_eq!(&std::fs::read(&path).unwrap()[..2], &[0x1f, 0x8b], "gzip magic");
    let doc = check_trace(&path, 5, 8);
    assert_eq!(named(&doc, "zipped").len(), 1);
}

#[test]
fn drop_writes_the_file_and_flush_checkpoints() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = {
        let session = TraceSession::start(config(&dir.path().join("d.json")), &rank(0, 1)).unwrap();
        drop(trace::span("first", "test"));
        let p = session.flush().unwrap();
        assert_eq!(named(&check_trace(&p, 0, 1), "first").len(), 1);
        drop(trace::span("second", "test"));
        p
    };
    let doc = check_trace(&path, 0, 1);
    assert_eq!((named(&doc, "first").len(), named(&doc, "second").len()), (1, 1));
}

#[test]
fn start_errors_are_clear_and_early() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    // A regular file where the directory should be: unwritable (even for root).
    let file = dir.path().join("plain");
    std::fs::write(&file, "x").unwrap();
    let err = TraceSession::start(config(&file.join("trace.json")), &rank(0, 1)).err().unwrap();
    assert!(matches!(err, TraceError::NotWritable { .. }), "{err}");
    assert!(err.to_string().contains("trace_0.json"), "{err}");
    // A template that would make ranks collide.
    let err =
        TraceSession::start(config(&dir.path().join("{host}.json")), &rank(0, 2)).err().unwrap();
    assert!(matches!(err, TraceError::AmbiguousTemplate { .. }), "{err}");
    // One session at a time.
    let s = TraceSession::start(config(&dir.path().join("a.json")), &rank(0, 1)).unwrap();
    let err = TraceSession::start(config(&dir.path().join("b.json")), &rank(0, 1)).err().unwrap();
    assert!(matches!(err, TraceError::AlreadyActive), "{err}");
    s.stop().unwrap();
    // A trailing slash creates the directory.
    let s = TraceSession::start(config(&dir.path().join("new/sub/")), &rank(2, 4)).unwrap();
    assert!(dir.path().join("new/sub").is_dir());
    assert_eq!(s.stop().unwrap(), dir.path().join("new/sub/trace_2.json"));
}

#[test]
fn export_while_threads_keep_recording_is_valid() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir.path().join("c.json"));
    cfg.max_events = 20_000; // keeps the repeated exports small; drops are fine here
    let session = TraceSession::start(cfg, &rank(0, 1)).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _s = trace::span("busy", "test").with_arg("k", 1);
                }
            })
        })
        .collect();
    for _ in 0..5 {
        let p = session.flush().unwrap();
        check_trace(&p, 0, 1);
    }
    let path = session.stop().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    check_trace(&path, 0, 1);
}

#[test]
fn growing_chunks_keep_every_event_up_to_the_bound_in_order() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir.path().join("g.json"));
    // Chunks of 1024, 2048, then 3125 plain events (a sixteenth of the
    // bound); the bound is 50,000 plain events' worth of bytes.
    cfg.max_events = 50_000;
    let session = TraceSession::start(cfg, &rank(0, 1)).unwrap();
    for i in 0..60_000_u64 {
        let _s = trace::span("grow", "test").with_arg("i", i);
    }
    let doc = check_trace(&session.stop().unwrap(), 0, 1);
    let kept: Vec<u64> =
        named(&doc, "grow").iter().map(|e| e["args"]["i"].as_u64().unwrap()).collect();
    let n = kept.len() as u64;
    assert_eq!(kept, (0..n).collect::<Vec<_>>(), "the first {n} in order, none lost");
    // Each event carries its args (`{"i":…}`), so it takes 40 bytes of the
    // 1,200,000-byte bound instead of a plain event's 24.
    assert!((25_000..=30_000).contains(&n), "{n} events kept");
    assert_eq!(doc["otherData"]["dropped_events"], 60_000 - n);
}

#[test]
fn per_call_site_spans_record_like_the_function_form() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let session = TraceSession::start(config(&dir.path().join("m.json")), &rank(0, 1)).unwrap();
    for i in 0..3_u64 {
        let _s = ranktune_trace::trace_span!("site_span", "macro").with_arg("i", i);
        let _f = trace::span("site_span", "function");
    }
    let doc = check_trace(&session.stop().unwrap(), 0, 1);
    let spans = named(&doc, "site_span");
    let cats: Vec<&str> = spans.iter().map(|e| e["cat"].as_str().unwrap()).collect();
    assert_eq!(cats.iter().filter(|c| **c == "macro").count(), 3, "{cats:?}");
    assert_eq!(cats.iter().filter(|c| **c == "function").count(), 3, "{cats:?}");
    let args: Vec<u64> = spans
        .iter()
        .filter(|e| e["cat"] == "macro")
        .map(|e| e["args"]["i"].as_u64().unwrap())
        .collect();
    assert_eq!(args, [0, 1, 2]);
    // Without a session the macro form records nothing and costs a check.
    let g = ranktune_trace::trace_span!("site_span", "macro");
    assert!(!g.is_recording());
}

#[test]
fn layer_spans_closed_across_threads_at_once_are_each_recorded_once() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let session = TraceSession::start(config(&dir.path().join("x.json")), &rank(0, 1)).unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(session.layer()));
    const THREADS: u64 = 4;
    const SPANS: u64 = 500;
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..THREADS).map(|_| std::sync::mpsc::channel::<tracing::Span>()).unzip();
    std::thread::scope(|s| {
        for (t, rx) in receivers.into_iter().enumerate() {
            let next = senders[(t + 1) % THREADS as usize].clone();
            let dispatch = dispatch.clone();
            s.spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    for i in 0..SPANS {
                        let span = tracing::info_span!(parent: None, "stress", t = t as u64, i);
                        if i % 2 == 0 {
                            next.send(span).unwrap(); // closed by the next thread
                        } else {
                            drop(span);
                        }
                        while let Ok(other) = rx.try_recv() {
                            drop(other);
                        }
                    }
                });
                drop(next);
                // Spans still on the way: close what arrives until every
                // sender is gone.
                for other in rx {
                    drop(other);
                }
            });
        }
        drop(senders);
    });
    let doc = check_trace(&session.stop().unwrap(), 0, 1);
    let mut seen: Vec<(u64, u64)> = named(&doc, "stress")
        .iter()
        .map(|e| (e["args"]["t"].as_u64().unwrap(), e["args"]["i"].as_u64().unwrap()))
        .collect();
    seen.sort_unstable();
    let want: Vec<(u64, u64)> =
        (0..THREADS).flat_map(|t| (0..SPANS).map(move |i| (t, i))).collect();
    assert_eq!(seen, want, "every span exactly once");
}
