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
/// use ranktune::tune::strategy::parallel_share;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
