//! The coordinator: runs one bucket's tuning under a strategy, with the
//! agreement step first and a bounded, reported fallback on any failure.
//!
//! Owns the protocol between ranks (which collective calls, in which order,
//! with which messages). It never measures by itself (the tuner passes a
//! closure), never touches the cache and never decides how entries are
//! stored beyond saying which section they belong to.
//!
//! Protocol for one bucket under a collective strategy (every rank makes the
//! same calls in the same order; tags name the op and the bucket):
//!
//! 1. **Agree** — `all_gather "<op> <bucket> agree"` of (strategy, candidate
//!    set digest, this rank's cached choice or none). Every rank gets the
//!    same vector and draws the same conclusion:
//!    - different strategies or candidate sets → [`StrategyError::Disagree`]
//!      → every rank tunes the bucket independently;
//!    - every rank has a cached choice and they are all equal → a hit, no
//!      further calls;
//!    - otherwise (any miss, or hits that differ) → every rank takes part in
//!      tuning the bucket again. A rank's hit can never leave the others
//!      waiting, and ranks whose cached choices diverged are re-aligned.
//! 2. **Measure and exchange** — broadcast: rank 0 measures everything and
//!    broadcasts its results; merge: every rank measures everything, then
//!    all-gather; parallel: every rank measures its share, then all-gather.
//!    The share is [`parallel_share`] (round-robin) for an op's first bucket,
//!    then [`balanced_share`] with the costs seen in the op's previous shared
//!    bucket (identical on every rank, so every rank computes the same split),
//!    plus that bucket's winner on every rank: the adaptive sampler then has
//!    a fast leader on every rank and drops slow candidates after one sample,
//!    as it does when one rank measures everything (the duplicate timings are
//!    combined with the merge rule).
//! 3. **Decide** — every rank combines the same data with [`combine_ranks`]
//!    and runs [`decide`] (near-tie rule) on it: the same winner everywhere.
//!
//! Failures: any collective error (timeout naming the ranks that did not
//! arrive, divergence, undecodable data) makes this rank tune the bucket
//! **independently** (reusing what it already measured), store it in its own
//! section, and say so in the [`Resolution`]'s `fallback`. The collective
//! layer guarantees that every live rank sees the failure of the same call,
//! so every rank switches together; and since a rank that failed to arrive
//! once is most likely dead, the coordinator then stays independent for the
//! rest of its life instead of paying a full timeout per bucket.

use super::combine::combine_ranks;
use super::error::StrategyError;
use super::kind::{Strategy, DEFAULT_TIMEOUT};
use super::split::{balanced_share, parallel_share};
use crate::decide::decide;
use crate::runner::StableHasher;
use ranktune_cache::{Section, Stats};
use ranktune_collective::{Collective, CollectiveError, CollectiveExt};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;

/// One measured candidate: statistics or error text.
pub type Measured = Result<Stats, String>;

/// What the coordinator needs to know about one bucket.
#[derive(Clone, Debug)]
pub struct BucketCtx<'a> {
    /// The op's name.
    pub op: &'a str,
    /// The bucket (dims of every input after bucketing).
    pub bucket: &'a [Vec<u64>],
    /// The op's candidate-set checksum (runners, fingerprints, tactics).
    pub checksum: &'a str,
    /// The valid candidates for this bucket as (runner index, tactic index),
    /// in canonical order. Results refer to candidates by position here.
    pub candidates: &'a [(u32, u32)],
    /// This rank's cached choice for the bucket (runner, tactic), if any.
    pub local_hit: Option<(u32, u32)>,
    /// Near-tie tolerance for [`decide`].
    pub tie_tolerance: f64,
}

/// How a bucket was resolved, and therefore where its entry belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// Use the cached choice: nothing was measured.
    Hit,
    /// Tuned together: results and winner are identical on every rank;
    /// store in [`Section::Shared`].
    Shared,
    /// Tuned by this rank alone (independent strategy, or a fallback); store
    /// in this rank's section.
    Local,
}

/// Why a bucket fell back to independent tuning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The message (names the op, bucket, strategy, the failed call and the ranks).
    pub reason: String,
    /// The ranks blamed (did not arrive, diverged, disagreed).
    pub ranks: Vec<u32>,
}

/// The outcome of [`Coordinator::resolve`] for one bucket.
#[derive(Clone, Debug)]
pub struct Resolution {
    /// Hit, shared or local.
    pub kind: Resolved,
    /// Per candidate (positions of [`BucketCtx::candidates`]): the combined
    /// result. Empty for a hit.
    pub results: Vec<Measured>,
    /// The winning position, `None` when every candidate failed (or a hit).
    pub winner: Option<usize>,
    /// Timestamp for the entry: rank 0's when shared (so every rank writes a
    /// byte-identical entry), this rank's otherwise.
    pub created_unix: u64,
    /// Candidates this rank measured itself.
    pub measured_here: usize,
    /// Set when a collective strategy was asked for but this bucket was
    /// handled independently, with the reason.
    pub fallback: Option<Fallback>,
}

impl Resolution {
    /// The section the entry belongs to (`None` for a hit: nothing to store).
    pub fn section(&self, rank: u32) -> Option<Section> {
        match self.kind {
            Resolved::Hit => None,
            Resolved::Shared => Some(Section::Shared),
            Resolved::Local => Some(Section::Rank(rank)),
        }
    }
}

/// Counters for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoordinatorStats {
    /// Buckets tuned together (shared).
    pub shared: u64,
    /// Buckets every rank had cached with the same choice.
    pub agreed_hits: u64,
    /// Buckets that fell back to independent tuning.
    pub fallbacks: u64,
    /// Buckets tuned independently because the strategy was independent.
    pub independent: u64,
}

/// Agreement message, one per rank.
#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    strategy: Strategy,
    candidates: String,
    hit: Option<(u32, u32)>,
}

/// Results message: what one rank measured.
#[derive(Debug, Serialize, Deserialize)]
struct Report {
    created_unix: u64,
    results: Vec<Item>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Item {
    index: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stats: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The bucket as tags and messages write it: the one label every output
/// uses (`16x512,16x512`; see [`ranktune_cache::bucket_label`]).
pub use ranktune_cache::bucket_label;

fn candidates_digest(ctx: &BucketCtx<'_>) -> String {
    let mut h = StableHasher::default();
    h.write_str(ctx.checksum);
    for (r, t) in ctx.candidates {
        h.write(&r.to_le_bytes());
        h.write(&t.to_le_bytes());
    }
    h.hex()
}

fn finite(s: &Stats) -> bool {
    [s.min_us, s.median_us, s.p90_us, s.spread].iter().all(|v| v.is_finite())
}

/// Runs tuning strategies for one rank over its [`Collective`].
///
/// Create one per process (with the process's one collective) and keep it
/// for the whole job; every rank must resolve the same buckets in the same
/// order for collective strategies.
pub struct Coordinator {
    coll: Box<dyn Collective>,
    timeout: Duration,
    broken: Option<String>,
    stats: CoordinatorStats,
    /// Per op: the measuring cost of each (runner, tactic) in the op's last
    /// shared bucket (identical on every rank), to balance the parallel split.
    costs: HashMap<String, HashMap<(u32, u32), f64>>,
    /// Per op: the winner of its last shared bucket.
    leaders: HashMap<String, (u32, u32)>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("collective", &self.coll.describe())
            .field("timeout", &self.timeout)
            .field("broken", &self.broken)
            .finish()
    }
}

impl Coordinator {
    /// A coordinator over `coll`, bounding every wait by [`DEFAULT_TIMEOUT`].
    pub fn new(coll: Box<dyn Collective>) -> Self {
        Coordinator {
            coll,
            timeout: DEFAULT_TIMEOUT,
            broken: None,
            stats: Default::default(),
            costs: HashMap::new(),
            leaders: HashMap::new(),
        }
    }

    /// Sets the bound on every wait (e.g. from
    /// [`timeout_from_env`](super::timeout_from_env)). It must cover one
    /// bucket's measuring on the slowest rank.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.coll.rank()
    }

    /// Ranks in the job.
    pub fn world_size(&self) -> u32 {
        self.coll.world_size()
    }

    /// The collective, described (for reports).
    pub fn describe(&self) -> String {
        self.coll.describe()
    }

    /// The wait bound.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The failure that switched this coordinator to independent tuning for
    /// good, if one did.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Counters so far.
    pub fn stats(&self) -> &CoordinatorStats {
        &self.stats
    }

    /// Resolves one bucket under `strategy` (see the module docs).
    ///
    /// `measure(positions)` measures the given candidate positions (into
    /// `ctx.candidates`) on this rank and returns their results in the same
    /// order. It is called at most once per position, and not at all for a
    /// hit. Never fails and never waits longer than the timeout per call: on
    /// any failure the bucket is tuned independently and the resolution says why.
    pub fn resolve(
        &mut self,
        strategy: Strategy,
        ctx: &BucketCtx<'_>,
        measure: &mut dyn FnMut(&[usize]) -> Vec<Measured>,
    ) -> Resolution {
        let mut local: Vec<Option<Measured>> = vec![None; ctx.candidates.len()];
        if !strategy.is_collective() {
            self.stats.independent += 1;
            return self.alone(ctx, &mut local, measure, None);
        }
        if let Some(why) = &self.broken {
            let fb = Fallback {
                reason: format!(
                    "{} {}: tuning independently, because {strategy} tuning stopped after an \
                     earlier failure: {why}",
                    ctx.op,
                    bucket_label(ctx.bucket)
                ),
                ranks: Vec::new(),
            };
            self.stats.fallbacks += 1;
            return self.alone(ctx, &mut local, measure, Some(fb));
        }
        match self.together(strategy, ctx, &mut local, measure) {
            Ok(r) => r,
            Err(e) => {
                let fb = Fallback {
                    reason: format!(
                        "{e}; tuning this bucket independently on rank {}",
                        self.rank()
                    ),
                    ranks: e.ranks(),
                };
                if e.is_collective_failure() {
                    tracing::warn!(
                        "{}; later buckets are tuned independently too (every rank saw this failure)",
                        fb.reason
                    );
                    self.broken = Some(e.to_string());
                } else {
                    tracing::warn!("{}", fb.reason);
                }
                self.stats.fallbacks += 1;
                self.alone(ctx, &mut local, measure, Some(fb))
            }
        }
    }

    /// Tunes (or keeps the hit) on this rank alone, reusing what it measured.
    fn alone(
        &mut self,
        ctx: &BucketCtx<'_>,
        local: &mut [Option<Measured>],
        measure: &mut dyn FnMut(&[usize]) -> Vec<Measured>,
        fallback: Option<Fallback>,
    ) -> Resolution {
        if ctx.local_hit.is_some() {
            return Resolution {
                kind: Resolved::Hit,
                results: Vec::new(),
                winner: None,
                created_unix: ranktune_core::clock::unix_now(),
                measured_here: 0,
                fallback,
            };
        }
        let todo: Vec<usize> = (0..local.len()).filter(|&i| local[i].is_none()).collect();
        let measured_here = local.len() - todo.len() + run_measure(measure, &todo, local);
        let results: Vec<Measured> = local
            .iter_mut()
            .map(|m| m.take().unwrap_or_else(|| Err("not measured".to_string())))
            .collect();
        let stats: Vec<Option<&Stats>> = results.iter().map(|r| r.as_ref().ok()).collect();
        let winner = decide(&stats, ctx.tie_tolerance);
        Resolution {
            kind: Resolved::Local,
            results,
            winner,
            created_unix: ranktune_core::clock::unix_now(),
            measured_here,
            fallback,
        }
    }

    fn collective_err(
        &self,
        strategy: Strategy,
        ctx: &BucketCtx<'_>,
        error: CollectiveError,
    ) -> StrategyError {
        StrategyError::Collective {
            op: ctx.op.to_string(),
            bucket: bucket_label(ctx.bucket),
            strategy,
            error: Box::new(error),
        }
    }

    /// Resolves one bucket together with the other ranks: agree, measure
    /// and exchange, decide (the module docs' steps 1–3).
    fn together(
        &mut self,
        strategy: Strategy,
        ctx: &BucketCtx<'_>,
        local: &mut [Option<Measured>],
        measure: &mut dyn FnMut(&[usize]) -> Vec<Measured>,
    ) -> Result<Resolution, StrategyError> {
        // 1. Agree.
        let hellos = self.agree(strategy, ctx)?;
        if let Some(hit) = self.agreed_hit(ctx, &hellos) {
            return Ok(hit);
        }
        // 2. Measure and exchange.
        let share = self.share(strategy, ctx);
        let measured_here = run_measure(measure, &share, local);
        let reports = self.exchange(strategy, ctx, report_of(&share, local))?;
        // 3. Combine and decide, on data identical on every rank.
        let results = combined(ctx, &reports)?;
        let stats: Vec<Option<&Stats>> = results.iter().map(|r| r.as_ref().ok()).collect();
        let winner = decide(&stats, ctx.tie_tolerance);
        self.stats.shared += 1;
        self.remember_costs(ctx, &results, winner);
        Ok(Resolution {
            kind: Resolved::Shared,
            winner,
            created_unix: reports[0].created_unix,
            results,
            measured_here,
            fallback: None,
        })
    }

    /// Step 1: every rank's strategy, candidate set and cached choice, checked
    /// to be the same strategy and candidate set everywhere.
    fn agree(
        &mut self,
        strategy: Strategy,
        ctx: &BucketCtx<'_>,
    ) -> Result<Vec<Hello>, StrategyError> {
        let world = self.world_size();
        let hello = Hello { strategy, candidates: candidates_digest(ctx), hit: ctx.local_hit };
        let tag = format!("{} {} agree", ctx.op, bucket_label(ctx.bucket));
        let hellos: Vec<Hello> = self
            .coll
            .all_gather_json(&tag, &hello, self.timeout)
            .map_err(|e| self.collective_err(strategy, ctx, e))?;
        let first = &hellos[0];
        let odd: Vec<u32> =
            (1..world).filter(|&r| hellos[r as usize].strategy != first.strategy).collect();
        if !odd.is_empty() {
            let all: Vec<String> = hellos
                .iter()
                .enumerate()
                .map(|(r, h)| format!("rank {r}: {}", h.strategy))
                .collect();
            return Err(disagree(
                ctx,
                format!(
                    "they use different strategies ({}); give every rank the same",
                    all.join(", ")
                ),
                odd,
            ));
        }
        let odd: Vec<u32> =
            (1..world).filter(|&r| hellos[r as usize].candidates != first.candidates).collect();
        if !odd.is_empty() {
            return Err(disagree(
                ctx,
                format!(
                    "rank(s) {odd:?} have another candidate set than rank 0 (different runners, \
                     tactics or valid tactics for this bucket); do all ranks run the same code?"
                ),
                odd,
            ));
        }
        Ok(hellos)
    }

    /// The hit every rank agrees on (all cached the same choice), or `None`
    /// when the bucket is tuned again on every rank (said when some had it).
    fn agreed_hit(&mut self, ctx: &BucketCtx<'_>, hellos: &[Hello]) -> Option<Resolution> {
        let first = &hellos[0];
        if first.hit.is_some() && hellos.iter().all(|h| h.hit == first.hit) {
            self.stats.agreed_hits += 1;
            return Some(Resolution {
                kind: Resolved::Hit,
                results: Vec::new(),
                winner: None,
                created_unix: ranktune_core::clock::unix_now(),
                measured_here: 0,
                fallback: None,
            });
        }
        let world = self.world_size();
        let hits = hellos.iter().filter(|h| h.hit.is_some()).count();
        if hits > 0 {
            tracing::info!(
                op = ctx.op,
                bucket = %bucket_label(ctx.bucket),
                "{hits} of {world} ranks had this bucket cached{}; tuning it again on every rank",
                if hits == world as usize { " with different choices" } else { "" }
            );
        }
        None
    }

    /// Step 2: the candidate positions this rank measures under `strategy`.
    fn share(&self, strategy: Strategy, ctx: &BucketCtx<'_>) -> Vec<usize> {
        let (rank, world) = (self.rank(), self.world_size());
        let n = ctx.candidates.len();
        match strategy {
            Strategy::Broadcast if rank == 0 => (0..n).collect(),
            Strategy::Broadcast => Vec::new(),
            Strategy::Parallel => self.parallel_split(ctx, rank, world),
            Strategy::Merge | Strategy::Independent => (0..n).collect(),
        }
    }

    /// Step 2: sends this rank's results and gets every rank's (rank 0's
    /// alone under broadcast).
    fn exchange(
        &mut self,
        strategy: Strategy,
        ctx: &BucketCtx<'_>,
        report: Report,
    ) -> Result<Vec<Report>, StrategyError> {
        let label = bucket_label(ctx.bucket);
        if strategy == Strategy::Broadcast {
            let tag = format!("{} {label} results from rank 0", ctx.op);
            let mine = (self.rank() == 0).then_some(&report);
            let got: Report = self
                .coll
                .broadcast_json(&tag, 0, mine, self.timeout)
                .map_err(|e| self.collective_err(strategy, ctx, e))?;
            Ok(vec![got])
        } else {
            let tag = format!("{} {label} results", ctx.op);
            self.coll
                .all_gather_json(&tag, &report, self.timeout)
                .map_err(|e| self.collective_err(strategy, ctx, e))
        }
    }
}

/// The ranks disagree about `ctx`'s bucket: `what`, blaming `ranks`.
fn disagree(ctx: &BucketCtx<'_>, what: String, ranks: Vec<u32>) -> StrategyError {
    StrategyError::Disagree {
        op: ctx.op.to_string(),
        bucket: bucket_label(ctx.bucket),
        what,
        ranks,
    }
}

/// This rank's results message: what it measured of `share`, timings that
/// are not finite sent as errors.
fn report_of(share: &[usize], local: &[Option<Measured>]) -> Report {
    Report {
        created_unix: ranktune_core::clock::unix_now(),
        results: share
            .iter()
            .map(|&i| match &local[i] {
                Some(Ok(s)) if finite(s) => Item { index: i, stats: Some(s.clone()), error: None },
                Some(Ok(_)) => {
                    Item { index: i, stats: None, error: Some("non-finite timing".to_string()) }
                }
                Some(Err(e)) => Item { index: i, stats: None, error: Some(e.clone()) },
                None => Item { index: i, stats: None, error: Some("not measured".to_string()) },
            })
            .collect(),
    }
}

/// Step 3: every candidate's results from every rank's report, combined
/// with the merge rule; a result for a candidate that does not exist is a
/// disagreement.
fn combined(ctx: &BucketCtx<'_>, reports: &[Report]) -> Result<Vec<Measured>, StrategyError> {
    let n = ctx.candidates.len();
    let mut per: Vec<Vec<(u32, Result<&Stats, &str>)>> = vec![Vec::new(); n];
    for (r, rep) in reports.iter().enumerate() {
        for item in &rep.results {
            let Some(slot) = per.get_mut(item.index) else {
                return Err(disagree(
                    ctx,
                    format!("rank {r} sent a result for candidate {} of {n}", item.index),
                    vec![r as u32],
                ));
            };
            let m = match (&item.stats, &item.error) {
                (_, Some(e)) => Err(e.as_str()),
                (Some(s), None) => Ok(s),
                (None, None) => Err("no result"),
            };
            slot.push((r as u32, m));
        }
    }
    Ok(per.iter().map(|m| combine_ranks(m)).collect())
}

impl Coordinator {
    /// This rank's share under the parallel strategy: balanced by the costs
    /// of the op's previous shared bucket when every rank knows them.
    fn parallel_split(&self, ctx: &BucketCtx<'_>, rank: u32, world: u32) -> Vec<usize> {
        let n = ctx.candidates.len();
        let Some(known) = self.costs.get(ctx.op).filter(|k| !k.is_empty()) else {
            return parallel_share(n, rank, world);
        };
        let mean = known.values().sum::<f64>() / known.len() as f64;
        let costs: Vec<f64> =
            ctx.candidates.iter().map(|id| known.get(id).copied().unwrap_or(mean)).collect();
        let mut share = balanced_share(&costs, rank, world);
        let leader =
            self.leaders.get(ctx.op).and_then(|l| ctx.candidates.iter().position(|c| c == l));
        if let Some(p) = leader {
            if !share.contains(&p) {
                share.push(p);
                share.sort_unstable();
            }
        }
        share
    }

    /// Records what each candidate of a shared bucket cost to measure
    /// (median × (samples + 1 warm-up)); failures cost next to nothing.
    fn remember_costs(&mut self, ctx: &BucketCtx<'_>, results: &[Measured], winner: Option<usize>) {
        match winner.and_then(|w| ctx.candidates.get(w)) {
            Some(w) => self.leaders.insert(ctx.op.to_string(), *w),
            None => self.leaders.remove(ctx.op),
        };
        let costs = ctx
            .candidates
            .iter()
            .zip(results)
            .map(|(id, r)| {
                let c = r.as_ref().map_or(0.0, |s| s.median_us * f64::from(s.samples + 1));
                (*id, if c.is_finite() { c } else { 0.0 })
            })
            .collect();
        self.costs.insert(ctx.op.to_string(), costs);
    }
}

/// Measures `todo` (positions not yet in `local`) and stores the results.
/// Returns how many were measured.
fn run_measure(
    measure: &mut dyn FnMut(&[usize]) -> Vec<Measured>,
    todo: &[usize],
    local: &mut [Option<Measured>],
) -> usize {
    let todo: Vec<usize> = todo.iter().copied().filter(|&i| local[i].is_none()).collect();
    if todo.is_empty() {
        return 0;
    }
    let mut got = measure(&todo).into_iter();
    for &i in &todo {
        local[i] = Some(
            got.next().unwrap_or_else(|| Err("the measuring closure returned no result".into())),
        );
    }
    todo.len()
}
