//! Strategy tests: ranks are threads of one process (`LocalCollective`).

use super::*;
use ranktune_cache::Stats;
use ranktune_collective::LocalCollective;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
/// Where a timeout is the expected outcome. The ranks that do come are
/// released together by a `std` barrier just before their first call; this
/// covers one of them stalling on a loaded machine after it, and a late rank
/// comes only once the others have given up.
const SHORT: Duration = Duration::from_secs(2);
const CANDS: [(u32, u32); 7] = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1)];
/// Base times: candidates 1, 3 and 4 are within 3% of each other.
const BASE: [f64; 7] = [140.0, 100.0, 120.0, 101.0, 102.5, 180.0, 300.0];

fn stats(m: f64) -> Stats {
    Stats { min_us: m * 0.995, median_us: m, p90_us: m * 1.005, spread: 0.01, samples: 5 }
}

fn ctx<'a>(bucket: &'a [Vec<u64>], hit: Option<(u32, u32)>) -> BucketCtx<'a> {
    BucketCtx {
        op: "gemm",
        bucket,
        checksum: "sum1",
        candidates: &CANDS,
        local_hit: hit,
        tie_tolerance: 0.03,
    }
}

/// Rank-dependent noise that alone would make ranks disagree: on rank r the
/// near-tied candidate `[1, 3, 4][r % 3]` is 4% faster than elsewhere.
fn timing(rank: u32, i: usize) -> f64 {
    let favoured = [1, 3, 4][rank as usize % 3];
    let noise = 1.0 + 0.002 * f64::from(rank);
    BASE[i] * noise * if i == favoured { 0.94 } else { 1.0 }
}

/// A measuring closure for `rank` that records which positions it measured.
fn measurer(rank: u32, log: &mut Vec<usize>) -> impl FnMut(&[usize]) -> Vec<Measured> + '_ {
    move |pos: &[usize]| {
        log.extend_from_slice(pos);
        pos.iter().map(|&i| Ok(stats(timing(rank, i)))).collect()
    }
}

/// Runs `f(rank, coordinator)` on every rank of an in-process group.
fn on_ranks<R: Send + 'static>(
    world: u32,
    timeout: Duration,
    f: impl Fn(u32, &mut Coordinator) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let f = Arc::new(f);
    let threads: Vec<_> = LocalCollective::group(world)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(r, c)| {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                let mut coord = Coordinator::new(Box::new(c)).with_timeout(timeout);
                f(r as u32, &mut coord)
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn winner_of(r: &Resolution) -> Option<(u32, u32)> {
    r.winner.map(|w| CANDS[w])
}

#[test]
fn independent_ranks_diverge_on_this_noise() {
    // The control: without a collective strategy the same noise splits the ranks.
    let winners = on_ranks(4, LONG, |rank, coord| {
        let bucket = vec![vec![64, 512]];
        let mut log = Vec::new();
        let r = coord.resolve(
            Strategy::Independent,
            &ctx(&bucket, None),
            &mut measurer(rank, &mut log),
        );
        assert_eq!((r.kind, r.fallback.clone(), r.measured_here), (Resolved::Local, None, 7));
        assert_eq!(r.section(rank), Some(ranktune_cache::Section::Rank(rank)));
        winner_of(&r)
    });
    assert!(winners.iter().any(|w| *w != winners[0]), "{winners:?}");
}

#[test]
fn collective_strategies_give_identical_choices_on_every_rank() {
    for strategy in [Strategy::Broadcast, Strategy::Merge, Strategy::Parallel] {
        let out = on_ranks(4, LONG, move |rank, coord| {
            let mut per_bucket = Vec::new();
            for tokens in [16u64, 32, 64] {
                let bucket = vec![vec![tokens, 512]];
                let mut log = Vec::new();
                let r = coord.resolve(strategy, &ctx(&bucket, None), &mut measurer(rank, &mut log));
                assert_eq!(r.kind, Resolved::Shared, "{strategy} rank {rank}: {:?}", r.fallback);
                assert_eq!(r.section(rank), Some(ranktune_cache::Section::Shared));
                let results: Vec<Option<f64>> =
                    r.results.iter().map(|m| m.as_ref().ok().map(|s| s.median_us)).collect();
                per_bucket.push((winner_of(&r), results, r.created_unix, log));
            }
            per_bucket
        });
        for (b, first) in out[0].iter().enumerate() {
            for (rank, other) in out.iter().enumerate() {
                let o = &other[b];
                assert_eq!(
                    (&o.0, &o.1, o.2),
                    (&first.0, &first.1, first.2),
                    "{strategy} rank {rank}"
                );
            }
            assert!(first.0.is_some());
            let measured: Vec<&Vec<usize>> = out.iter().map(|o| &o[b].3).collect();
            match strategy {
                Strategy::Broadcast => {
                    assert_eq!(measured[0], &(0..7).collect::<Vec<_>>());
                    assert!(measured[1..].iter().all(|m| m.is_empty()));
                }
                Strategy::Merge => assert!(measured.iter().all(|m| m.len() == 7)),
                _ => {
                    // Round-robin first; then balanced by the last bucket's
                    // costs: every candidate measured, every rank busy.
                    let mut all: Vec<usize> =
                        measured.iter().flat_map(|m| m.iter().copied()).collect();
                    all.sort_unstable();
                    all.dedup();
                    assert_eq!(all, (0..7).collect::<Vec<_>>());
                    assert!(measured.iter().all(|m| !m.is_empty()));
                    if b == 0 {
                        for (rank, m) in measured.iter().enumerate() {
                            assert_eq!(**m, parallel_share(7, rank as u32, 4));
                        }
                    } else {
                        // The slowest (6, at 300) is alone but for the
                        // previous winner, which every rank measures as its leader.
                        let prev = out[0][b - 1].0.unwrap();
                        let leader = CANDS.iter().position(|c| *c == prev).unwrap();
                        assert!(measured.iter().all(|m| m.contains(&leader)), "{measured:?}");
                        let mut lone = vec![leader, 6];
                        lone.sort_unstable();
                        assert!(measured.iter().any(|m| **m == lone), "{measured:?}");
                    }
                }
            }
        }
        // Merge: the slowest rank's median counts (rank 3 has the most noise,
        // and no candidate is favoured on every rank).
        if strategy == Strategy::Merge {
            let medians = &out[0][0].1;
            for (i, m) in medians.iter().enumerate() {
                let worst = (0..4).map(|r| timing(r, i)).fold(f64::MIN, f64::max);
                assert_eq!(m.unwrap(), worst, "candidate {i}");
            }
        }
    }
}

#[test]
fn a_candidate_failing_on_one_rank_fails_for_all() {
    let out = on_ranks(4, LONG, |rank, coord| {
        let bucket = vec![vec![8, 512]];
        let mut measure = |pos: &[usize]| -> Vec<Measured> {
            pos.iter()
                .map(|&i| {
                    if rank == 2 && i == 1 {
                        Err("out of registers".to_string())
                    } else {
                        Ok(stats(BASE[i]))
                    }
                })
                .collect()
        };
        let r = coord.resolve(Strategy::Merge, &ctx(&bucket, None), &mut measure);
        (winner_of(&r), r.results[1].clone())
    });
    for (winner, failed) in out {
        assert_eq!(failed.unwrap_err(), "rank 2: out of registers");
        assert_eq!(winner, Some((1, 0)), "the next best, within no tie of the failed one");
    }
}

#[test]
fn mixed_hit_and_miss_never_hangs_and_ends_with_one_choice() {
    let out = on_ranks(4, LONG, |rank, coord| {
        let bucket = vec![vec![128, 512]];
        // Ranks 0 and 2 have the bucket cached, 1 and 3 do not.
        let hit = (rank % 2 == 0).then_some((0, 2));
        let mut log = Vec::new();
        let r =
            coord.resolve(Strategy::Parallel, &ctx(&bucket, hit), &mut measurer(rank, &mut log));
        (r.kind, winner_of(&r), r.fallback)
    });
    for o in &out {
        assert_eq!(o, &out[0]);
        assert_eq!(o.0, Resolved::Shared);
        assert!(o.1.is_some() && o.2.is_none());
    }
}

#[test]
fn equal_hits_are_hits_and_different_hits_are_retuned() {
    let out = on_ranks(3, LONG, |rank, coord| {
        let bucket = vec![vec![256, 512]];
        let mut log = Vec::new();
        let same = coord.resolve(
            Strategy::Merge,
            &ctx(&bucket, Some((1, 1))),
            &mut measurer(rank, &mut log),
        );
        assert!(log.is_empty(), "a hit everywhere measures nothing");
        // Divergent caches (the classic silent divergence) are re-aligned.
        let differ = coord.resolve(
            Strategy::Merge,
            &ctx(&bucket, Some((0, rank))),
            &mut measurer(rank, &mut log),
        );
        (same.kind, differ.kind, winner_of(&differ), coord.stats().clone())
    });
    for o in &out {
        assert_eq!((o.0, o.1), (Resolved::Hit, Resolved::Shared));
        assert_eq!(o.2, out[0].2);
        assert_eq!((o.3.agreed_hits, o.3.shared, o.3.fallbacks), (1, 1, 0));
    }
}

#[test]
fn a_rank_that_never_arrives_times_out_and_the_others_fall_back() {
    let present = Arc::new(Barrier::new(3));
    let out = on_ranks(4, SHORT, move |rank, coord| {
        if rank == 3 {
            return None; // dies before its first collective
        }
        present.wait();
        let mut log = Vec::new();
        let b1 = vec![vec![32, 512]];
        let first = coord.resolve(Strategy::Merge, &ctx(&b1, None), &mut measurer(rank, &mut log));
        let b2 = vec![vec![64, 512]];
        let second = coord.resolve(Strategy::Merge, &ctx(&b2, None), &mut measurer(rank, &mut log));
        Some((first, second, log, coord.broken().map(str::to_string)))
    });
    for (first, second, log, broken) in out.into_iter().flatten() {
        assert_eq!(first.kind, Resolved::Local);
        assert!(first.winner.is_some());
        let fb = first.fallback.unwrap();
        assert_eq!(fb.ranks, vec![3]);
        for needle in [
            "gemm 32x512",
            "merge tuning failed",
            "timed out",
            "[3] did not arrive",
            "independently",
        ] {
            assert!(fb.reason.contains(needle), "{needle:?} not in {}", fb.reason);
        }
        // The second bucket does not wait again: independent from the start.
        assert_eq!(second.kind, Resolved::Local);
        let fb2 = second.fallback.unwrap();
        assert!(
            fb2.reason.contains("gemm 64x512") && fb2.reason.contains("earlier failure"),
            "{}",
            fb2.reason
        );
        assert!(broken.unwrap().contains("[3] did not arrive"));
        assert_eq!(log.len(), 14, "each bucket measured once: {log:?}");
    }
}

#[test]
fn a_rank_slower_than_the_timeout_makes_every_rank_fall_back_reusing_its_measurements() {
    // Every rank starts together (`present`); rank 3 measures its share only
    // once the others have given up waiting for its results and tuned alone
    // (`gave_up`): slower than the timeout for sure, however the threads
    // are scheduled.
    let present = Arc::new(Barrier::new(4));
    let gave_up = Arc::new(Barrier::new(4));
    let out = on_ranks(4, SHORT, move |rank, coord| {
        let bucket = vec![vec![512, 512]];
        let mut log = Vec::new();
        let mut first = true;
        let mut slow = |pos: &[usize]| {
            if rank == 3 && std::mem::take(&mut first) {
                gave_up.wait();
            }
            measurer(rank, &mut log)(pos)
        };
        present.wait();
        let r = coord.resolve(Strategy::Parallel, &ctx(&bucket, None), &mut slow);
        if rank != 3 {
            gave_up.wait();
        }
        (r, log)
    });
    for (rank, (r, log)) in out.into_iter().enumerate() {
        assert_eq!(r.kind, Resolved::Local, "rank {rank}");
        let fb = r.fallback.unwrap();
        if rank == 3 {
            assert!(fb.reason.contains("abandoned"), "{}", fb.reason);
        } else {
            assert_eq!(fb.ranks, vec![3], "{}", fb.reason);
        }
        // Its share first, then the rest, each once.
        let mut sorted = log.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..7).collect::<Vec<_>>());
        assert_eq!(
            log[..parallel_share(7, rank as u32, 4).len()],
            parallel_share(7, rank as u32, 4)[..]
        );
        assert_eq!(r.measured_here, 7);
        assert!(r.results.iter().all(Result::is_ok));
    }
}

#[test]
fn ranks_with_different_strategies_or_candidates_fall_back_and_recover() {
    let out = on_ranks(3, LONG, |rank, coord| {
        let bucket = vec![vec![1024, 512]];
        let mut log = Vec::new();
        let strategy = if rank == 1 { Strategy::Merge } else { Strategy::Parallel };
        let a = coord.resolve(strategy, &ctx(&bucket, None), &mut measurer(rank, &mut log));
        let mut c = ctx(&bucket, None);
        let fewer = &CANDS[..6];
        if rank == 2 {
            c.candidates = fewer;
        }
        let b = coord.resolve(Strategy::Merge, &c, &mut measurer(rank, &mut log));
        // A clean disagreement does not stop later buckets from being shared.
        let c = coord.resolve(Strategy::Merge, &ctx(&bucket, None), &mut measurer(rank, &mut log));
        (a, b, c, coord.broken().is_some())
    });
    for (a, b, c, broken) in out {
        let fa = a.fallback.unwrap();
        assert!(
            fa.reason.contains(
                "different strategies (rank 0: parallel, rank 1: merge, rank 2: parallel)"
            ),
            "{}",
            fa.reason
        );
        assert_eq!((a.kind, fa.ranks), (Resolved::Local, vec![1]));
        let fb = b.fallback.unwrap();
        assert!(fb.reason.contains("another candidate set"), "{}", fb.reason);
        assert_eq!(fb.ranks, vec![2]);
        assert_eq!((c.kind, broken), (Resolved::Shared, false));
    }
}

#[test]
fn independent_never_talks_to_other_ranks() {
    // Rank 1 of this group never calls anything: a collective would time out.
    let mut group = LocalCollective::group(2).unwrap();
    let c0 = group.remove(0);
    let mut coord = Coordinator::new(Box::new(c0)).with_timeout(LONG);
    let bucket = vec![vec![4, 512]];
    let mut log = Vec::new();
    let r = coord.resolve(Strategy::Independent, &ctx(&bucket, None), &mut measurer(0, &mut log));
    assert_eq!((r.kind, r.fallback.is_none()), (Resolved::Local, true));
    let r = coord.resolve(
        Strategy::Independent,
        &ctx(&bucket, Some((0, 0))),
        &mut measurer(0, &mut log),
    );
    assert_eq!(r.kind, Resolved::Hit);
    assert_eq!(coord.stats().independent, 2);
}

#[test]
fn every_candidate_failing_gives_no_winner_everywhere() {
    let out = on_ranks(2, LONG, |_, coord| {
        let bucket = vec![vec![2, 512]];
        let mut fail = |pos: &[usize]| pos.iter().map(|_| Err("unsupported".to_string())).collect();
        let r = coord.resolve(Strategy::Parallel, &ctx(&bucket, None), &mut fail);
        (r.kind, r.winner)
    });
    assert!(out.iter().all(|o| *o == (Resolved::Shared, None)));
}
