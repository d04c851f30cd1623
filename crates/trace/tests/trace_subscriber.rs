//! The lean `tracing` Subscriber (`ranktune_trace::subscriber()`): what it
//! records, span handles cloned and dropped (reference counts), spans used
//! and closed on other threads, `record`, `follows_from`, events, the max
//! level, and `Span::current()`. Sessions are per process, so these tests
//! take a lock to run one at a time.

mod trace_support;

use ranktune_core::rank::RankInfo;
use ranktune_trace as trace;
use ranktune_trace::{TraceConfig, TraceSession};
use std::sync::{Mutex, MutexGuard};
use trace_support::{check_trace, named};

static ONE_SESSION: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    ONE_SESSION.lock().unwrap_or_else(|p| p.into_inner())
}

fn start(dir: &std::path::Path) -> TraceSession {
    let mut c = TraceConfig::new(dir.join("t.json"));
    c.handle_signals = false;
    TraceSession::start(c, &RankInfo::SINGLE).unwrap()
}

fn end_us(e: &serde_json::Value) -> f64 {
    e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap()
}

#[test]
fn records_spans_fields_records_events_and_levels() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let session = start(dir.path());
    let sub = trace::subscriber().with_max_level(tracing::Level::INFO);
    tracing::subscriber::with_default(sub, || {
        let tune =
            tracing::info_span!("tune", op = "gemm", bucket = 64_u64, best = tracing::field::Empty);
        let _t = tune.enter();
        for tactic in 0..3_i64 {
            let _m = tracing::info_span!("measure", runner = "tiled", tactic).entered();
            tracing::info!(mean_us = 1.5, "measured");
        }
        tune.record("best", 2);
        let _d = tracing::debug_span!("hidden").entered();
        tracing::debug!("hidden too");
        assert!(!tracing::enabled!(tracing::Level::DEBUG), "the max level is the hint");
    });
    let doc = check_trace(&session.stop().unwrap(), 0, 1);
    let tune = named(&doc, "tune");
    assert_eq!(tune.len(), 1);
    assert_eq!(tune[0]["ph"], "X");
    assert_eq!(tune[0]["cat"], module_path!());
    assert_eq!(tune[0]["args"], serde_json::json!({"op": "gemm", "bucket": 64, "best": 2}));
    let tactics: Vec<_> =
        named(&doc, "measure").iter().map(|m| m["args"]["tactic"].as_i64().unwrap()).collect();
    assert_eq!(tactics, vec![0, 1, 2]);
    let ev = named(&doc, "measured");
    assert_eq!(ev.len(), 3);
    assert_eq!((ev[0]["ph"].as_str(), ev[0]["args"]["mean_us"].as_f64()), (Some("i"), Some(1.5)));
    assert!(named(&doc, "hidden").is_empty() && named(&doc, "hidden too").is_empty());
}

#[test]
fn a_span_closes_when_its_last_handle_drops_on_any_thread() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let session = start(dir.path());
    tracing::subscriber::with_default(trace::subscriber(), || {
        // Two handles: the span ends when the second one drops.
        let a = tracing::info_span!("shared", n = 1_u64);
        let b = a.clone();
        drop(a);
        trace::instant("after_first_drop", "test");
        drop(b);
        trace::instant("after_second_drop", "test");

        // Created here, entered, recorded and dropped on another thread
        // (the handle carries its subscriber along).
        let moved = tracing::info_span!("moved", late = tracing::field::Empty);
        let t = std::thread::spawn(move || {
            let _e = moved.enter();
            moved.record("late", "there");
        });
        t.join().unwrap();

        // A clone kept by another thread keeps the span open until it drops.
        let held = tracing::info_span!("held");
        let clone = held.clone();
        let t = std::thread::spawn(move || {
            let _e = clone.enter();
            trace::instant("in_other_thread", "test");
        });
        t.join().unwrap();
        drop(held);
    });
    let doc = check_trace(&session.stop().unwrap(), 0, 1);
    let shared = named(&doc, "shared");
    assert_eq!(shared.len(), 1, "one span, recorded once");
    let first = named(&doc, "after_first_drop")[0]["ts"].as_f64().unwrap();
    let second = named(&doc, "after_second_drop")[0]["ts"].as_f64().unwrap();
    assert!(end_us(shared[0]) >= first, "still open after the first handle dropped");
    assert!(end_us(shared[0]) <= second, "closed by the last handle");

    let moved = named(&doc, "moved");
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0]["args"]["late"], "there");
    assert_ne!(moved[0]["tid"], shared[0]["tid"], "recorded on the closing thread");

    let held = named(&doc, "held");
    assert_eq!(held.len(), 1);
    let other = named(&doc, "in_other_thread")[0]["ts"].as_f64().unwrap();
    assert!(end_us(held[0]) >= other);
}

#[test]
fn follows_from_and_current_span() {
    let _l = serial();
    let dir = tempfile::tempdir().unwrap();
    let session = start(dir.path());
    tracing::subscriber::with_default(trace::subscriber(), || {
        assert!(tracing::Span::current().is_none());
        let producer = tracing::info_span!("produce");
        let consumer = tracing::info_span!("consume");
        consumer.follows_from(&producer);
        consumer.follows_from(&producer);
        {
            let _e = consumer.enter();
            let cur = tracing::Span::current();
            assert_eq!(cur.id(), consumer.id());
            assert_eq!(cur.metadata().map(|m| m.name()), Some("consume"));
            {
                let _inner = tracing::info_span!("inner").entered();
                assert_eq!(tracing::Span::current().metadata().unwrap().name(), "inner");
            }
            assert_eq!(tracing::Span::current().id(), consumer.id());
        }
        assert!(tracing::Span::current().is_none());
    });
    let doc = check_trace(&session.stop().unwrap(), 0, 1);
    let consume = named(&doc, "consume");
    assert_eq!(consume[0]["args"]["follows_from"], serde_json::json!(["produce", "produce"]));
    assert_eq!(named(&doc, "produce").len(), 1);
    assert_eq!(named(&doc, "inner").len(), 1);
}

#[test]
fn without_a_session_spans_are_handled_and_nothing_is_recorded() {
    let _l = serial();
    tracing::subscriber::with_default(trace::subscriber(), || {
        let a = tracing::info_span!("nothing", k = 1_u64);
        let b = a.clone();
        assert!(a.id().is_some() && a.id() == b.id());
        let c = tracing::info_span!("other");
        assert_ne!(a.id(), c.id(), "ids stay unique");
        a.record("k", 2_u64);
        c.follows_from(&a);
        let _e = b.enter();
        tracing::info!("dropped silently");
        drop(a);
    });
    // A session started afterwards sees none of it.
    let dir = tempfile::tempdir().unwrap();
    let doc = check_trace(&start(dir.path()).stop().unwrap(), 0, 1);
    assert!(named(&doc, "nothing").is_empty());
}
