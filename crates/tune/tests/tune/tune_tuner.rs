//! choose_one: hits, misses, fallbacks, tuning, ties, failures, stale
//! entries, and the session's save on every way out.

use crate::tune_support;

use ranktune_cache::MemoryStore;
use ranktune_cache::{CacheData, Section, Store};
use ranktune_tune::*;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tune_support::*;

fn clock() -> Arc<AtomicU64> {
    Arc::new(AtomicU64::new(0))
}

#[test]
fn miss_outside_tuning_returns_fallback_then_tuning_stores_best() {
    let c = clock();
    let op = two_runners(&c);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    let first = tuner.choose_one(&op, &Rows::new(700, 8));
    assert_eq!(first, Choice::FALLBACK);
    assert_eq!(tuner.choose_one(&op, &Rows::new(600, 8)), Choice::FALLBACK);
    let s = tuner.stats().total;
    assert_eq!((s.misses, s.fallbacks, s.tuned, s.hits), (1, 2, 0, 0));

    tuner.set_tuning(true);
    let tuned = tuner.choose_one(&op, &Rows::new(700, 8)); // bucket 512
    assert_eq!((tuned.runner_index, tuned.tactic_index, tuned.source), (1, 1, ChoiceSource::Tuned));
    let small = tuner.choose_one(&op, &Rows::new(3, 8)); // bucket 2
    assert_eq!((small.runner_index, small.tactic_index), (1, 0));
    tuner.set_tuning(false);
    let hit = tuner.choose_one(&op, &Rows::new(1000, 8));
    assert_eq!((hit.runner_index, hit.tactic_index, hit.source), (1, 1, ChoiceSource::Cache));
    assert_eq!(op.tactic(hit), Some(&serde_json::json!({"variant": 1})));

    let s = tuner.stats();
    assert_eq!(s.total.tuned, 2);
    assert_eq!(s.total.hits, 1);
    assert_eq!(s.per_op["rows_op"].tuned, 2);

    let data = tuner.take_pending();
    assert_eq!(data.len(), 2);
    let (section, key, entry) = data.iter().find(|(_, k, _)| k.bucket[0][0] == 512).unwrap();
    assert_eq!(section, Section::Rank(0));
    assert_eq!((key.op.as_str(), key.runner.as_str()), ("rows_op", "fast"));
    assert_eq!(key.fingerprint, op.fingerprint(1));
    assert_eq!(entry.candidates.len(), 3, "all candidates kept");
    assert!(entry.candidates.iter().all(|c| c.stats.as_ref().is_some_and(|s| s.samples >= 1)));
    assert!((entry.time_us - (200.0 + 50.0 * 512.0) / 1000.0).abs() > 0.0);
    assert!((entry.time_us - (5000.0 + 10.0 * 512.0) / 1000.0).abs() < 1e-9);
    assert_eq!(entry.checksum, op.checksum());
    assert!(data.metadata.environments.contains_key("1-cpu-a"));
}

#[test]
fn invalid_tactics_are_not_measured() {
    let c = clock();
    let mut fast = Scripted::new("fast", vec![cost(1, 1)], &c);
    fast.max_rows = vec![Some(16)];
    let op = op_with(vec![Scripted::new("simple", vec![cost(1000, 100)], &c), fast]);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    tuner.set_tuning(true);
    assert_eq!(tuner.choose_one(&op, &Rows::new(8, 1)).runner_index, 1);
    assert_eq!(tuner.choose_one(&op, &Rows::new(64, 1)).runner_index, 0);
    let rec = tuner.records();
    assert_eq!((rec[0].measured, rec[1].measured), (2, 1));
}

#[test]
fn near_ties_go_to_the_lowest_canonical_index() {
    let c = clock();
    // Tactic 2 is 1% faster than tactic 1, 2% faster than tactic 0: a tie.
    let op = op_with(vec![Scripted::new(
        "t",
        vec![cost(10_200, 0), cost(10_100, 0), cost(10_000, 0)],
        &c,
    )]);
    for _ in 0..3 {
        let tuner = tuner_for(0, "1", "cpu-a", &c);
        tuner.set_tuning(true);
        assert_eq!(tuner.choose_one(&op, &Rows::new(4, 4)).tactic_index, 0);
    }
    // Outside the tolerance the fastest wins.
    let op = op_with(vec![Scripted::new("t", vec![cost(11_000, 0), cost(10_000, 0)], &c)]);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    tuner.set_tuning(true);
    assert_eq!(tuner.choose_one(&op, &Rows::new(4, 4)).tactic_index, 1);
}

#[test]
fn decide_rule() {
    let s = |m: f64| ranktune_cache::Stats {
        min_us: m,
        median_us: m,
        p90_us: m,
        spread: 0.0,
        samples: 3,
    };
    let (a, b, c) = (s(10.2), s(10.0), s(50.0));
    assert_eq!(decide(&[Some(&c), Some(&a), Some(&b)], 0.03), Some(1));
    assert_eq!(decide(&[Some(&c), Some(&a), Some(&b)], 0.0), Some(2));
    assert_eq!(decide(&[None, None], 0.03), None);
}

#[test]
fn failing_and_panicking_tactics_are_recorded_and_skipped() {
    let c = clock();
    let op = op_with(vec![
        Scripted::new("simple", vec![cost(9000, 0)], &c),
        Scripted::new(
            "bad",
            vec![
                Act::Fail("out of shared memory"),
                Act::Panic("index out of bounds"),
                cost(100, 0),
            ],
            &c,
        ),
    ]);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    tuner.set_tuning(true);
    let ch = tuner.choose_one(&op, &Rows::new(32, 4));
    assert_eq!((ch.runner_index, ch.tactic_index), (1, 2));
    let s = tuner.stats().total;
    assert_eq!(s.failed_tactics, 2);
    let data = tuner.take_pending();
    let (_, _, e) = data.iter().next().unwrap();
    let errors: Vec<&str> = e.candidates.iter().filter_map(|c| c.error.as_deref()).collect();
    assert_eq!(errors.len(), 2);
    assert!(errors.iter().any(|m| m.contains("out of shared memory")));
    assert!(
        errors.iter().any(|m| m.contains("panicked") && m.contains("index out of bounds")),
        "{errors:?}"
    );
}

#[test]
fn all_failing_uses_the_fallback_and_reports_it() {
    let c = clock();
    let op = op_with(vec![Scripted::new("bad", vec![Act::Panic("boom"), Act::Fail("nope")], &c)]);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    tuner.set_tuning(true);
    assert_eq!(tuner.choose_one(&op, &Rows::new(32, 4)), Choice::FALLBACK);
    // Not re-measured on every call.
    assert_eq!(tuner.choose_one(&op, &Rows::new(33, 4)), Choice::FALLBACK);
    let s = tuner.stats().total;
    assert_eq!((s.tuned, s.failed_tactics), (1, 2));
    assert!(s.fallbacks >= 1);
    let rec = tuner.records();
    assert_eq!(rec[0].best_us, None);
    assert_eq!(rec[0].failures.len(), 2);
    assert!(tuner.take_pending().is_empty(), "nothing to store");
}

fn tuned_store(c: &Arc<AtomicU64>, op: &Op<Rows>) -> MemoryStore {
    let store = MemoryStore::new();
    let tuner = tuner_for(0, "1", "cpu-a", c);
    let session = Session::start(&tuner, &store).unwrap();
    tuner.set_tuning(true);
    tuner.choose_one(op, &Rows::new(64, 4));
    session.finish().unwrap();
    assert_eq!(store.data().len(), 1);
    store
}

fn reload(
    store: &MemoryStore,
    lib: &str,
    dev: &str,
    c: &Arc<AtomicU64>,
    op: &Op<Rows>,
) -> (Choice, Vec<StaleReason>) {
    let tuner = tuner_for(0, lib, dev, c);
    let _s = Session::start(&tuner, store).unwrap();
    let ch = tuner.choose_one(op, &Rows::new(64, 4));
    (ch, tuner.stale_entries().into_iter().map(|(_, r)| r).collect())
}

#[test]
fn reload_hits_and_stale_entries_are_rejected_for_each_reason() {
    let c = clock();
    let op = two_runners(&c);
    let store = tuned_store(&c, &op);

    let (ch, stale) = reload(&store, "1", "cpu-a", &c, &op);
    assert_eq!(ch.source, ChoiceSource::Cache);
    assert!(stale.is_empty());

    let (ch, stale) = reload(&store, "2", "cpu-a", &c, &op);
    assert_eq!(ch.source, ChoiceSource::Fallback);
    assert!(
        matches!(&stale[..], [StaleReason::LibVersion { stored, .. }] if stored == "1"),
        "{stale:?}"
    );

    let (ch, stale) = reload(&store, "1", "cpu-b", &c, &op);
    assert_eq!(ch.source, ChoiceSource::Fallback);
    assert!(matches!(&stale[..], [StaleReason::Device { .. }]), "{stale:?}");

    // Same runner name, other parameters.
    let mut fast = Scripted::new("fast", vec![cost(200, 50), cost(5000, 10)], &c);
    fast.param = 2;
    let op2 = op_with(vec![Scripted::new("simple", vec![cost(1000, 100)], &c), fast]);
    let (ch, stale) = reload(&store, "1", "cpu-a", &c, &op2);
    assert_eq!(ch.source, ChoiceSource::Fallback);
    assert!(
        matches!(&stale[..], [StaleReason::Fingerprint { runner }] if runner == "fast"),
        "{stale:?}"
    );

    // A tactic added: the candidate set changed.
    let op3 = op_with(vec![
        Scripted::new("simple", vec![cost(1000, 100), cost(1, 1)], &c),
        Scripted::new("fast", vec![cost(200, 50), cost(5000, 10)], &c),
    ]);
    let (ch, stale) = reload(&store, "1", "cpu-a", &c, &op3);
    assert_eq!(ch.source, ChoiceSource::Fallback);
    assert!(matches!(&stale[..], [StaleReason::Checksum]), "{stale:?}");
}

#[test]
fn other_ranks_sections_are_not_used() {
    let c = clock();
    let op = two_runners(&c);
    let store = tuned_store(&c, &op);
    let tuner = tuner_for(1, "1", "cpu-a", &c);
    let _s = Session::start(&tuner, &store).unwrap();
    assert_eq!(tuner.choose_one(&op, &Rows::new(64, 4)).source, ChoiceSource::Fallback);
}

#[test]
fn session_saves_on_drop_on_error_return_and_on_panic() {
    let c = clock();
    let op = two_runners(&c);

    let store = MemoryStore::new();
    fn early(tuner: &Tuner, store: &dyn Store, op: &Op<Rows>) -> Result<(), String> {
        let _session = Session::start(tuner, store).map_err(|e| e.to_string())?;
        tuner.set_tuning(true);
        tuner.choose_one(op, &Rows::new(8, 4));
        Err("something failed later".into())
    }
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    assert!(early(&tuner, &store, &op).is_err());
    assert_eq!(store.data().len(), 1, "saved on early return");

    let store = MemoryStore::new();
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _session = Session::start(&tuner, &store).unwrap();
        tuner.set_tuning(true);
        tuner.choose_one(&op, &Rows::new(8, 4));
        panic!("the job crashed");
    }));
    assert!(r.is_err());
    assert_eq!(store.data().len(), 1, "saved while unwinding");

    // Nothing tuned → nothing written.
    let store = MemoryStore::new();
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    drop(Session::start(&tuner, &store).unwrap());
    assert_eq!(store.saves(), 0);
}

#[test]
fn merging_save_keeps_other_ranks() {
    let c = clock();
    let op = two_runners(&c);
    let store = MemoryStore::new();
    for rank in 0..3 {
        let tuner = tuner_for(rank, "1", "cpu-a", &c);
        let s = Session::start(&tuner, &store).unwrap();
        tuner.set_tuning(true);
        tuner.choose_one(&op, &Rows::new(16, 4));
        s.finish().unwrap();
    }
    let data: CacheData = store.data();
    let sections: Vec<Section> = data.sections.keys().copied().collect();
    assert_eq!(sections, vec![Section::Rank(0), Section::Rank(1), Section::Rank(2)]);
}

#[test]
fn hits_from_many_threads_are_counted() {
    let c = clock();
    let op = two_runners(&c);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    tuner.set_tuning(true);
    tuner.choose_one(&op, &Rows::new(100, 4));
    tuner.set_tuning(false);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..1000 {
                    assert_eq!(
                        tuner.choose_one(&op, &Rows::new(100, 4)).source,
                        ChoiceSource::Cache
                    );
                }
            });
        }
    });
    assert_eq!(tuner.stats().total.hits, 4000);
}

#[test]
fn op_rejects_bad_runner_sets() {
    let c = clock();
    assert!(matches!(
        Op::<Rows>::new("x", vec![], TuningConfig::default()),
        Err(OpError::NoRunners(_))
    ));
    let dup: Vec<Box<dyn Runner<Rows>>> = vec![
        Box::new(Scripted::new("a", vec![cost(1, 1)], &c)),
        Box::new(Scripted::new("a", vec![cost(1, 1)], &c)),
    ];
    assert!(matches!(
        Op::new("x", dup, TuningConfig::default()),
        Err(OpError::DuplicateRunner { .. })
    ));
    let empty: Vec<Box<dyn Runner<Rows>>> = vec![Box::new(Scripted::new("a", vec![], &c))];
    assert!(matches!(
        Op::new("x", empty, TuningConfig::default()),
        Err(OpError::NoFallback { .. })
    ));
}
