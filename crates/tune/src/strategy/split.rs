//! How the parallel strategy splits a bucket's candidates over the ranks.
//!
//! Owns the assignment only: which candidate indices a rank measures.

/// The candidate indices (canonical order, `0..candidates`) that `rank` of
/// `world` measures under the parallel strategy.
///
/// Round-robin: candidate `i` belongs to rank `i % world`, so every candidate
/// is measured exactly once when there are at least as many candidates as
/// ranks. When there are fewer, rank `r ≥ candidates` duplicates candidate
/// `r % candidates`: every rank has work, and the duplicate timing is folded
/// into that candidate's result with the merge rule (slowest rank counts), so
/// extra ranks make the decision more robust rather than idle.
/// No candidates → no work. A `world` of 0 is treated as 1.
///
/// ```
/// use ranktune_tune::strategy::parallel_share;
/// assert_eq!(parallel_share(5, 0, 2), vec![0, 2, 4]);
/// assert_eq!(parallel_share(5, 1, 2), vec![1, 3]);
/// assert_eq!(parallel_share(2, 3, 4), vec![1]); // more ranks than candidates: a duplicate
/// ```
pub fn parallel_share(candidates: usize, rank: u32, world: u32) -> Vec<usize> {
    if candidates == 0 {
        return Vec::new();
    }
    let world = world.max(1) as usize;
    let rank = rank as usize % world;
    let mine: Vec<usize> = (rank..candidates).step_by(world).collect();
    if mine.is_empty() {
        vec![rank % candidates]
    } else {
        mine
    }
}

/// Like [`parallel_share`], balanced by expected cost: `costs[i]` is the
/// expected measuring time of candidate `i` (e.g. from the previous bucket of
/// the same op, whose combined results every rank holds identically).
///
/// Longest first, each to the least-loaded rank (ties: fewer candidates,
/// then the lower rank), so one very slow candidate (a naive GEMM loop
/// order) no longer makes its rank the bottleneck of every bucket. The
/// result depends only on `costs`, so every rank computes the same split.
/// With fewer candidates than ranks, extra ranks duplicate as in
/// [`parallel_share`]. Non-finite or negative costs count as 0.
///
/// ```
/// use ranktune_tune::strategy::balanced_share;
/// let costs = [1.0, 50.0, 1.0, 1.0, 1.0];
/// assert_eq!(balanced_share(&costs, 0, 2), vec![1]);
/// assert_eq!(balanced_share(&costs, 1, 2), vec![0, 2, 3, 4]);
/// ```
pub fn balanced_share(costs: &[f64], rank: u32, world: u32) -> Vec<usize> {
    let n = costs.len();
    let world = world.max(1) as usize;
    if n < world {
        return parallel_share(n, rank, world as u32);
    }
    let cost = |i: usize| if costs[i].is_finite() && costs[i] > 0.0 { costs[i] } else { 0.0 };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cost(b).total_cmp(&cost(a)).then(a.cmp(&b)));
    let mut load = vec![0.0f64; world];
    let mut count = vec![0usize; world];
    let mut owner = vec![0usize; n];
    for i in order {
        let r = (0..world)
            .min_by(|&a, &b| {
                load[a].total_cmp(&load[b]).then(count[a].cmp(&count[b])).then(a.cmp(&b))
            })
            .unwrap_or(0);
        load[r] += cost(i);
        count[r] += 1;
        owner[i] = r;
    }
    let me = rank as usize % world;
    (0..n).filter(|&i| owner[i] == me).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn balanced_covers_every_candidate_once_and_every_rank_works(
            costs in proptest::collection::vec(0.0f64..1000.0, 0..30),
            world in 1u32..8,
        ) {
            let n = costs.len();
            let shares: Vec<Vec<usize>> = (0..world).map(|r| balanced_share(&costs, r, world)).collect();
            let mut count = vec![0usize; n];
            for share in &shares {
                prop_assert!(n == 0 || !share.is_empty());
                for &i in share {
                    count[i] += 1;
                }
            }
            if n >= world as usize {
                prop_assert!(count.iter().all(|&c| c == 1));
                // Greedy LPT: no rank exceeds the average by more than the largest cost.
                let total: f64 = costs.iter().sum();
                let max = costs.iter().copied().fold(0.0, f64::max);
                for share in &shares {
                    let load: f64 = share.iter().map(|&i| costs[i]).sum();
                    prop_assert!(load <= total / f64::from(world) + max + 1e-9);
                }
            } else {
                prop_assert!(count.iter().all(|&c| c >= 1));
            }
        }
    }

    #[test]
    fn zero_costs_still_spread_over_ranks() {
        let costs = [0.0; 5];
        assert_eq!(balanced_share(&costs, 0, 2), vec![0, 2, 4]);
        assert_eq!(balanced_share(&costs, 1, 2), vec![1, 3]);
        assert_eq!(balanced_share(&[f64::NAN, -1.0, 2.0], 0, 3), vec![2]);
    }

    proptest! {
        #[test]
        fn every_candidate_is_measured_and_every_rank_works(n in 0usize..40, world in 1u32..12) {
            let shares: Vec<Vec<usize>> = (0..world).map(|r| parallel_share(n, r, world)).collect();
            let mut count = vec![0usize; n];
            for share in &shares {
                prop_assert!(n == 0 || !share.is_empty());
                for &i in share {
                    prop_assert!(i < n);
                    count[i] += 1;
                }
            }
            for c in &count {
                prop_assert!(*c >= 1);
            }
            if n >= world as usize {
                // Exactly once, and balanced within one candidate.
                prop_assert!(count.iter().all(|&c| c == 1));
                let sizes: Vec<usize> = shares.iter().map(Vec::len).collect();
                let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                prop_assert!(hi - lo <= 1);
            } else if n > 0 {
                prop_assert!(shares.iter().all(|s| s.len() == 1));
            }
        }
    }

    #[test]
    fn small_cases() {
        assert_eq!(parallel_share(0, 0, 4), Vec::<usize>::new());
        assert_eq!(parallel_share(3, 0, 1), vec![0, 1, 2]);
        assert_eq!(parallel_share(1, 3, 4), vec![0]);
        assert_eq!(parallel_share(3, 1, 0), vec![0, 1, 2]);
    }
}
