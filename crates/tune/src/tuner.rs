//! The tuner: `choose_one`, the published snapshot of decisions that the hot
//! path reads, the miss path (fallback or measure), and statistics.
//!
//! Hot path (a hit outside tuning): compute the bucket key on the stack, look
//! it up in this thread's copy of the current immutable snapshot, bump a
//! counter only this thread writes. No allocation, no logging, no lock and no
//! shared cache line written. A thread re-reads the snapshot (under the
//! tuner's mutex) only after a publish bumped the generation counter, which
//! happens when entries are loaded or tuned.
//!
//! This module must never do I/O: loading and saving go through
//! [`Session`](super::Session).

use super::decide::{decide, DEFAULT_TIE_TOLERANCE};
use super::key::BucketKey;
use super::measure::{measure_all, CpuTimer, Sampling, Timer};
use super::op::Op;
use super::runner::TuneInputs;
use super::strategy::{BucketCtx, Coordinator, CoordinatorStats, Resolved, Strategy};
use ranktune_cache::{CacheData, Candidate, Entry, EntryKey, Identity, Section, Stats};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where a [`Choice`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A stored decision (loaded or tuned earlier).
    Cache,
    /// Measured by this call.
    Tuned,
    /// The fallback: no decision stored (or every candidate failed).
    Fallback,
}

/// The answer of `choose_one`: runner and tactic by canonical index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Index into the op's runners.
    pub runner: u32,
    /// Index into that runner's tactics.
    pub tactic: u32,
    /// Where it came from.
    pub source: Source,
}

impl Choice {
    /// Runner 0, tactic 0.
    pub const FALLBACK: Choice = Choice { runner: 0, tactic: 0, source: Source::Fallback };
}

/// Why a stored entry was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StaleReason {
    /// Measured by another ranktune version.
    LibVersion {
        /// Version that measured it.
        stored: String,
        /// This version.
        current: String,
    },
    /// Measured on another device / CPU identity.
    Device {
        /// The stored identity, described.
        stored: String,
        /// This identity, described.
        current: String,
    },
    /// The runner's parameters changed.
    Fingerprint {
        /// Runner name.
        runner: String,
    },
    /// The candidate set (runners, fingerprints, tactics) changed.
    Checksum,
    /// The entry names a runner or tactic the op no longer has, or a bucket
    /// that does not fit.
    Unknown(String),
}

impl fmt::Display for StaleReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StaleReason::LibVersion { stored, current } => {
                write!(f, "measured by ranktune {stored}, this is {current}")
            }
            StaleReason::Device { stored, current } => {
                write!(f, "measured on {stored}, this is {current}")
            }
            StaleReason::Fingerprint { runner } => {
                write!(f, "runner {runner:?} has other parameters now (fingerprint changed)")
            }
            StaleReason::Checksum => f.write_str("the candidate set changed (checksum differs)"),
            StaleReason::Unknown(s) => f.write_str(s),
        }
    }
}

/// One tuned bucket, for reports.
#[derive(Clone, Debug)]
pub struct TuneRecord {
    /// Op name.
    pub op: String,
    /// The bucket.
    pub bucket: Vec<Vec<u64>>,
    /// Chosen runner name (the fallback's when all failed).
    pub runner: String,
    /// Chosen tactic.
    pub tactic: serde_json::Value,
    /// Chosen candidate's median, µs (`None` when all failed).
    pub best_us: Option<f64>,
    /// The fallback's median, µs, when it was measured.
    pub fallback_us: Option<f64>,
    /// Candidates measured (including failures).
    pub measured: usize,
    /// Candidates that failed, with their messages.
    pub failures: Vec<(String, serde_json::Value, String)>,
    /// Time spent measuring this bucket.
    pub seconds: f64,
    /// The strategy the op was tuned with.
    pub strategy: Strategy,
    /// Where the entry went: `Shared` when tuned together with the other
    /// ranks, this rank's section otherwise.
    pub section: Section,
    /// Candidates this rank measured itself (fewer than `measured` under the
    /// broadcast and parallel strategies).
    pub measured_here: usize,
    /// Why a collective strategy fell back to independent tuning for this
    /// bucket (a rank did not arrive, ranks disagreed, …).
    pub fallback: Option<String>,
}

/// Per-op statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpStats {
    /// Lookups answered from a stored decision.
    pub hits: u64,
    /// Buckets asked for that had no stored decision.
    pub misses: u64,
    /// Calls answered with the fallback.
    pub fallbacks: u64,
    /// Buckets measured.
    pub tuned: u64,
    /// Candidates that failed while measuring.
    pub failed_tactics: u64,
    /// Time spent measuring.
    pub tuning_seconds: f64,
}

/// Statistics of a tuner: totals and per op.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TunerStats {
    /// Sum over ops.
    pub total: OpStats,
    /// By op name.
    pub per_op: BTreeMap<String, OpStats>,
}

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
    /// Near-tie tolerance (see [`decide`]).
    pub tie_tolerance: f64,
    /// How ranks share tuning, for ops whose config names none. Collective
    /// strategies need a [`Coordinator`] ([`Tuner::set_coordinator`]);
    /// without one they tune independently.
    pub strategy: Strategy,
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
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotKind {
    Hit,
    /// Untuned: fallback until tuning mode measures it.
    Fallback,
    /// Tuned, but every candidate failed.
    Failed,
}

#[derive(Clone, Copy)]
struct Slot {
    op_id: u64,
    runner: u32,
    tactic: u32,
    op_slot: u32,
    kind: SlotKind,
    /// A hit loaded from the cache for an op with a collective strategy: in
    /// tuning mode the ranks must agree on it once before it is used.
    confirm: bool,
    key: BucketKey,
}

type SlotMap = ranktune_core::hash::FastMap<u64, Slot>;

/// Per-thread counters: written by one thread only, read by `stats`.
struct Counters {
    hits: Vec<AtomicU64>,
    fallbacks: Vec<AtomicU64>,
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

struct LoadedEntry {
    section: Section,
    key: EntryKey,
    entry: Entry,
    env_problem: Option<StaleReason>,
}

struct OpState {
    name: String,
    stats: OpStats,
}

struct Inner {
    snapshot: Arc<SlotMap>,
    op_slots: HashMap<u64, u32>,
    ops: Vec<OpState>,
    counters: Vec<Arc<Counters>>,
    loaded: HashMap<String, Vec<LoadedEntry>>,
    stale: Vec<(EntryKey, StaleReason)>,
    pending: CacheData,
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

fn describe(id: &Identity) -> String {
    id.describe()
}

impl Tuner {
    /// A tuner with no decisions, not in tuning mode.
    pub fn new(opts: TunerOptions) -> Self {
        Tuner {
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
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
        if !inner.op_slots.is_empty() {
            inner.op_slots.clear();
            inner.snapshot = Arc::new(SlotMap::default());
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The coordinator's counters (buckets shared, agreed hits, fallbacks)
    /// and its permanent failure, if any; `None` without a coordinator.
    pub fn coordinator_stats(&self) -> Option<(CoordinatorStats, Option<String>)> {
        let inner = self.lock();
        inner.coordinator.as_ref().map(|c| (c.stats().clone(), c.broken().map(str::to_string)))
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

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while tuning must not make the tuner unusable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
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

    #[inline]
    fn lookup(&self, op_id: u64, key: &BucketKey, h: u64) -> Option<Choice> {
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
                        Some(Choice { runner: slot.runner, tactic: slot.tactic, source: Source::Cache })
                    }
                    SlotKind::Fallback if self.tuning.load(Ordering::Relaxed) => None,
                    SlotKind::Fallback | SlotKind::Failed => {
                        bump(local.counters.fallbacks.get(i));
                        Some(Choice::FALLBACK)
                    }
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

    fn publish(&self, inner: &mut Inner, slots: impl IntoIterator<Item = (u64, Slot)>) {
        let mut map = (*inner.snapshot).clone();
        map.extend(slots);
        inner.snapshot = Arc::new(map);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    #[cold]
    fn unkeyable<I: TuneInputs>(&self, op: &Op<I>) -> Choice {
        let mut inner = self.lock();
        let slot = self.register(&mut inner, op) as usize;
        let st = &mut inner.ops[slot].stats;
        st.fallbacks += 1;
        if st.fallbacks == 1 {
            tracing::warn!(
                op = op.name(),
                "input shapes do not fit the op's tuning config (or exceed {} inputs / {} dims); using the fallback",
                super::key::MAX_INPUTS,
                super::key::MAX_DIMS
            );
        }
        Choice::FALLBACK
    }

    #[cold]
    fn miss<I: TuneInputs>(&self, op: &Op<I>, key: &BucketKey, h: u64, tune: bool) -> Choice {
        let mut inner = self.lock();
        let op_slot = self.register(&mut inner, op);
        let existing =
            inner.snapshot.get(&h).copied().filter(|s| s.op_id == op.id() && s.key == *key);
        let stats = &mut inner.ops[op_slot as usize].stats;
        match existing {
            Some(s) if s.kind == SlotKind::Hit && tune && s.confirm => {
                let hit = Some((s.runner, s.tactic));
                return self.tune_bucket(&mut inner, op, key, h, op_slot, hit);
            }
            Some(s) if s.kind == SlotKind::Hit => {
                stats.hits += 1;
                return Choice { runner: s.runner, tactic: s.tactic, source: Source::Cache };
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
        let slot = Slot {
            op_id: op.id(),
            key: *key,
            runner: 0,
            tactic: 0,
            op_slot,
            kind: SlotKind::Fallback,
            confirm: false,
        };
        self.publish(&mut inner, [(h, slot)]);
        Choice::FALLBACK
    }

    /// Registers an op (once): validates the loaded entries for it.
    fn register<I: TuneInputs>(&self, inner: &mut Inner, op: &Op<I>) -> u32 {
        if let Some(&s) = inner.op_slots.get(&op.id()) {
            return s;
        }
        let op_slot = inner.ops.len() as u32;
        let collective = self.strategy_for(inner, op).is_collective();
        inner.op_slots.insert(op.id(), op_slot);
        inner.ops.push(OpState { name: op.name().to_string(), stats: OpStats::default() });
        let loaded = inner.loaded.remove(op.name()).unwrap_or_default();
        // Rank section wins over shared (shared wins for ops tuned together,
        // whose entries live there); newer wins over older.
        let mut best: HashMap<u64, (Slot, (bool, u64))> = HashMap::new();
        let mut stale = Vec::new();
        for le in &loaded {
            match validate(op, le) {
                Ok((key, runner, tactic)) => {
                    let h = key.hash_with(op.id());
                    let preferred = (le.section == Section::Shared) == collective;
                    let prio = (preferred, le.entry.created_unix);
                    let slot = Slot {
                        op_id: op.id(),
                        key,
                        runner,
                        tactic,
                        op_slot,
                        kind: SlotKind::Hit,
                        confirm: collective,
                    };
                    match best.get(&h) {
                        Some((_, p)) if *p > prio => {}
                        _ => {
                            best.insert(h, (slot, prio));
                        }
                    }
                }
                Err(reason) => stale.push((le.key.clone(), reason)),
            }
        }
        if !stale.is_empty() {
            tracing::warn!(
                op = op.name(),
                "{} stored entries ignored as stale (first: {}); they will be re-tuned",
                stale.len(),
                stale[0].1
            );
        }
        inner.stale.extend(stale);
        inner.loaded.insert(op.name().to_string(), loaded);
        let slots: Vec<(u64, Slot)> = best.into_iter().map(|(h, (s, _))| (h, s)).collect();
        self.publish(inner, slots);
        op_slot
    }

    fn tune_bucket<I: TuneInputs>(
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
        let mut cands: Vec<(usize, usize)> = Vec::new();
        for (r, runner) in op.runners().iter().enumerate() {
            for t in 0..op.tactics(r).len() {
                let ok =
                    catch_unwind(AssertUnwindSafe(|| runner.valid(t, &shapes))).unwrap_or(false);
                if ok {
                    cands.push((r, t));
                }
            }
        }
        let mut io: Option<I> = None;
        let mut first_error: Option<String> = None;
        let sampling = self.opts.sampling;
        let Inner { timer, coordinator, .. } = inner;
        // Measures the candidates at `positions` (into `cands`) on this rank.
        let mut measure = |positions: &[usize]| -> Vec<Result<Stats, String>> {
            measure_all(sampling, timer.as_mut(), positions.len(), &mut |j, reps| {
                let Some(&(r, t)) = positions.get(j).and_then(|&p| cands.get(p)) else {
                    return Err("no such candidate".to_string());
                };
                let _m = tracing::info_span!(
                    "measure",
                    runner = op.runner_names()[r].as_str(),
                    tactic = t
                )
                .entered();
                if io.is_none() {
                    match I::synthetic(&shapes) {
                        Ok(v) => io = Some(v),
                        Err(e) => {
                            let msg = format!("cannot build synthetic inputs: {e}");
                            first_error.get_or_insert_with(|| msg.clone());
                            return Err(msg);
                        }
                    }
                }
                let Some(inputs) = io.as_mut() else {
                    return Err("no inputs".to_string());
                };
                for _ in 0..reps {
                    let res = catch_unwind(AssertUnwindSafe(|| op.runners()[r].run(t, inputs)));
                    let err = match res {
                        Ok(Ok(())) => continue,
                        Ok(Err(e)) => e.0,
                        Err(p) => format!("panicked: {}", panic_message(&*p)),
                    };
                    // The inputs may be half-written: rebuild them for the next one.
                    io = None;
                    return Err(err);
                }
                Ok(())
            })
        };
        let (results, winner, section, created_unix, measured_here, fallback) = match coordinator
            .as_mut()
            .filter(|_| strategy.is_collective())
        {
            Some(coord) => {
                let ids: Vec<(u32, u32)> =
                    cands.iter().map(|&(r, t)| (r as u32, t as u32)).collect();
                let ctx = BucketCtx {
                    op: op.name(),
                    bucket: &shapes,
                    checksum: op.checksum(),
                    candidates: &ids,
                    local_hit,
                    tie_tolerance: self.opts.tie_tolerance,
                };
                let res = coord.resolve(strategy, &ctx, &mut measure);
                if let (Resolved::Hit, Some((runner, tactic))) = (res.kind, local_hit) {
                    // Every rank has the same cached choice: confirmed.
                    inner.ops[op_slot as usize].stats.hits += 1;
                    let slot = Slot {
                        op_id: op.id(),
                        key: *key,
                        runner,
                        tactic,
                        op_slot,
                        kind: SlotKind::Hit,
                        confirm: false,
                    };
                    self.publish(inner, [(h, slot)]);
                    return Choice { runner, tactic, source: Source::Cache };
                }
                let section = res.section(coord.rank()).unwrap_or(self.opts.section);
                let fallback = res.fallback.map(|f| f.reason);
                (res.results, res.winner, section, res.created_unix, res.measured_here, fallback)
            }
            None => {
                let all: Vec<usize> = (0..cands.len()).collect();
                let results = measure(&all);
                let stats: Vec<Option<&Stats>> = results.iter().map(|r| r.as_ref().ok()).collect();
                let winner = decide(&stats, self.opts.tie_tolerance);
                (
                    results,
                    winner,
                    self.opts.section,
                    ranktune_core::clock::unix_now(),
                    cands.len(),
                    None,
                )
            }
        };
        let stats: Vec<Option<&Stats>> = results.iter().map(|r| r.as_ref().ok()).collect();
        let candidates: Vec<Candidate> = cands
            .iter()
            .zip(&results)
            .map(|(&(r, t), res)| Candidate {
                runner: op.runner_names()[r].clone(),
                runner_index: r as u32,
                tactic: op.tactics(r)[t].clone(),
                stats: res.as_ref().ok().cloned(),
                error: res.as_ref().err().cloned(),
            })
            .collect();
        let failures: Vec<(String, serde_json::Value, String)> = candidates
            .iter()
            .filter_map(|c| c.error.clone().map(|e| (c.runner.clone(), c.tactic.clone(), e)))
            .collect();
        let fallback_us = cands
            .iter()
            .position(|&rt| rt == (0, 0))
            .and_then(|i| results[i].as_ref().ok())
            .map(|s| s.median_us);
        let seconds = t0.elapsed().as_secs_f64();
        let (choice, slot_kind) = match winner.filter(|&w| w < cands.len()) {
            Some(w) => {
                let (r, t) = cands[w];
                let time_us = stats[w].map_or(0.0, |s| s.median_us);
                let ekey = EntryKey {
                    op: op.name().to_string(),
                    runner: op.runner_names()[r].clone(),
                    fingerprint: op.fingerprint(r).to_string(),
                    bucket: shapes.clone(),
                };
                let entry = Entry {
                    runner_index: r as u32,
                    tactic: op.tactics(r)[t].clone(),
                    time_us,
                    candidates,
                    checksum: op.checksum().to_string(),
                    env: self.opts.env_digest.clone(),
                    created_unix,
                };
                inner.pending.insert(section, ekey, entry);
                (
                    Choice { runner: r as u32, tactic: t as u32, source: Source::Tuned },
                    SlotKind::Hit,
                )
            }
            None => {
                tracing::warn!(
                    op = op.name(),
                    bucket = ?shapes,
                    "every candidate failed ({}); using the fallback",
                    failures.first().map_or_else(
                        || first_error.clone().unwrap_or_else(|| "no valid candidates".into()),
                        |f| f.2.clone()
                    )
                );
                (Choice::FALLBACK, SlotKind::Failed)
            }
        };
        let st = &mut inner.ops[op_slot as usize].stats;
        st.tuned += 1;
        st.failed_tactics += failures.len() as u64;
        st.tuning_seconds += seconds;
        inner.records.push(TuneRecord {
            op: op.name().to_string(),
            bucket: shapes,
            runner: op.runner_names()[choice.runner as usize].clone(),
            tactic: op.tactics(choice.runner as usize)[choice.tactic as usize].clone(),
            best_us: winner.and_then(|w| stats.get(w).copied().flatten()).map(|s| s.median_us),
            fallback_us,
            measured: cands.len(),
            failures,
            seconds,
            strategy,
            section,
            measured_here,
            fallback,
        });
        let slot = Slot {
            op_id: op.id(),
            key: *key,
            runner: choice.runner,
            tactic: choice.tactic,
            op_slot,
            kind: slot_kind,
            confirm: false,
        };
        self.publish(inner, [(h, slot)]);
        choice
    }

    /// Takes in a loaded cache: entries of this tuner's section and the
    /// shared one. Entries are checked against an op when it is first used.
    /// Returns the number of entries taken in.
    pub fn load(&self, data: &CacheData) -> usize {
        let mut inner = self.lock();
        let current = &self.opts.identity;
        let mut n = 0;
        for (section, key, entry) in data.iter() {
            if section != Section::Shared && section != self.opts.section {
                continue;
            }
            let env_problem = if entry.env == self.opts.env_digest {
                None
            } else {
                Some(match data.metadata.environments.get(&entry.env) {
                    Some(id) if id.lib_version != current.lib_version => StaleReason::LibVersion {
                        stored: id.lib_version.clone(),
                        current: current.lib_version.clone(),
                    },
                    Some(id) => {
                        StaleReason::Device { stored: describe(id), current: describe(current) }
                    }
                    None => StaleReason::Device {
                        stored: format!("an unknown environment ({})", entry.env),
                        current: describe(current),
                    },
                })
            };
            inner.loaded.entry(key.op.clone()).or_default().push(LoadedEntry {
                section,
                key: key.clone(),
                entry: entry.clone(),
                env_problem,
            });
            n += 1;
        }
        // Ops already registered must see the new entries: re-register them
        // on next use.
        if !inner.op_slots.is_empty() {
            inner.op_slots.clear();
            inner.snapshot = Arc::new(SlotMap::default());
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        n
    }

    /// The loaded (valid or not yet checked) entry for `op`'s bucket, if any:
    /// for reports on cache hits.
    pub fn loaded_entry(&self, op: &str, runner: &str, bucket: &[Vec<u64>]) -> Option<Entry> {
        let inner = self.lock();
        let list = inner.loaded.get(op)?;
        list.iter()
            .filter(|le| {
                le.env_problem.is_none() && le.key.runner == runner && le.key.bucket == bucket
            })
            .max_by_key(|le| (le.section != Section::Shared, le.entry.created_unix))
            .map(|le| le.entry.clone())
    }

    /// Entries found stale so far, with the reason.
    pub fn stale_entries(&self) -> Vec<(EntryKey, StaleReason)> {
        self.lock().stale.clone()
    }

    /// Takes the decisions tuned since the last call, ready for a merging
    /// save (with this tuner's identity in `metadata.environments`).
    pub fn take_pending(&self) -> CacheData {
        let mut inner = self.lock();
        let mut data = std::mem::take(&mut inner.pending);
        if !data.is_empty() {
            data.metadata.lib_version = self.opts.identity.lib_version.clone();
            data.metadata.updated_unix = ranktune_core::clock::unix_now();
            data.metadata.created_unix = data.metadata.updated_unix;
            data.metadata
                .environments
                .insert(self.opts.env_digest.clone(), self.opts.identity.clone());
        }
        data
    }

    /// Puts decisions back after a failed save, so a later save retries them.
    pub fn restore_pending(&self, data: CacheData) {
        let mut inner = self.lock();
        for (section, key, entry) in data.iter() {
            if inner.pending.get(section, key).is_none() {
                inner.pending.insert(section, key.clone(), entry.clone());
            }
        }
    }

    /// Buckets tuned so far, in order.
    pub fn records(&self) -> Vec<TuneRecord> {
        self.lock().records.clone()
    }

    /// Statistics so far (hits of all threads included).
    pub fn stats(&self) -> TunerStats {
        let inner = self.lock();
        let mut out = TunerStats::default();
        for (i, op) in inner.ops.iter().enumerate() {
            let mut s = op.stats.clone();
            for c in &inner.counters {
                s.hits += c.hits.get(i).map_or(0, |a| a.load(Ordering::Relaxed));
                s.fallbacks += c.fallbacks.get(i).map_or(0, |a| a.load(Ordering::Relaxed));
            }
            let t = &mut out.total;
            t.hits += s.hits;
            t.misses += s.misses;
            t.fallbacks += s.fallbacks;
            t.tuned += s.tuned;
            t.failed_tactics += s.failed_tactics;
            t.tuning_seconds += s.tuning_seconds;
            let e = out.per_op.entry(op.name.clone()).or_default();
            e.hits += s.hits;
            e.misses += s.misses;
            e.fallbacks += s.fallbacks;
            e.tuned += s.tuned;
            e.failed_tactics += s.failed_tactics;
            e.tuning_seconds += s.tuning_seconds;
        }
        out
    }

    /// Total time spent measuring.
    pub fn tuning_time(&self) -> Duration {
        Duration::from_secs_f64(self.stats().total.tuning_seconds)
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}

/// Checks a loaded entry against the op: `(key, runner, tactic)` or why stale.
fn validate<I: TuneInputs>(
    op: &Op<I>,
    le: &LoadedEntry,
) -> Result<(BucketKey, u32, u32), StaleReason> {
    if let Some(p) = &le.env_problem {
        return Err(p.clone());
    }
    let Some(r) = op.runner_names().iter().position(|n| *n == le.key.runner) else {
        return Err(StaleReason::Unknown(format!("the op has no runner {:?} now", le.key.runner)));
    };
    if op.fingerprint(r) != le.key.fingerprint {
        return Err(StaleReason::Fingerprint { runner: le.key.runner.clone() });
    }
    if le.entry.checksum != op.checksum() {
        return Err(StaleReason::Checksum);
    }
    let Some(t) = op.tactics(r).iter().position(|t| *t == le.entry.tactic) else {
        return Err(StaleReason::Unknown(format!(
            "runner {:?} has no tactic {} now",
            le.key.runner, le.entry.tactic
        )));
    };
    let Some(key) = BucketKey::from_nested(&le.key.bucket) else {
        return Err(StaleReason::Unknown("the bucket exceeds the key limits".into()));
    };
    Ok((key, r as u32, t as u32))
}
