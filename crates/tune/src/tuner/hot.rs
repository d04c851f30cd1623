//! The hit path: the published snapshot of decisions, each thread's copy of
//! it, and the counters only that thread writes.
//!
//! A hit outside tuning reads this thread's copy of the current immutable
//! snapshot and bumps a counter only this thread writes: no allocation, no
//! logging, no lock and no shared cache line written. A thread takes the
//! tuner's mutex only to refresh its copy after a publish bumped the
//! generation counter (entries loaded or tuned).
//!
//! Owns the slot tables and the thread-local slots. It must never allocate,
//! lock or log on a hit, and never measures or validates: the miss path
//! decides, then calls [`Tuner::publish`].

use super::{Inner, Tuner};
use crate::choice::{Choice, ChoiceSource};
use crate::key::BucketKey;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a published slot answers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum SlotKind {
    Hit,
    /// Untuned: fallback until tuning mode measures it.
    Fallback,
    /// Tuned, but every candidate failed.
    Failed,
    /// A hit loaded from the cache for an op that validates: checked on
    /// its first use (on the miss path), then published as a `Hit` (or, when
    /// it fails, as the fallback).
    Validate,
}

/// One published decision, keyed in the snapshot by the bucket key's hash.
#[derive(Clone, Copy)]
pub(super) struct Slot {
    pub(super) op_id: u64,
    pub(super) runner: u32,
    pub(super) tactic: u32,
    pub(super) op_slot: u32,
    pub(super) kind: SlotKind,
    /// A hit loaded from the cache for an op with a collective strategy: in
    /// tuning mode the ranks must agree on it once before it is used.
    pub(super) confirm: bool,
    pub(super) key: BucketKey,
}

impl Slot {
    /// A slot that needs no agreement of the ranks.
    pub(super) fn new(
        op_id: u64,
        key: BucketKey,
        runner: u32,
        tactic: u32,
        op_slot: u32,
        kind: SlotKind,
    ) -> Self {
        Slot { op_id, runner, tactic, op_slot, kind, confirm: false, key }
    }
}

/// The snapshot: bucket-key hash → slot.
pub(super) type SlotMap = ranktune_core::hash::FastMap<u64, Slot>;

/// Per-thread counters: written by one thread only, read by `stats`.
pub(super) struct Counters {
    pub(super) hits: Vec<AtomicU64>,
    pub(super) fallbacks: Vec<AtomicU64>,
}

impl Counters {
    fn new(n: usize) -> Self {
        Counters {
            hits: (0..n).map(|_| AtomicU64::new(0)).collect(),
            fallbacks: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

#[inline]
fn bump(c: Option<&AtomicU64>) {
    if let Some(c) = c {
        // Single writer: a plain load + store, no locked read-modify-write.
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }
}

/// One thread's view of one tuner.
struct Local {
    uid: u64,
    generation: u64,
    snap: Arc<SlotMap>,
    counters: Arc<Counters>,
}

thread_local! {
    static LOCAL: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

/// Most tuners a thread keeps a snapshot of at once.
const LOCAL_SLOTS: usize = 16;

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// A process-unique id for a new tuner (tells the thread-local views apart).
pub(super) fn next_uid() -> u64 {
    NEXT_UID.fetch_add(1, Ordering::Relaxed)
}

impl Tuner {
    /// The hit path: the stored answer for `key` (hash `h`) of op `op_id`, or
    /// `None` when the miss path must decide.
    #[inline]
    pub(super) fn lookup(&self, op_id: u64, key: &BucketKey, h: u64) -> Option<Choice> {
        let generation = self.generation.load(Ordering::Acquire);
        LOCAL
            .try_with(|cell| {
                let mut locals = cell.try_borrow_mut().ok()?;
                // Most recently used tuner first: usually one comparison.
                if !matches!(locals.first(), Some(l) if l.uid == self.uid && l.generation == generation) {
                    self.local_slow(&mut locals, generation);
                }
                let local = locals.first()?;
                let slot = local.snap.get(&h)?;
                if slot.op_id != op_id || slot.key != *key {
                    return None;
                }
                let i = slot.op_slot as usize;
                match slot.kind {
                    // Tuning mode: the ranks agree on a cached hit once first.
                    SlotKind::Hit if slot.confirm && self.tuning.load(Ordering::Relaxed) => None,
                    SlotKind::Hit => {
                        bump(local.counters.hits.get(i));
                        Some(Choice { runner_index: slot.runner, tactic_index: slot.tactic, source: ChoiceSource::Cache })
                    }
                    SlotKind::Fallback if self.tuning.load(Ordering::Relaxed) => None,
                    SlotKind::Fallback | SlotKind::Failed => {
                        bump(local.counters.fallbacks.get(i));
                        Some(Choice::FALLBACK)
                    }
                    // First use of a cached tactic of an op that validates.
                    SlotKind::Validate => None,
                }
            })
            .ok()
            .flatten()
    }

    /// Puts this tuner's current view first in the thread's list.
    #[cold]
    fn local_slow(&self, locals: &mut Vec<Local>, generation: u64) {
        let old = match locals.iter().position(|l| l.uid == self.uid) {
            Some(i) => {
                let l = locals.remove(i);
                if l.generation == generation {
                    locals.insert(0, l);
                    return;
                }
                Some(l.counters)
            }
            None => None,
        };
        if locals.len() >= LOCAL_SLOTS {
            locals.pop();
        }
        locals.insert(0, self.fresh_local(old));
    }

    /// This thread's view of the current snapshot (slow path: after a publish).
    fn fresh_local(&self, counters: Option<Arc<Counters>>) -> Local {
        let mut inner = self.lock();
        let generation = self.generation.load(Ordering::Acquire);
        let n = inner.ops.len();
        let counters = match counters {
            Some(c) if c.hits.len() >= n => c,
            _ => {
                let c = Arc::new(Counters::new(n.max(4)));
                inner.counters.push(Arc::clone(&c));
                c
            }
        };
        Local { uid: self.uid, generation, snap: Arc::clone(&inner.snapshot), counters }
    }

    /// Publishes a new snapshot with `slots` added; threads pick it up on
    /// their next lookup.
    pub(super) fn publish(&self, inner: &mut Inner, slots: impl IntoIterator<Item = (u64, Slot)>) {
        let mut map = (*inner.snapshot).clone();
        map.extend(slots);
        inner.snapshot = Arc::new(map);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Forgets every registered op and publishes an empty snapshot, so each
    /// op registers again (and sees new entries or a coordinator) on next use.
    /// Nothing to do while no op is registered.
    pub(super) fn unregister_ops(&self, inner: &mut Inner) {
        if !inner.op_slots.is_empty() {
            inner.op_slots.clear();
            inner.snapshot = Arc::new(SlotMap::default());
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }
}
