//! The candidates of a bucket: every (runner, tactic) whose runner says it
//! is valid for the bucket's shapes, in canonical order.
//!
//! Owns the listing only; a runner whose `valid` panics has that tactic left
//! out, and nothing is measured here.

use super::isolate::isolate;
use crate::op::Op;
use crate::runner::TuneInputs;

/// The valid `(runner index, tactic index)` pairs of `op` for `shapes`, in
/// canonical order (runner, then tactic).
pub(super) fn valid_candidates<I: TuneInputs>(
    op: &Op<I>,
    shapes: &[Vec<u64>],
) -> Vec<(usize, usize)> {
    let mut cands = Vec::new();
    for (r, runner) in op.runners().iter().enumerate() {
        for t in 0..op.tactics(r).len() {
            if isolate(|| runner.valid(t, shapes)).unwrap_or(false) {
                cands.push((r, t));
            }
        }
    }
    cands
}
