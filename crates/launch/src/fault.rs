//! Test-only fault injection for the launcher's children, compiled only with
//! the crate's `fault-injection` feature (real builds never read its
//! variable).
//!
//! `RANKTUNE_TEST_DIE_AT=<rank>:<n>`: the child rank `<rank>` (its rank from
//! `RANKTUNE_RANK` and the other rank variables) aborts as soon as its
//! [`ProgressWriter`](super::ProgressWriter) has reported `<n>` steps done,
//! i.e. just before its step number `<n>` (counting from 0), without any
//! cleanup, like a crashed rank. `<n>` at or past the rank's total never
//! fires. For tests of what the launcher and the other ranks do when one
//! rank dies mid-job.

use ranktune_core::rank::{RankInfo, RankOverrides};

/// The variable this module reads.
const VAR: &str = "RANKTUNE_TEST_DIE_AT";

/// The step count at which this process must die, if the variable names
/// this process's rank.
pub(super) fn die_at_from_env() -> Option<u64> {
    let (rank, at) = parse(&std::env::var(VAR).ok()?)?;
    let me = RankInfo::detect(&RankOverrides::default()).ok()?.rank;
    (me == rank).then_some(at)
}

/// `<rank>:<n>`.
fn parse(v: &str) -> Option<(u32, u64)> {
    let (r, n) = v.split_once(':')?;
    Some((r.trim().parse().ok()?, n.trim().parse().ok()?))
}

/// Aborts the process when `done` reached the planned step, before the last.
pub(super) fn maybe_die(at: Option<u64>, done: u64, total: u64) {
    if at == Some(done) && done < total {
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rank_and_step() {
        assert_eq!(parse("2:2"), Some((2, 2)));
        assert_eq!(parse(" 0 : 7 "), Some((0, 7)));
        for bad in ["", "2", "2:", ":2", "a:1", "1:b", "-1:2"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn never_dies_without_a_plan_or_at_the_end() {
        maybe_die(None, 0, 3);
        maybe_die(Some(1), 0, 3);
        maybe_die(Some(3), 3, 3);
    }
}
