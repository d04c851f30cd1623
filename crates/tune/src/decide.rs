//! Deciding: which measured candidate wins.
//!
//! Owns the decision rule only (robust statistic + near-tie rule); never
//! measures, never touches the cache.

use ranktune_cache::Stats;

/// Default near-tie tolerance: candidates within 3% of the best median are
/// considered equal (measured cross-rank noise is 0.7–3.5%).
pub const DEFAULT_TIE_TOLERANCE: f64 = 0.03;

/// On a noisy machine the tie band widens to the best candidate's own
/// measured spread, up to this much: gaps smaller than the noise cannot be
/// told apart, so they must not decide.
pub const NOISE_BAND_CAP: f64 = 0.10;

/// The winner among candidates given in canonical order (runner index, then
/// tactic index): the lowest-index candidate whose median is within the tie
/// band of the best median. The band is `tolerance`, widened to the best
/// candidate's spread ((p90 − min) / median) when that is larger, capped at
/// [`NOISE_BAND_CAP`]. `None` when none has statistics.
///
/// Deterministic: equivalent tactics never flip between reruns or ranks
/// unless their gap crosses the band.
pub fn decide(candidates: &[Option<&Stats>], tolerance: f64) -> Option<usize> {
    let best = candidates
        .iter()
        .flatten()
        .filter(|s| s.samples > 0 && s.median_us.is_finite())
        .min_by(|a, b| a.median_us.total_cmp(&b.median_us))?;
    let noise = if best.spread.is_finite() { best.spread.clamp(0.0, NOISE_BAND_CAP) } else { 0.0 };
    let limit = best.median_us * (1.0 + tolerance.max(0.0).max(noise));
    candidates.iter().position(|c| {
        c.is_some_and(|s| s.samples > 0 && s.median_us.is_finite() && s.median_us <= limit)
    })
}
