//! Tuning one bucket, start to finish: list the valid candidates (less
//! the known-bad ones, [`blocked`](super::blocked)), measure
//! and decide (alone or with the other ranks), record the result, publish it.
//!
//! Owns the order of those steps only; each lives in its own module
//! ([`candidates`](super::candidates), [`inputs`](super::inputs),
//! [`resolve`](super::resolve), [`record`](super::record)). Runs with the
//! tuner's lock held, on the miss path only.

use super::blocked;
use super::candidates::valid_candidates;
use super::hot::{Slot, SlotKind};
use super::inputs::Bench;
use super::record::Measured;
use super::resolve::{settle, Ask, Settled};
use super::{Inner, Tuner};
use crate::choice::{Choice, ChoiceSource};
use crate::key::BucketKey;
use crate::op::Op;
use crate::runner::TuneInputs;
use std::time::Instant;

impl Tuner {
    /// Measures `key`'s bucket of `op` (hash `h`, op slot `op_slot`), stores
    /// and publishes the winner. `local_hit` is this rank's cached choice
    /// when the ranks must agree on it first (then nothing may be measured).
    pub(super) fn tune_bucket<I: TuneInputs>(
        &self,
        inner: &mut Inner,
        op: &Op<I>,
        key: &BucketKey,
        h: u64,
        op_slot: u32,
        local_hit: Option<(u32, u32)>,
    ) -> Choice {
        let shapes = key.to_nested();
        let span = tracing::info_span!("tune", op = op.name(), bucket = ?shapes);
        let _enter = span.enter();
        let t0 = Instant::now();
        let strategy = self.strategy_for(inner, op);
        // Collective strategies: every environment's records, so every rank
        // lists the same candidates (see `blocked`).
        let env = (!strategy.is_collective()).then_some(self.opts.env_digest.as_str());
        let (cands, skipped) = blocked::split(
            &inner.blocklist,
            op,
            &shapes,
            valid_candidates(op, &shapes),
            env,
            self.opts.retry_failed,
        );
        if !skipped.is_empty() {
            tracing::info!(
                op = op.name(),
                bucket = ?shapes,
                "skipped {} known-bad tactic(s) (first: {} {}: {})",
                skipped.len(),
                skipped[0].runner,
                skipped[0].tactic,
                skipped[0].kind
            );
        }
        let isolation = self.isolation_for(op).clone();
        let mut bench = Bench::new(op, &shapes, &cands, &isolation);
        let ask = Ask {
            op,
            shapes: &shapes,
            cands: &cands,
            strategy,
            local_hit,
            sampling: self.opts.sampling,
            tie_tolerance: self.opts.tie_tolerance,
            section: self.opts.section,
            bench: &mut bench,
        };
        let Inner { timer, coordinator, .. } = inner;
        let outcome = match settle(ask, timer.as_mut(), coordinator.as_mut()) {
            Settled::Confirmed(runner, tactic) => {
                // Every rank has the same cached choice: confirmed.
                inner.ops[op_slot as usize].stats.hits += 1;
                let slot = Slot::new(op.id(), *key, runner, tactic, op_slot, SlotKind::Hit);
                self.publish(inner, [(h, slot)]);
                return Choice {
                    runner_index: runner,
                    tactic_index: tactic,
                    source: ChoiceSource::Cache,
                };
            }
            Settled::Measured(outcome) => {
                if local_hit.is_some() {
                    // This rank had the bucket cached, but the ranks did not
                    // all agree on it: not a hit, a miss tuned again.
                    inner.ops[op_slot as usize].stats.misses += 1;
                }
                outcome
            }
        };
        let first_error = bench.first_error.take();
        let hard = std::mem::take(&mut bench.hard_failures);
        let workers = bench.worker_starts();
        // The bucket's last worker ends here, before the entry is recorded.
        drop(bench);
        let measured = Measured {
            op,
            op_slot,
            shapes,
            cands: &cands,
            strategy,
            outcome,
            t0,
            first_error,
            hard,
            workers,
            skipped,
        };
        let (choice, kind) = self.record(inner, measured);
        let slot =
            Slot::new(op.id(), *key, choice.runner_index, choice.tactic_index, op_slot, kind);
        self.publish(inner, [(h, slot)]);
        choice
    }
}
