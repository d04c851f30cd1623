//! The miss path: a call whose bucket has no usable slot in this thread's
//! snapshot (or that cannot be bucketed at all).
//!
//! Under the tuner's lock it registers the op (checking its stored entries),
//! then answers from the current snapshot, tunes the bucket in tuning mode,
//! or falls back and warns once per (op, bucket). Owns that dispatch only;
//! tuning itself is in [`tune`](super::tune).

use super::hot::{Slot, SlotKind};
use super::Tuner;
use crate::choice::{Choice, Source};
use crate::key::{BucketKey, MAX_DIMS, MAX_INPUTS};
use crate::op::Op;
use crate::runner::TuneInputs;

impl Tuner {
    /// A call whose shapes do not fit the op's tuning config: the fallback,
    /// with a warning the first time.
    #[cold]
    pub(super) fn unkeyable<I: TuneInputs>(&self, op: &Op<I>) -> Choice {
        let mut inner = self.lock();
        let slot = self.register(&mut inner, op) as usize;
        let st = &mut inner.ops[slot].stats;
        st.fallbacks += 1;
        if st.fallbacks == 1 {
            tracing::warn!(
                op = op.name(),
                "input shapes do not fit the op's tuning config (or exceed {} inputs / {} dims); using the fallback",
                MAX_INPUTS,
                MAX_DIMS
            );
        }
        Choice::FALLBACK
    }

    /// A bucket the hit path could not answer; `tune` says whether to
    /// measure it (tuning mode, or [`tune_key`](Tuner::tune_key)).
    #[cold]
    pub(super) fn miss<I: TuneInputs>(
        &self,
        op: &Op<I>,
        key: &BucketKey,
        h: u64,
        tune: bool,
    ) -> Choice {
        let mut inner = self.lock();
        let op_slot = self.register(&mut inner, op);
        let existing =
            inner.snapshot.get(&h).copied().filter(|s| s.op_id == op.id() && s.key == *key);
        // The first use of a cached tactic of an op that validates: checked
        // now, published as a hit or (failed) as the fallback.
        let existing = match existing {
            Some(s) if s.kind == SlotKind::Validate => {
                Some(self.validate_slot(&mut inner, op, s, h))
            }
            other => other,
        };
        let stats = &mut inner.ops[op_slot as usize].stats;
        match existing {
            Some(s) if s.kind == SlotKind::Hit && tune && s.confirm => {
                let hit = Some((s.runner, s.tactic));
                return self.tune_bucket(&mut inner, op, key, h, op_slot, hit);
            }
            Some(s) if s.kind == SlotKind::Hit => {
                stats.hits += 1;
                return Choice {
                    runner_index: s.runner,
                    tactic_index: s.tactic,
                    source: Source::Cache,
                };
            }
            Some(s) if s.kind == SlotKind::Failed || !tune => {
                stats.fallbacks += 1;
                return Choice::FALLBACK;
            }
            Some(_) => {}
            None => stats.misses += 1,
        }
        if tune {
            return self.tune_bucket(&mut inner, op, key, h, op_slot, None);
        }
        inner.ops[op_slot as usize].stats.fallbacks += 1;
        tracing::warn!(
            op = op.name(),
            bucket = ?key.to_nested(),
            "no tuned tactic for this bucket; using the fallback (run `ranktune tune` or enable tuning mode)"
        );
        let slot = Slot::new(op.id(), *key, 0, 0, op_slot, SlotKind::Fallback);
        self.publish(&mut inner, [(h, slot)]);
        Choice::FALLBACK
    }
}
