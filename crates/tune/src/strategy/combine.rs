//! How several ranks' measurements of one candidate become one result.
//!
//! Owns the combination rule only; never measures and never talks to ranks.

use ranktune_cache::Stats;

/// One rank's measurement of a candidate: its statistics or its error text.
pub type RankMeasurement<'a> = (u32, Result<&'a Stats, &'a str>);

/// Combines the measurements of one candidate taken on several ranks.
///
/// The rule: **the slowest rank counts.** A kernel used by every rank of a
/// collective step runs at the speed of its slowest rank, so the candidate's
/// result is the statistics of the rank with the highest median (ties: the
/// lowest rank), taken whole so min/median/p90 stay one coherent sample set.
/// A candidate that failed on **any** rank is failed (`"rank 2: <error>"`, the
/// lowest failing rank): a tactic that cannot run everywhere must not be
/// chosen for everyone. No measurement at all is a failure too.
///
/// The result depends only on the values, in rank order, so every rank
/// that combines the same gathered data gets the same answer.
///
/// ```
/// use ranktune_cache::Stats;
/// use ranktune_tune::strategy::combine_ranks;
/// let s = |m: f64| Stats { min_us: m, median_us: m, p90_us: m, spread: 0.0, samples: 3 };
/// let (a, b) = (s(10.0), s(12.0));
/// assert_eq!(combine_ranks(&[(0, Ok(&a)), (1, Ok(&b))]).unwrap().median_us, 12.0);
/// assert_eq!(combine_ranks(&[(0, Ok(&a)), (1, Err("out of memory"))]).unwrap_err(), "rank 1: out of memory");
/// ```
pub fn combine_ranks(measurements: &[RankMeasurement<'_>]) -> Result<Stats, String> {
    let mut sorted: Vec<&RankMeasurement<'_>> = measurements.iter().collect();
    sorted.sort_by_key(|m| m.0);
    if let Some((rank, Err(e))) = sorted.iter().find(|m| m.1.is_err()) {
        return Err(format!("rank {rank}: {e}"));
    }
    let mut worst: Option<&Stats> = None;
    for (_, m) in &sorted {
        if let Ok(s) = m {
            if worst.is_none_or(|w| s.median_us.total_cmp(&w.median_us).is_gt()) {
                worst = Some(s);
            }
        }
    }
    worst.cloned().ok_or_else(|| "no rank measured this candidate".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(median: f64, min: f64) -> Stats {
        Stats { min_us: min, median_us: median, p90_us: median * 1.1, spread: 0.1, samples: 5 }
    }

    #[test]
    fn slowest_rank_wins_whole() {
        let (a, b, c) = (s(10.0, 9.0), s(11.0, 8.0), s(10.5, 10.0));
        let got = combine_ranks(&[(2, Ok(&c)), (0, Ok(&a)), (1, Ok(&b))]).unwrap();
        assert_eq!(got, b);
    }

    #[test]
    fn ties_pick_the_lowest_rank_and_order_does_not_matter() {
        let (a, b) = (s(10.0, 9.0), s(10.0, 5.0));
        let one = combine_ranks(&[(0, Ok(&a)), (1, Ok(&b))]).unwrap();
        let two = combine_ranks(&[(1, Ok(&b)), (0, Ok(&a))]).unwrap();
        assert_eq!(one, a);
        assert_eq!(two, a);
    }

    #[test]
    fn any_failure_fails_naming_the_lowest_failing_rank() {
        let a = s(10.0, 9.0);
        let err = combine_ranks(&[(3, Err("late")), (0, Ok(&a)), (1, Err("boom"))]).unwrap_err();
        assert_eq!(err, "rank 1: boom");
        assert_eq!(combine_ranks(&[]).unwrap_err(), "no rank measured this candidate");
    }
}
