//! The blocklist in the tuner: known-bad tactics skipped at their bucket and
//! larger ones, tried again with `retry_failed` (and cleared when they work),
//! cached entries of a blocked tactic tuned again, every rank of a
//! collective strategy skipping the same ones; and the check of a cached
//! tactic on its first use (validation), with and without a reference.

use crate::tune_support;

use ranktune_cache::{
    sizes_bucket, BlockKey, BlockKind, Blocked, CacheData, Entry, EntryKey, MemoryStore, Section,
    Store,
};
use ranktune_collective::LocalCollective;
use ranktune_tune::strategy::{Coordinator, Strategy};
use ranktune_tune::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tune_support::*;

fn clock() -> Arc<AtomicU64> {
    Arc::new(AtomicU64::new(0))
}

/// The blocklist key of `fast`'s tactic `variant` of [`two_runners`] at
/// `rows` rows (cols 8), failed in environment `env`.
fn fast_key(op: &Op<Rows>, variant: u64, rows: u64, env: &str) -> BlockKey {
    BlockKey::new(
        "rows_op",
        "fast",
        op.fingerprint(1),
        &serde_json::json!({ "variant": variant }),
        env,
        sizes_bucket(&[vec![rows, 8], vec![rows, 8]]),
    )
}

fn blocked_cache(key: BlockKey, kind: BlockKind) -> CacheData {
    let mut d = CacheData::default();
    d.blocklist.insert(key, Blocked::new(kind, "SIGSEGV (signal 11)", 10, Some(0), "h"));
    d
}

#[test]
fn a_known_bad_tactic_is_skipped_at_its_bucket_and_larger_ones_only() {
    let c = clock();
    let op = two_runners(&c);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    tuner.load(&blocked_cache(fast_key(&op, 1, 512, "1-cpu-a"), BlockKind::Crash));
    tuner.set_tuning(true);
    // Without the record `fast` tactic 1 wins at 512 (see tune_tuner.rs).
    let at_512 = tuner.choose_one(&op, &Rows::new(700, 8));
    assert_ne!((at_512.runner_index, at_512.tactic_index), (1, 1));
    let at_1024 = tuner.choose_one(&op, &Rows::new(1024, 8));
    assert_ne!((at_1024.runner_index, at_1024.tactic_index), (1, 1));
    tuner.choose_one(&op, &Rows::new(300, 8)); // bucket 256: smaller, measured
    let rec = tuner.records();
    assert_eq!((rec[0].measured, rec[1].measured, rec[2].measured), (2, 2, 3));
    assert_eq!(rec[0].skipped.len(), 1);
    let s = &rec[0].skipped[0];
    assert_eq!((s.runner.as_str(), s.kind.as_str()), ("fast", "crash"));
    assert_eq!(s.tactic, serde_json::json!({"variant": 1}));
    assert!(rec[2].skipped.is_empty());
    // Nothing new to save about the blocklist: it was only read.
    assert!(tuner.take_pending().blocklist.is_empty());
}

#[test]
fn another_environments_record_does_not_block_a_tune_alone() {
    let c = clock();
    let op = two_runners(&c);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    tuner.load(&blocked_cache(fast_key(&op, 1, 512, "1-gpu-b"), BlockKind::Timeout));
    tuner.set_tuning(true);
    let at_512 = tuner.choose_one(&op, &Rows::new(700, 8));
    assert_eq!((at_512.runner_index, at_512.tactic_index), (1, 1));
    assert!(tuner.records()[0].skipped.is_empty());
}

#[test]
fn the_fallback_is_never_skipped() {
    let c = clock();
    let op = two_runners(&c);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    let key = BlockKey::new(
        "rows_op",
        "simple",
        op.fingerprint(0),
        &serde_json::json!({"variant": 0}),
        "1-cpu-a",
        sizes_bucket(&[vec![1, 8], vec![1, 8]]),
    );
    tuner.load(&blocked_cache(key, BlockKind::Crash));
    tuner.set_tuning(true);
    tuner.choose_one(&op, &Rows::new(700, 8));
    let rec = tuner.records();
    assert_eq!((rec[0].measured, rec[0].skipped.len()), (3, 0));
}

#[test]
fn retry_failed_measures_it_again_and_one_that_works_leaves_the_blocklist() {
    let c = clock();
    let op = two_runners(&c);
    let mut opts = TunerOptions::new(Section::Rank(0), identity("1", "cpu-a"), "1-cpu-a");
    opts.retry_failed = true;
    let tuner = Tuner::new(opts);
    tuner.set_timer(Box::new(VirtualTimer { clock: Arc::clone(&c), t0: 0 }));
    let store = MemoryStore::new();
    let key = fast_key(&op, 1, 256, "1-cpu-a");
    store.save(&blocked_cache(key.clone(), BlockKind::Crash)).unwrap();
    let session = Session::start(&tuner, &store).unwrap();
    tuner.set_tuning(true);
    let at_512 = tuner.choose_one(&op, &Rows::new(700, 8));
    assert_eq!((at_512.runner_index, at_512.tactic_index), (1, 1), "measured and won");
    let rec = tuner.records();
    assert_eq!((rec[0].skipped.len(), rec[0].unblocked), (0, 1));
    session.finish().unwrap();
    assert!(store.load().unwrap().data.blocklist.get(&key).is_none(), "cleared");
}

#[test]
fn a_cached_entry_of_a_known_bad_tactic_is_stale_and_tuned_again() {
    let c = clock();
    let op = two_runners(&c);
    let first = tuner_for(0, "1", "cpu-a", &c);
    first.set_tuning(true);
    first.choose_one(&op, &Rows::new(700, 8));
    let mut data = first.take_pending();
    // The cached winner (fast, variant 1) has since been seen to crash.
    let record = Blocked::new(BlockKind::Crash, "SIGSEGV", 10, Some(0), "h");
    data.blocklist.insert(fast_key(&op, 1, 512, "1-cpu-a"), record);
    let second = tuner_for(0, "1", "cpu-a", &c);
    second.load(&data);
    let ch = second.choose_one(&op, &Rows::new(700, 8));
    assert_eq!(ch, Choice::FALLBACK, "not a hit");
    let stale = second.stale_entries();
    assert!(
        matches!(&stale[..], [(_, StaleReason::Blocked(why))] if why.contains("crash")),
        "{stale:?}"
    );
    second.set_tuning(true);
    let retuned = second.choose_one(&op, &Rows::new(700, 8));
    assert_eq!(retuned.source, ChoiceSource::Tuned);
    assert_ne!((retuned.runner_index, retuned.tactic_index), (1, 1));
}

#[test]
fn every_rank_of_a_collective_strategy_skips_what_any_environment_blocks() {
    // Rank 0 runs on cpu-a, rank 1 on cpu-b; the record is cpu-a's. Both
    // must list the same candidates, or the ranks could not agree.
    let threads: Vec<_> = LocalCollective::group(2)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(r, coll)| {
            std::thread::spawn(move || {
                let c = clock();
                let device = if r == 0 { "cpu-a" } else { "cpu-b" };
                let tuner = tuner_for(r as u32, "1", device, &c);
                let coord = Coordinator::new(Box::new(coll)).with_timeout(Duration::from_secs(60));
                tuner.set_coordinator(coord);
                let runners: Vec<Box<dyn Runner<Rows>>> = vec![
                    Box::new(Scripted::new("simple", vec![cost(1000, 100)], &c)),
                    Box::new(Scripted::new("fast", vec![cost(200, 50), cost(5000, 10)], &c)),
                ];
                let mut config = rows_config(1024);
                config.strategy = Some(Strategy::Merge);
                let op = Op::new("rows_op", runners, config).unwrap();
                tuner.load(&blocked_cache(fast_key(&op, 1, 512, "1-cpu-a"), BlockKind::Memory));
                tuner.set_tuning(true);
                let ch = tuner.choose_one(&op, &Rows::new(700, 8));
                (ch, tuner.records())
            })
        })
        .collect();
    let out: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(out[0].0, out[1].0, "one choice");
    for (ch, rec) in &out {
        assert_ne!((ch.runner_index, ch.tactic_index), (1, 1));
        assert_eq!(rec[0].skipped.len(), 1);
        assert_eq!(rec[0].section, Section::Shared, "tuned together: {:?}", rec[0].fallback);
        assert!(rec[0].fallback.is_none());
    }
}

// ------------------------------------------------------------ validation

/// Inputs with an output: `out[i]` gets written by the runners.
pub struct Vals {
    shape: [usize; 1],
    out: Vec<f64>,
}

impl TuneInputs for Vals {
    fn num_inputs(&self) -> usize {
        1
    }
    fn shape(&self, _: usize) -> &[usize] {
        &self.shape
    }
    fn synthetic(s: &[Vec<u64>]) -> Result<Self, RunError> {
        let n = s.first().and_then(|d| d.first()).copied().unwrap_or(1) as usize;
        Ok(Vals { shape: [n], out: vec![0.0; n] })
    }
}

/// Tactic `t` writes `i * (1 + errors[t])` into `out[i]`, or fails when
/// `errors[t]` is NaN. Counts its runs.
struct Writer {
    name: &'static str,
    errors: Vec<f64>,
    runs: Arc<AtomicU64>,
    /// Refused by the runner's own check.
    refuse: Option<usize>,
}

impl Runner<Vals> for Writer {
    fn name(&self) -> &str {
        self.name
    }
    fn fingerprint(&self) -> String {
        fingerprint_of(self.name)
    }
    fn tactics(&self) -> Vec<serde_json::Value> {
        (0..self.errors.len()).map(|i| i.into()).collect()
    }
    fn valid(&self, _: usize, _: &[Vec<u64>]) -> bool {
        true
    }
    fn run(&self, t: usize, io: &mut Vals) -> Result<(), RunError> {
        self.runs.fetch_add(1, Ordering::Relaxed);
        if self.errors[t].is_nan() {
            return Err("launch failed".into());
        }
        for (i, v) in io.out.iter_mut().enumerate() {
            *v = i as f64 * (1.0 + self.errors[t]);
        }
        Ok(())
    }
    fn validate(&self, t: usize, io: &Vals) -> Result<(), RunError> {
        match self.refuse {
            Some(r) if r == t => Err(format!("{} values checked, refused", io.out.len()).into()),
            _ => Ok(()),
        }
    }
}

fn vals_op(errors: Vec<f64>, runs: &Arc<AtomicU64>, refuse: Option<usize>) -> Op<Vals> {
    let runners: Vec<Box<dyn Runner<Vals>>> = vec![
        Box::new(Writer { name: "ref", errors: vec![0.0], runs: Arc::clone(runs), refuse: None }),
        Box::new(Writer { name: "fast", errors, runs: Arc::clone(runs), refuse }),
    ];
    let config = TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)]).with_max_tokens(64);
    Op::new("vals", runners, config).unwrap()
}

/// A cache whose entry for bucket 64 of `op` chose `fast` tactic `t`.
fn cached_choice(op: &Op<Vals>, t: usize) -> CacheData {
    let mut d = CacheData::default();
    let key = EntryKey {
        op: "vals".into(),
        runner: "fast".into(),
        fingerprint: op.fingerprint(1).into(),
        bucket: sizes_bucket(&[vec![64]]),
    };
    let entry = Entry {
        runner_index: 1,
        tactic: t.into(),
        time_us: 1.0,
        candidates: vec![],
        checksum: op.checksum().into(),
        env: "1-cpu-a".into(),
        created_unix: 1,
    };
    d.insert(Section::Rank(0), key, entry);
    d
}

fn tuner_a() -> Tuner {
    Tuner::new(TunerOptions::new(Section::Rank(0), identity("1", "cpu-a"), "1-cpu-a"))
}

#[test]
fn a_cached_tactic_that_fails_its_first_run_is_replaced_by_the_fallback_and_blocked() {
    let runs = Arc::new(AtomicU64::new(0));
    let op = vals_op(vec![0.0, f64::NAN, 0.0], &runs, None).with_validation();
    let tuner = tuner_a();
    tuner.load(&cached_choice(&op, 1));
    let io = Vals { shape: [64], out: vec![] };
    assert_eq!(tuner.choose_one(&op, &io), Choice::FALLBACK);
    let after_first = runs.load(Ordering::Relaxed);
    assert_eq!(after_first, 1, "checked once");
    for _ in 0..10 {
        assert_eq!(tuner.choose_one(&op, &io), Choice::FALLBACK);
    }
    assert_eq!(runs.load(Ordering::Relaxed), after_first, "never checked again");
    let pending = tuner.take_pending();
    let (k, r) = pending.blocklist.iter().next().unwrap();
    assert_eq!(
        (k.runner.as_str(), k.tactic(), &r.kind),
        ("fast", 1.into(), &BlockKind::Validation)
    );
    assert!(r.message.contains("launch failed"), "{}", r.message);
    assert_eq!(k.env, "1-cpu-a");
}

#[test]
fn a_cached_tactic_that_passes_is_an_ordinary_hit_after_one_check() {
    let runs = Arc::new(AtomicU64::new(0));
    let reference = Reference::new(|io: &Vals| io.out.clone(), 1e-6, 1e-9);
    let op = vals_op(vec![0.0, 1e-9, 0.0], &runs, None).with_reference(reference);
    let tuner = tuner_a();
    tuner.load(&cached_choice(&op, 1));
    let io = Vals { shape: [64], out: vec![] };
    let first = tuner.choose_one(&op, &io);
    assert_eq!((first.runner_index, first.tactic_index, first.source), (1, 1, ChoiceSource::Cache));
    assert_eq!(runs.load(Ordering::Relaxed), 2, "the tactic and the reference, once");
    for _ in 0..10 {
        assert_eq!(tuner.choose_one(&op, &io).source, ChoiceSource::Cache);
    }
    assert_eq!(runs.load(Ordering::Relaxed), 2);
    assert!(tuner.take_pending().blocklist.is_empty());
}

#[test]
fn a_cached_tactic_whose_output_is_off_fails_the_reference_check() {
    let runs = Arc::new(AtomicU64::new(0));
    let reference = Reference::new(|io: &Vals| io.out.clone(), 1e-3, 1e-6);
    let op = vals_op(vec![0.0, 0.01, 0.0], &runs, None).with_reference(reference);
    let tuner = tuner_a();
    let store = MemoryStore::new();
    store.save(&cached_choice(&op, 1)).unwrap();
    let session = Session::start(&tuner, &store).unwrap();
    assert_eq!(tuner.choose_one(&op, &Vals { shape: [64], out: vec![] }), Choice::FALLBACK);
    session.finish().unwrap();
    let stored = store.load().unwrap().data;
    let (_, r) = stored.blocklist.iter().next().expect("saved on the blocklist");
    assert!(r.message.contains("63 of 64 output values differ"), "{}", r.message);
    // The next process does not use it, and its tuning run skips it.
    let next = tuner_a();
    next.load(&stored);
    next.set_tuning(true);
    let ch = next.choose_one(&op, &Vals { shape: [64], out: vec![] });
    assert_eq!(ch.source, ChoiceSource::Tuned);
    assert_eq!(next.records()[0].skipped.len(), 1);
    assert_ne!((ch.runner_index, ch.tactic_index), (1, 1));
}

#[test]
fn a_runners_own_check_can_refuse_a_cached_tactic() {
    let runs = Arc::new(AtomicU64::new(0));
    let op = vals_op(vec![0.0, 0.0, 0.0], &runs, Some(1)).with_validation();
    let tuner = tuner_a();
    tuner.load(&cached_choice(&op, 1));
    assert_eq!(tuner.choose_one(&op, &Vals { shape: [64], out: vec![] }), Choice::FALLBACK);
    let pending = tuner.take_pending();
    let (_, r) = pending.blocklist.iter().next().unwrap();
    assert!(r.message.contains("64 values checked, refused"), "{}", r.message);
}

#[test]
fn without_validation_a_cached_tactic_is_not_run_before_use() {
    let runs = Arc::new(AtomicU64::new(0));
    let op = vals_op(vec![0.0, f64::NAN, 0.0], &runs, None);
    let tuner = tuner_a();
    tuner.load(&cached_choice(&op, 1));
    let ch = tuner.choose_one(&op, &Vals { shape: [64], out: vec![] });
    assert_eq!((ch.runner_index, ch.tactic_index, ch.source), (1, 1, ChoiceSource::Cache));
    assert_eq!(runs.load(Ordering::Relaxed), 0);
}
