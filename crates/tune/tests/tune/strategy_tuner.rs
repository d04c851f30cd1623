//! The tuner with collective strategies: ranks are threads with their own
//! tuner, virtual clock and rank-dependent costs, talking through an
//! in-process collective group.

use crate::tune_support;

use ranktune_cache::MemoryStore;
use ranktune_cache::{CacheData, Entry, EntryKey, Section, Store};
use ranktune_collective::LocalCollective;
use ranktune_tune::strategy::{Coordinator, Strategy};
use ranktune_tune::*;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;
use tune_support::*;

const LONG: Duration = Duration::from_secs(60);

/// Runner `slow` (the fallback) and runner `fast` with two near-tied
/// tactics: on even ranks tactic 0 wins, on odd ranks tactic 1 is 4% faster.
fn op_for(rank: u32, strategy: Option<Strategy>, c: &Arc<AtomicU64>) -> Op<Rows> {
    let t1 = if rank % 2 == 0 { 51 } else { 48 };
    let runners: Vec<Box<dyn Runner<Rows>>> = vec![
        Box::new(Scripted::new("slow", vec![cost(1000, 100)], c)),
        Box::new(Scripted::new("fast", vec![cost(200, 50), cost(200, t1)], c)),
    ];
    let mut config = rows_config(64);
    config.strategy = strategy;
    Op::new("rows_op", runners, config).unwrap()
}

/// Runs `f(rank, tuner, op)` on every rank with a coordinator over an
/// in-process group; ranks in `absent` never start. The ranks that do start
/// call `f` together (a `std` barrier once their tuners are set up), so a
/// short `timeout` only has to cover what `f` does, not thread start-up.
fn on_ranks<R: Send + 'static>(
    world: u32,
    strategy: Option<Strategy>,
    timeout: Duration,
    absent: &[u32],
    f: impl Fn(u32, &Tuner, &Op<Rows>) -> R + Send + Sync + 'static,
) -> Vec<Option<R>> {
    let f = Arc::new(f);
    let present = (0..world).filter(|r| !absent.contains(r)).count();
    let started = Arc::new(Barrier::new(present));
    let threads: Vec<_> = LocalCollective::group(world)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(r, coll)| {
            let f = Arc::clone(&f);
            let started = Arc::clone(&started);
            let skip = absent.contains(&(r as u32));
            thread::spawn(move || {
                if skip {
                    return None;
                }
                let rank = r as u32;
                let c = Arc::new(AtomicU64::new(0));
                let tuner = tuner_for(rank, "1", "cpu-a", &c);
                tuner.set_coordinator(Coordinator::new(Box::new(coll)).with_timeout(timeout));
                let op = op_for(rank, strategy, &c);
                started.wait();
                Some(f(rank, &tuner, &op))
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// Tunes every bucket with `tune_key`; returns the choices and the entries.
fn tune_all(tuner: &Tuner, op: &Op<Rows>) -> (Vec<Choice>, CacheData) {
    let choices = op
        .config()
        .profiles(&[vec![1, 8], vec![1, 8]])
        .iter()
        .map(|k| tuner.tune_key(op, k))
        .collect();
    (choices, tuner.take_pending())
}

fn entries(d: &CacheData) -> Vec<(Section, EntryKey, Entry)> {
    d.iter().map(|(s, k, e)| (s, k.clone(), e.clone())).collect()
}

#[test]
fn independent_ranks_diverge_without_a_strategy() {
    let out = on_ranks(2, None, LONG, &[], |_, tuner, op| tune_all(tuner, op).0);
    let (a, b) = (out[0].as_ref().unwrap(), out[1].as_ref().unwrap());
    // Small buckets are dominated by the fixed cost (a tie); large ones split.
    assert!(a.iter().zip(b).any(|(x, y)| x.tactic_index != y.tactic_index), "{a:?} vs {b:?}");
}

#[test]
fn collective_strategies_store_identical_shared_entries_on_every_rank() {
    for strategy in [Strategy::Broadcast, Strategy::Merge, Strategy::Parallel] {
        let out = on_ranks(4, Some(strategy), LONG, &[], |_, tuner, op| {
            let (choices, data) = tune_all(tuner, op);
            (choices, entries(&data), tuner.records(), tuner.coordinator_stats())
        });
        let first = out[0].as_ref().unwrap();
        assert_eq!(first.1.len(), 7, "buckets 1..64");
        for (rank, o) in out.iter().enumerate() {
            let o = o.as_ref().unwrap();
            assert_eq!(o.0, first.0, "{strategy} rank {rank}");
            // Byte-identical entries, all in the shared section.
            assert_eq!(o.1, first.1, "{strategy} rank {rank}");
            assert!(o.1.iter().all(|(s, _, _)| *s == Section::Shared));
            assert!(o.2.iter().all(|r| r.section == Section::Shared && r.fallback.is_none()));
            assert!(o.2.iter().all(|r| r.strategy == strategy));
            let (stats, broken) = o.3.clone().unwrap();
            assert_eq!((stats.shared, stats.fallbacks, broken), (7, 0, None));
        }
        // The slowest rank's view decides: fast tactic 0 everywhere.
        assert!(
            first.0.iter().all(|c| (c.runner_index, c.tactic_index) == (1, 0)),
            "{strategy}: {:?}",
            first.0
        );
        let here: Vec<usize> = out.iter().map(|o| o.as_ref().unwrap().2[0].measured_here).collect();
        let want = match strategy {
            Strategy::Broadcast => vec![3, 0, 0, 0],
            Strategy::Merge => vec![3; 4],
            _ => vec![1; 4],
        };
        assert_eq!(here, want, "{strategy}");
    }
}

#[test]
fn the_tuner_default_strategy_applies_to_ops_without_one() {
    let threads: Vec<_> = LocalCollective::group(2)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(r, coll)| {
            thread::spawn(move || {
                let rank = r as u32;
                let c = Arc::new(AtomicU64::new(0));
                let mut opts =
                    TunerOptions::new(Section::Rank(rank), identity("1", "cpu-a"), "1-cpu-a");
                opts.strategy = Strategy::Merge;
                let tuner = Tuner::new(opts);
                tuner.set_timer(Box::new(VirtualTimer { clock: Arc::clone(&c), t0: 0 }));
                tuner.set_coordinator(Coordinator::new(Box::new(coll)).with_timeout(LONG));
                let op = op_for(rank, None, &c);
                entries(&tune_all(&tuner, &op).1)
            })
        })
        .collect();
    let out: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(out[0], out[1]);
    assert!(out[0].iter().all(|(s, _, _)| *s == Section::Shared));
}

/// Entries a previous shared run stored for buckets 1..64 (fast tactic `t`).
fn shared_cache(t: u32) -> CacheData {
    let c = Arc::new(AtomicU64::new(0));
    let op = op_for(0, Some(Strategy::Merge), &c);
    let tuner = tuner_for(0, "1", "cpu-a", &c);
    let mut data = tune_all(&tuner, &op).1;
    let moved: Vec<_> = entries(&data);
    data.sections.clear();
    for (_, k, mut e) in moved {
        e.tactic = serde_json::json!({ "variant": t });
        let k = EntryKey { runner: "fast".into(), fingerprint: op.fingerprint(1).into(), ..k };
        e.runner_index = 1;
        data.insert(Section::Shared, k, e);
    }
    data
}

#[test]
fn mixed_hits_and_misses_in_tuning_mode_never_hang_and_end_aligned() {
    let cache = Arc::new(shared_cache(1));
    let out = on_ranks(4, Some(Strategy::Parallel), LONG, &[], move |rank, tuner, op| {
        // Ranks 0 and 1 have last run's shared entries, ranks 2 and 3 nothing.
        if rank < 2 {
            tuner.load(&cache);
        }
        tuner.set_tuning(true);
        let first: Vec<Choice> =
            [1usize, 3, 20, 40].iter().map(|&n| tuner.choose_one(op, &Rows::new(n, 8))).collect();
        // Again: now settled, pure hot-path hits on every rank.
        let again: Vec<Choice> =
            [1usize, 3, 20, 40].iter().map(|&n| tuner.choose_one(op, &Rows::new(n, 8))).collect();
        (first, again, tuner.coordinator_stats().unwrap().0)
    });
    let first = out[0].as_ref().unwrap();
    for o in &out {
        let o = o.as_ref().unwrap();
        let pairs: Vec<(u32, u32)> = o.0.iter().map(|c| (c.runner_index, c.tactic_index)).collect();
        let want: Vec<(u32, u32)> =
            first.0.iter().map(|c| (c.runner_index, c.tactic_index)).collect();
        assert_eq!(pairs, want);
        assert!(o.0.iter().all(|c| c.source == ChoiceSource::Tuned), "{:?}", o.0);
        assert!(o.1.iter().all(|c| c.source == ChoiceSource::Cache));
        assert_eq!((o.2.shared, o.2.agreed_hits), (4, 0));
    }
}

#[test]
fn equal_cached_hits_are_agreed_once_without_measuring() {
    let cache = Arc::new(shared_cache(1));
    let out = on_ranks(3, Some(Strategy::Merge), LONG, &[], move |_, tuner, op| {
        tuner.load(&cache);
        tuner.set_tuning(true);
        let a = tuner.choose_one(op, &Rows::new(20, 8));
        let b = tuner.choose_one(op, &Rows::new(30, 8)); // same bucket 16: no second agreement
        let k = op.key_of(&Rows::new(40, 8)).unwrap();
        let c = tuner.tune_key(op, &k);
        (a, b, c, tuner.stats().total, tuner.coordinator_stats().unwrap().0)
    });
    for o in out {
        let (a, b, c, stats, coord) = o.unwrap();
        for ch in [a, b, c] {
            assert_eq!((ch.runner_index, ch.tactic_index, ch.source), (1, 1, ChoiceSource::Cache));
        }
        assert_eq!((stats.tuned, coord.agreed_hits, coord.shared), (0, 2, 0));
    }
}

#[test]
fn shared_entries_win_for_collective_ops_and_rank_entries_for_independent_ones() {
    let mut data = shared_cache(1);
    let rank_entries: Vec<_> = entries(&data);
    for (_, k, mut e) in rank_entries {
        e.tactic = serde_json::json!({ "variant": 0 });
        data.insert(Section::Rank(0), k, e);
    }
    for (strategy, want) in [(Some(Strategy::Merge), 1), (None, 0)] {
        let c = Arc::new(AtomicU64::new(0));
        let tuner = tuner_for(0, "1", "cpu-a", &c);
        tuner.set_coordinator(Coordinator::new(Box::new(ranktune_collective::SingleRank)));
        let store = MemoryStore::with_data(data.clone());
        tuner.load(&store.load().unwrap().data);
        let op = op_for(0, strategy, &c);
        let ch = tuner.choose_one(&op, &Rows::new(20, 8));
        assert_eq!((ch.tactic_index, ch.source), (want, ChoiceSource::Cache), "{strategy:?}");
    }
}

#[test]
fn a_rank_that_never_comes_makes_the_others_tune_alone_and_say_why() {
    // Ranks 0 to 2 start together (see `on_ranks`); the timeout, which they
    // wait once, covers one of them stalling on a loaded machine after that.
    let short = Duration::from_secs(2);
    let out = on_ranks(4, Some(Strategy::Merge), short, &[3], |_, tuner, op| {
        let (choices, data) = tune_all(tuner, op);
        (choices, entries(&data), tuner.records(), tuner.coordinator_stats().unwrap())
    });
    for (rank, o) in out.into_iter().enumerate().take(3) {
        let (choices, entries, records, (stats, broken)) = o.unwrap();
        assert!(choices.iter().all(|c| c.source == ChoiceSource::Tuned));
        assert!(entries.iter().all(|(s, _, _)| *s == Section::Rank(rank as u32)));
        let why = records[0].fallback.clone().unwrap();
        assert!(why.contains("rows_op 1x8,1x8") && why.contains("[3] did not arrive"), "{why}");
        assert!(records[1].fallback.as_deref().unwrap().contains("earlier failure"));
        assert_eq!(stats.fallbacks, 7);
        assert!(broken.unwrap().contains("timed out"));
    }
}
