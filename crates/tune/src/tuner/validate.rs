//! The check of a cached tactic on its first use in a process, for ops
//! built [`with_validation`](crate::Op::with_validation): it runs once on
//! synthetic inputs of its bucket's shape, its runner's
//! [`validate`](crate::Runner::validate) accepts the result, and, when the
//! op has a [`Reference`](crate::Reference), its output matches the
//! fallback's on the same inputs.
//!
//! A tactic that passes is published as an ordinary hit: from then on the
//! hit path answers it as it answers every hit (no check, no allocation).
//! One that fails is published as the fallback for this process (one
//! warning), goes on the blocklist (kind `validation`) with the next save,
//! and is tuned again by the next tuning run — in this one too, when tuning
//! mode is on (then, for an op tuned alone, without that tactic; an op
//! tuned together with the other ranks keeps the ranks' candidate lists
//! equal and skips it from the next run on).
//!
//! Owns the check and its outcome; runs on the miss path only, under the
//! tuner's lock. Never does I/O.

use super::blocked;
use super::hot::{Slot, SlotKind};
use super::isolate::isolate;
use super::{Inner, Tuner};
use crate::op::Op;
use crate::runner::TuneInputs;
use ranktune_cache::{BlockKind, Blocked};

impl Tuner {
    /// Checks the cached tactic of `slot` (hash `h`) and publishes the
    /// outcome: the slot as a hit, or the fallback. Returns what was
    /// published.
    #[cold]
    pub(super) fn validate_slot<I: TuneInputs>(
        &self,
        inner: &mut Inner,
        op: &Op<I>,
        slot: Slot,
        h: u64,
    ) -> Slot {
        let shapes = slot.key.to_nested();
        let cand = (slot.runner as usize, slot.tactic as usize);
        let outcome = check(op, cand, &shapes);
        let published = match outcome {
            Ok(()) => Slot { kind: SlotKind::Hit, ..slot },
            Err(why) => {
                let runner = op.runner_names()[cand.0].as_str();
                let tactic = &op.tactics(cand.0)[cand.1];
                tracing::warn!(
                    op = op.name(),
                    bucket = ?shapes,
                    "the cached tactic {runner} {tactic} failed its validation ({why}); using \
                     the fallback in this process, and marking it bad in the cache (the next \
                     tuning run tunes this bucket again without it)"
                );
                let key = blocked::key_of(op, cand, &shapes, &self.opts.env_digest);
                let record = Blocked::new(
                    BlockKind::Validation,
                    why,
                    ranktune_core::clock::unix_now(),
                    self.opts.rank,
                    ranktune_core::rank::host_name(),
                );
                if !self.strategy_for(inner, op).is_collective() {
                    inner.blocklist.insert(key.clone(), record.clone());
                }
                inner.pending.blocklist.insert(key, record);
                Slot { runner: 0, tactic: 0, kind: SlotKind::Fallback, confirm: false, ..slot }
            }
        };
        self.publish(inner, [(h, published)]);
        published
    }
}

/// The check itself: `Err` says why candidate `(r, t)` of `op` failed at
/// `shapes`.
fn check<I: TuneInputs>(
    op: &Op<I>,
    (r, t): (usize, usize),
    shapes: &[Vec<u64>],
) -> Result<(), String> {
    let runner = &op.runners()[r];
    let mut got =
        I::synthetic(shapes).map_err(|e| format!("cannot build synthetic inputs: {e}"))?;
    match isolate(|| runner.run(t, &mut got)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(format!("it failed: {e}")),
        Err(p) => return Err(format!("it panicked: {p}")),
    }
    match isolate(|| runner.validate(t, &got)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(format!("its runner's check refused it: {e}")),
        Err(p) => return Err(format!("its runner's check panicked: {p}")),
    }
    let Some(reference) = op.reference() else { return Ok(()) };
    if (r, t) == (0, 0) {
        return Ok(());
    }
    let mut want =
        I::synthetic(shapes).map_err(|e| format!("cannot build synthetic inputs: {e}"))?;
    match isolate(|| op.runners()[0].run(0, &mut want)) {
        Ok(Ok(())) => {}
        // No reference to compare with: the tactic ran, which is all that
        // can be said.
        _ => {
            tracing::debug!(op = op.name(), "the fallback failed; the reference check is skipped");
            return Ok(());
        }
    }
    match isolate(|| reference.compare(&want, &got)) {
        Ok(r) => r,
        Err(p) => Err(format!("the reference check panicked: {p}")),
    }
}
