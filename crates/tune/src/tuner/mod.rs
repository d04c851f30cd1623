//! The tuner: `choose_one`, its options and its public API.
//!
//! How a call is answered:
//!
//! - [`hot`]: the hit path (a hit outside tuning). Compute the bucket key on
//!   the stack, look it up in this thread's copy of the current immutable
//!   snapshot, bump a counter only this thread writes. No allocation, no
//!   logging, no lock and no shared cache line written. A thread re-reads the
//!   snapshot (under the tuner's mutex) only after a publish bumped the
//!   generation counter, which happens when entries are loaded or tuned.
//! - [`miss`]: everything else, under the mutex: register the op
//!   ([`load`] checks its stored entries, [`stale`] says why one is unusable),
//!   then answer from the snapshot, fall back, or tune the bucket.
//! - [`tune`]: tuning one bucket — [`candidates`], measuring on synthetic
//!   inputs ([`inputs`]), deciding alone or with the other ranks
//!   ([`resolve`]), recording the result ([`record`]). A runner that panics
//!   fails only its candidate ([`isolate`]); with isolation on, candidates
//!   run in a worker process (see [`crate::isolation`]), so one that
//!   crashes, hangs or runs out of memory fails alone too.
//! - [`blocked`]: the blocklist — known-bad tactics skipped, hard failures
//!   remembered; [`validate`]: the check of a cached tactic on its first
//!   use.
//! - [`stats`]: the statistics.
//!
//! This module must never do I/O: loading and saving go through
//! [`Session`](crate::Session).

mod blocked;
mod candidates;
mod hot;
mod inputs;
mod isolate;
mod load;
mod miss;
mod record;
mod resolve;
mod stale;
mod stats;
mod tune;
mod validate;

pub use blocked::{retry_failed_from_env, SkippedTactic, RETRY_FAILED_ENV};
pub use miss::{miss_action, Found, MissAction};
pub use record::TuneRecord;
pub use stale::StaleReason;
pub use stats::{OpStats, TunerStats};

use crate::choice::Choice;
use crate::decide::DEFAULT_TIE_TOLERANCE;
use crate::isolation::Isolation;
use crate::key::BucketKey;
use crate::measure::{CpuTimer, Sampling, Timer};
use crate::op::Op;
use crate::runner::TuneInputs;
use crate::strategy::{Coordinator, CoordinatorStats, Strategy};
use hot::{Counters, SlotMap};
use load::LoadedEntry;
use ranktune_cache::{Blocklist, CacheData, EntryKey, Identity, Section};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Settings of a [`Tuner`].
#[derive(Clone, Debug)]
pub struct TunerOptions {
    /// Section tuned entries go to (`Rank(rank)` for independent tuning);
    /// loading uses this section and `Shared`.
    pub section: Section,
    /// The identity measurements are made under.
    pub identity: Identity,
    /// Its digest (entries carry it).
    pub env_digest: String,
    /// How candidates are sampled.
    pub sampling: Sampling,
    /// Near-tie tolerance (see [`decide`](crate::decide())).
    pub tie_tolerance: f64,
    /// How ranks share tuning, for ops whose config names none. Collective
    /// strategies need a [`Coordinator`] ([`Tuner::set_coordinator`]);
    /// without one they tune independently.
    pub strategy: Strategy,
    /// Measure known-bad tactics again (the cache's blocklist) instead of
    /// skipping them; one that now works leaves the blocklist. The CLI's
    /// `--retry-failed`, Python's `retry_failed=True`, and
    /// `RANKTUNE_RETRY_FAILED` ([`retry_failed_from_env`]).
    pub retry_failed: bool,
    /// This process's rank, recorded with the failures it finds.
    pub rank: Option<u32>,
    /// How candidates are measured, for ops whose config names nothing: in
    /// this process ([`Isolation::Off`], the default) or in a worker process
    /// ([`Isolation::Fork`], [`Isolation::Spawn`]).
    pub isolation: Isolation,
}

impl TunerOptions {
    /// Options for `section` under `identity` (digest `env_digest`), with the
    /// adaptive sampling and the default tie tolerance.
    pub fn new(section: Section, identity: Identity, env_digest: impl Into<String>) -> Self {
        TunerOptions {
            section,
            identity,
            env_digest: env_digest.into(),
            sampling: Sampling::ADAPTIVE,
            tie_tolerance: DEFAULT_TIE_TOLERANCE,
            strategy: Strategy::Independent,
            retry_failed: false,
            rank: section.rank(),
            isolation: Isolation::Off,
        }
    }
}

/// A registered op's name and the statistics kept under the lock.
struct OpState {
    name: String,
    stats: OpStats,
}

/// Everything behind the tuner's mutex.
struct Inner {
    /// The published snapshot (threads keep a copy of the `Arc`).
    snapshot: Arc<SlotMap>,
    /// Registered ops: op id → op slot (index into `ops`).
    op_slots: HashMap<u64, u32>,
    ops: Vec<OpState>,
    /// Every thread's hit/fallback counters.
    counters: Vec<Arc<Counters>>,
    /// Loaded entries by op name.
    loaded: HashMap<String, Vec<LoadedEntry>>,
    stale: Vec<(EntryKey, StaleReason)>,
    /// Tuned entries not saved yet (and blocklist records and clears).
    pending: CacheData,
    /// The blocklist loaded (see [`blocked`]): what later tunes skip.
    blocklist: Blocklist,
    records: Vec<TuneRecord>,
    timer: Box<dyn Timer + Send>,
    coordinator: Option<Coordinator>,
}

/// The tuner. Share it by reference (or `Arc`) between threads.
pub struct Tuner {
    uid: u64,
    opts: TunerOptions,
    tuning: AtomicBool,
    generation: AtomicU64,
    inner: Mutex<Inner>,
}

impl fmt::Debug for Tuner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tuner")
            .field("section", &self.opts.section)
            .field("tuning", &self.is_tuning())
            .finish()
    }
}

impl Tuner {
    /// A tuner with no decisions, not in tuning mode.
    pub fn new(opts: TunerOptions) -> Self {
        Tuner {
            uid: hot::next_uid(),
            tuning: AtomicBool::new(false),
            generation: AtomicU64::new(1),
            inner: Mutex::new(Inner {
                snapshot: Arc::new(SlotMap::default()),
                op_slots: HashMap::new(),
                ops: Vec::new(),
                counters: Vec::new(),
                loaded: HashMap::new(),
                stale: Vec::new(),
                pending: CacheData::default(),
                blocklist: Blocklist::default(),
                records: Vec::new(),
                timer: Box::new(CpuTimer::default()),
                coordinator: None,
            }),
            opts,
        }
    }

    /// The options.
    pub fn options(&self) -> &TunerOptions {
        &self.opts
    }

    /// Turns tuning mode on or off. In tuning mode a miss measures.
    pub fn set_tuning(&self, on: bool) {
        self.tuning.store(on, Ordering::Relaxed);
    }

    /// Whether tuning mode is on.
    pub fn is_tuning(&self) -> bool {
        self.tuning.load(Ordering::Relaxed)
    }

    /// Replaces the timer (e.g. a CUDA-event timer, or a virtual clock in tests).
    pub fn set_timer(&self, timer: Box<dyn Timer + Send>) {
        self.lock().timer = timer;
    }

    /// Lets ops with a collective strategy (broadcast, merge, parallel) tune
    /// together with the other ranks through `coordinator`. Give every rank
    /// one, before its first `choose_one`. In tuning mode every rank must then
    /// ask for the same buckets of those ops in the same order (the first time
    /// in a session, cache hits included: the ranks agree on them).
    pub fn set_coordinator(&self, coordinator: Coordinator) {
        let mut inner = self.lock();
        inner.coordinator = Some(coordinator);
        // Ops already registered: register them again, so their cached hits
        // are marked for agreement.
        self.unregister_ops(&mut inner);
    }

    /// The coordinator's counters (buckets shared, agreed hits, fallbacks)
    /// and its permanent failure, if any; `None` without a coordinator.
    pub fn coordinator_stats(&self) -> Option<(CoordinatorStats, Option<String>)> {
        let inner = self.lock();
        inner.coordinator.as_ref().map(|c| (c.stats().clone(), c.broken().map(str::to_string)))
    }

    /// Picks (runner, tactic) for this call.
    ///
    /// A stored decision for the call's bucket is returned as is (the hot
    /// path: no allocation, no lock, no logging). On a miss outside tuning
    /// mode the fallback is returned and a warning is logged once per
    /// (op, bucket); in tuning mode every valid candidate is measured on
    /// synthetic inputs of the bucket's shape and the best is stored.
    #[inline]
    pub fn choose_one<I: TuneInputs>(&self, op: &Op<I>, inputs: &I) -> Choice {
        let mut key = BucketKey::default();
        if op.config().key_into(inputs, &mut key) {
            self.choose_for_key(op, &key)
        } else {
            self.unkeyable(op)
        }
    }

    /// Like [`choose_one`](Self::choose_one) for an already bucketed key.
    #[inline]
    pub fn choose_for_key<I: TuneInputs>(&self, op: &Op<I>, key: &BucketKey) -> Choice {
        let h = key.hash_with(op.id());
        if let Some(c) = self.lookup(op.id(), key, h) {
            return c;
        }
        self.miss(op, key, h, self.is_tuning())
    }

    /// Looks the bucket up and measures it on a miss, whatever the mode.
    ///
    /// Under a collective strategy every rank must call this for the same
    /// buckets in the same order: hits are agreed on too (see
    /// [`set_coordinator`](Self::set_coordinator)).
    pub fn tune_key<I: TuneInputs>(&self, op: &Op<I>, key: &BucketKey) -> Choice {
        let h = key.hash_with(op.id());
        // The slow path: it sees whether a hit still needs the ranks' agreement.
        self.miss(op, key, h, true)
    }

    /// The strategy `op` is tuned with: its config's, else the tuner's
    /// default; independent when there is no coordinator to tune together.
    fn strategy_for<I: TuneInputs>(&self, inner: &Inner, op: &Op<I>) -> Strategy {
        let s = op.config().strategy.unwrap_or(self.opts.strategy);
        if s.is_collective() && inner.coordinator.is_none() {
            Strategy::Independent
        } else {
            s
        }
    }

    /// How `op`'s candidates are measured: its config's isolation, else the
    /// tuner's default.
    fn isolation_for<'a, I: TuneInputs>(&'a self, op: &'a Op<I>) -> &'a Isolation {
        op.config().isolation.as_ref().unwrap_or(&self.opts.isolation)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while tuning must not make the tuner unusable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}
