//! Deciding: which measured candidate wins.
//!
//! Owns the decision rule only (robust statistic + near-tie rule); never
//! measures, never touches the cache.

use crate::cache::Stats;

/// Default near-tie tolerance: candidates within 3% of the best median are
/// considered equal (measured cross-rank noise is 0.7–3.5%).
pub const DEFAULT_TIE_TOLERANCE: f64 = 0.03;

/// The winner among candidates given in canonical order (runner index, then
/// tactic index): the lowest-index candidate whose median is within
/// `tolerance` of the best median. `None` when none has statistics.
///
/// Deterministic: equivalent tactics never flip between reruns or ranks
/// unless their gap crosses the tolerance.
pub fn decide(candidates: &[Option<&Stats>], tolerance: f64) -> Option<usize> {
    let best = candidates
        .iter()
        .flatten()
        .filter(|s| s.samples > 0 && s.median_us.is_finite())
        .map(|s| s.median_us)
        .min_by(f64::total_cmp)?;
    let limit = best * (1.0 + tolerance.max(0.0));
    candidates.iter().position(|c| {
        c.is_some_and(|s| s.samples > 0 && s.median_us.is_finite() && s.median_us <= limit)
    })
}
