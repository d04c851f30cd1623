//! The miss path: a call whose bucket has no usable slot in this thread's
//! snapshot (or that cannot be bucketed at all).
//!
//! Under the tuner's lock it registers the op (checking its stored entries),
//! then answers from the current snapshot, tunes the bucket in tuning mode,
//! or falls back and warns once per (op, bucket). Owns that dispatch only;
//! tuning itself is in [`tune`](super::tune).
//!
//! The dispatch rule itself is [`miss_action`]: what a miss does, from
//! what the bucket holds and whether tuning is on. Python's
//! `ranktune.autotune` asks the same function (through the bindings), so
//! one rule answers both.

use super::hot::{Slot, SlotKind};
use super::Tuner;
use crate::choice::{Choice, ChoiceSource};
use crate::key::{BucketKey, MAX_DIMS, MAX_INPUTS};
use crate::op::Op;
use crate::runner::TuneInputs;

/// What a bucket holds when the hit path could not answer it (the input
/// of [`miss_action`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing: never tuned, never asked before.
    Nothing,
    /// A choice. `confirm`: one the ranks of a collective strategy have
    /// not agreed on yet in this tuning session.
    Hit {
        /// The ranks must agree on it before it is used in tuning mode.
        confirm: bool,
    },
    /// A choice loaded from the cache for an op that validates, not used
    /// yet in this process.
    Unchecked,
    /// No choice, already answered with the fallback (and warned about):
    /// untuned, or a cached choice that failed its validation.
    Fallback,
    /// Tuned, and every candidate failed.
    Failed,
}

impl Found {
    /// Its name in the shared rule cases and the bindings: `nothing`,
    /// `hit`, `hit_confirm`, `unchecked`, `fallback`, `failed`.
    pub fn name(self) -> &'static str {
        match self {
            Found::Nothing => "nothing",
            Found::Hit { confirm: false } => "hit",
            Found::Hit { confirm: true } => "hit_confirm",
            Found::Unchecked => "unchecked",
            Found::Fallback => "fallback",
            Found::Failed => "failed",
        }
    }

    /// The one named `name` ([`Found::name`]).
    pub fn from_name(name: &str) -> Option<Found> {
        [
            Found::Nothing,
            Found::Hit { confirm: false },
            Found::Hit { confirm: true },
            Found::Unchecked,
            Found::Fallback,
            Found::Failed,
        ]
        .into_iter()
        .find(|f| f.name() == name)
    }
}

/// What a miss does ([`miss_action`]'s answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissAction {
    /// Run the choice (and publish it for the hit path).
    Hit,
    /// Check the cached choice first ([`Found::Unchecked`]), then ask again
    /// with what the check left.
    Validate,
    /// Measure the bucket. `confirm_hit`: there is a choice, which the
    /// ranks agree on (or tune again) together.
    Tune {
        /// The bucket has a choice the ranks must confirm.
        confirm_hit: bool,
    },
    /// Run the fallback; `warn`: for the first time at this bucket, so say
    /// that it is untuned.
    Fallback {
        /// Warn that the bucket has no tuned choice.
        warn: bool,
    },
}

impl MissAction {
    /// Its name in the shared rule cases and the bindings: `hit`,
    /// `validate`, `tune`, `tune_confirm`, `fallback_warn`, `fallback`.
    pub fn name(self) -> &'static str {
        match self {
            MissAction::Hit => "hit",
            MissAction::Validate => "validate",
            MissAction::Tune { confirm_hit: false } => "tune",
            MissAction::Tune { confirm_hit: true } => "tune_confirm",
            MissAction::Fallback { warn: true } => "fallback_warn",
            MissAction::Fallback { warn: false } => "fallback",
        }
    }
}

/// The miss dispatch: a choice that needs checking is checked first; in
/// tuning mode (`tune`) a bucket without a usable choice is measured, and
/// one whose choice the ranks must confirm is resolved with them; outside
/// it, a bucket without a choice runs the fallback, with a warning the
/// first time. Every candidate having failed is final for the session.
///
/// ```
/// use ranktune_tune::{miss_action, Found, MissAction};
/// assert_eq!(miss_action(Found::Nothing, false), MissAction::Fallback { warn: true });
/// assert_eq!(miss_action(Found::Nothing, true), MissAction::Tune { confirm_hit: false });
/// assert_eq!(miss_action(Found::Hit { confirm: true }, true), MissAction::Tune { confirm_hit: true });
/// ```
pub fn miss_action(found: Found, tune: bool) -> MissAction {
    match found {
        Found::Unchecked => MissAction::Validate,
        Found::Hit { confirm: true } if tune => MissAction::Tune { confirm_hit: true },
        Found::Hit { .. } => MissAction::Hit,
        Found::Failed => MissAction::Fallback { warn: false },
        Found::Fallback if !tune => MissAction::Fallback { warn: false },
        Found::Nothing if !tune => MissAction::Fallback { warn: true },
        Found::Fallback | Found::Nothing => MissAction::Tune { confirm_hit: false },
    }
}

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
        let found = match existing {
            None => Found::Nothing,
            Some(s) => match s.kind {
                SlotKind::Hit => Found::Hit { confirm: s.confirm },
                SlotKind::Validate => Found::Unchecked,
                SlotKind::Fallback => Found::Fallback,
                SlotKind::Failed => Found::Failed,
            },
        };
        let stats = &mut inner.ops[op_slot as usize].stats;
        match (miss_action(found, tune), existing) {
            (MissAction::Hit, Some(s)) => {
                stats.hits += 1;
                return Choice {
                    runner_index: s.runner,
                    tactic_index: s.tactic,
                    source: ChoiceSource::Cache,
                };
            }
            (MissAction::Tune { confirm_hit }, _) => {
                if found == Found::Nothing {
                    stats.misses += 1;
                }
                let hit = existing.filter(|_| confirm_hit).map(|s| (s.runner, s.tactic));
                return self.tune_bucket(&mut inner, op, key, h, op_slot, hit);
            }
            (MissAction::Fallback { warn: false }, _) => {
                stats.fallbacks += 1;
                return Choice::FALLBACK;
            }
            // A validated slot is re-read as a hit or the fallback above,
            // and a hit always has its slot.
            (MissAction::Fallback { warn: true }, _)
            | (MissAction::Validate | MissAction::Hit, _) => {
                stats.misses += 1;
            }
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
