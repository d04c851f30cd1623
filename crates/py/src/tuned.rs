//! The decisions of one `ranktune.autotune` op, made by the Rust tuner's
//! rules: [`TunedOp`] keeps its choices per bucket and answers the miss
//! path — the dispatch ([`miss_action`]: hit, check, tune, resolve with the
//! ranks, fall back and warn once), the first-use check's outcome, which
//! candidates a measure skips (the blocklist) and which it clears, the
//! decision (median + near-tie rule) and the entry it records, the hard
//! failures it puts on the blocklist — and hands what is to be saved to the
//! session (`session.rs`).
//!
//! Python keeps only what must be Python (`python/ranktune/tune.py`): the
//! hit itself (a dict look-up that never reaches this module), calling the
//! user's functions, the worker's fork or spawn, and rebuilding arguments.
//! This module never calls a candidate: `measure` and `tune` get a callable
//! that measures the positions they ask for.
//!
//! Owns one op's choices and their rules; holds no lock while Python code
//! runs (the state's mutex is taken for a few map operations at a time).

use crate::cache::{parse_entry, warn_all, warn_at as warn, Cache};
use crate::errors;
use crate::rules::{tactic_value, PYTHON_FINGERPRINT};
use crate::session;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use ranktune_cache::{BlockKey, Blocked, Blocklist, CacheError};
use ranktune_cache::{CacheLocation, Identity, Section, Stats};
use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_tune::strategy::Strategy;
use ranktune_tune::{candidate_checksum, decide, miss_action, Found, MissAction};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TunedOp>()?;
    m.add_function(wrap_pyfunction!(miss_rule, m)?)?;
    Ok(())
}

/// `miss_rule(found, tuning)`: the miss dispatch [`TunedOp::dispatch`]
/// follows ([`miss_action`]), by name: `found` is `nothing`, `hit`,
/// `hit_confirm`, `unchecked`, `fallback` or `failed`; the answer `hit`,
/// `validate`, `tune`, `tune_confirm`, `fallback_warn` or `fallback`.
#[pyfunction]
fn miss_rule(found: &str, tuning: bool) -> PyResult<&'static str> {
    let f = Found::from_name(found).ok_or_else(|| {
        PyValueError::new_err(format!(
            "found={found:?}: give nothing, hit, hit_confirm, unchecked, fallback or failed"
        ))
    })?;
    Ok(miss_action(f, tuning).name())
}

/// A bucket: the dims tuple (a Python bucket rule may keep negative dims).
type Bucket = Vec<i128>;

/// The bucket as the blocklist and the worker protocol key it: sizes, or
/// `None` when a dim is negative.
fn sizes(b: &Bucket) -> Option<Vec<u64>> {
    b.iter().map(|&d| u64::try_from(d).ok()).collect()
}

/// One candidate: its runner's name and index, its tactic's index in the
/// runner and its value as stored.
struct Cand {
    runner: String,
    runner_index: usize,
    tactic_index: usize,
    tactic: Value,
}

/// The op's choices and what it measured.
#[derive(Default)]
struct State {
    loaded: bool,
    choices: HashMap<Bucket, usize>,
    /// Cached choices not used yet (checked on first use).
    unchecked: HashSet<Bucket>,
    /// Buckets the ranks resolved together in this tuning session.
    agreed: HashSet<Bucket>,
    /// Buckets answered with the fallback (warned once).
    fallback: HashSet<Bucket>,
    blocklist: Blocklist,
    warned_skip: bool,
    warned_unkeyed: bool,
    measured: u32,
    fallbacks: Vec<String>,
    skipped: Vec<(String, Value, String)>,
    failures: Vec<(Bucket, String, Value, String, String)>,
}

/// `TunedOp(op, candidates, cache, strategy, tolerance, retry_failed,
/// validate, legacy_checksum)`: one tuned op's decisions. `candidates`:
/// `[(runner, runner_index, tactic_index, tactic), ...]` in canonical order (the first is
/// the fallback), tactics in any form (stored as their JSON value, else
/// their repr); `cache`: a `Cache` or None (choices live in this process
/// only); `strategy`: a name or None (`RANKTUNE_STRATEGY`, else
/// independent); `retry_failed`: None reads `RANKTUNE_RETRY_FAILED`;
/// `validate`: whether cached choices are checked on first use;
/// `legacy_checksum`: the checksum older Python packages wrote (loaded,
/// never written).
#[pyclass(module = "ranktune._ranktune", frozen)]
pub(crate) struct TunedOp {
    op: String,
    cands: Vec<Cand>,
    location: Option<CacheLocation>,
    strategy: Strategy,
    tolerance: f64,
    retry_failed: bool,
    validate: bool,
    checksum: String,
    legacy_checksum: String,
    env: String,
    state: Mutex<State>,
}

impl TunedOp {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn name_of(&self, p: usize) -> String {
        let c = &self.cands[p];
        match &c.tactic {
            Value::Null => c.runner.clone(),
            t => format!("{} {t}", c.runner),
        }
    }

    /// The blocklist's verdict at `bucket`: `(position, "kind: message")`
    /// of each candidate it blocks there (never the fallback). Records of
    /// this environment for an op tuned alone; of every environment for
    /// one tuned with the other ranks (their candidate lists must be
    /// equal).
    fn blocked(&self, st: &State, bucket: &Bucket) -> Vec<(usize, String)> {
        let Some(dims) = sizes(bucket) else { return Vec::new() };
        let env = (!self.strategy.is_collective()).then_some(self.env.as_str());
        let shapes = [dims];
        let records: Vec<_> = st.blocklist.blocking(&self.op, env, &shapes).collect();
        let mut out = Vec::new();
        for (i, c) in self.cands.iter().enumerate().skip(1) {
            let text = ranktune_cache::tactic_text(&c.tactic);
            let hit = records.iter().find(|(k, _)| {
                k.runner == c.runner
                    && k.fingerprint == PYTHON_FINGERPRINT
                    && k.tactic_text() == text
            });
            if let Some((_, r)) = hit {
                out.push((i, format!("{}: {}", r.kind, r.message)));
            }
        }
        out
    }

    /// The blocklist record of candidate `p` at `dims`, as `kind` with
    /// `why`, seen now by this rank.
    fn block(&self, p: usize, dims: Vec<u64>, kind: &str, why: &str) -> (BlockKey, Blocked) {
        let c = &self.cands[p];
        // The rank that saw it, where it can be told.
        let rank = rank().ok();
        crate::blocklist::record(&self.op, &c.runner, &c.tactic, &self.env, dims, (kind, why), rank)
    }

    /// Loads the op's stored choices and its blocklist once: entries of the
    /// `shared` section first, then this rank's (the first of a bucket
    /// wins), fresh, under this candidate set's checksum (or the legacy
    /// one), with the Python fingerprint and a candidate of this op; a
    /// choice the blocklist blocks is left out (the next tuning run tunes
    /// it again without it; until then, the fallback).
    fn load(&self, py: Python<'_>) -> PyResult<()> {
        if self.state().loaded {
            return Ok(());
        }
        let Some(location) = &self.location else {
            self.state().loaded = true;
            return Ok(());
        };
        let rank = rank()?;
        let checksums = [self.checksum.as_str(), self.legacy_checksum.as_str()];
        crate::logs::ensure();
        let loaded =
            py.allow_threads(|| -> Result<_, CacheError> { location.open()?.inspect() }).map_err(
                |e| errors::cache(&format!("cannot show {location}; Cache.check() says more"), e),
            )?;
        let current = Identity::current();
        let mut kept: Vec<(Bucket, usize)> = Vec::new();
        for section in [Section::Shared, Section::Rank(rank)] {
            for (s, k, e) in loaded.data.iter() {
                if s != section
                    || k.op != self.op
                    || ranktune_cache::is_stale(e, &current.digest())
                    || !checksums.contains(&e.checksum.as_str())
                    || k.fingerprint != PYTHON_FINGERPRINT
                {
                    continue;
                }
                let [one] = k.bucket.as_slice() else { continue };
                let Some(dims) = one.iter().map(|d| d.as_i128()).collect::<Option<Bucket>>() else {
                    continue;
                };
                let found =
                    self.cands.iter().position(|c| c.runner == k.runner && c.tactic == e.tactic);
                if let Some(pos) = found {
                    if !kept.iter().any(|(b, _)| *b == dims) {
                        kept.push((dims, pos));
                    }
                }
            }
        }
        {
            let mut st = self.state();
            if !st.loaded {
                st.loaded = true;
                st.blocklist = loaded.data.blocklist;
                for (b, pos) in kept {
                    if st.choices.contains_key(&b)
                        || self.blocked(&st, &b).iter().any(|(p, _)| *p == pos)
                    {
                        continue;
                    }
                    st.choices.insert(b.clone(), pos);
                    if self.validate {
                        st.unchecked.insert(b);
                    }
                }
            }
        }
        warn_all(py, &loaded.warnings)
    }

    /// Records `winner` as `bucket`'s choice (to be saved), from `stats`.
    fn record(
        &self,
        py: Python<'_>,
        bucket: &Bucket,
        winner: Option<usize>,
        stats: &Bound<'_, PyList>,
        shared: bool,
    ) -> PyResult<usize> {
        let results: Vec<Value> = stats
            .iter()
            .enumerate()
            .map(|(i, s)| crate::convert::from_py(&s, &format!("stats[{i}]")))
            .collect::<PyResult<_>>()?;
        let Some(win) = winner else {
            let errors: Vec<String> = self
                .cands
                .iter()
                .zip(&results)
                .map(|(c, s)| {
                    format!(
                        "{}: {}",
                        c.runner,
                        s.get("error").and_then(Value::as_str).unwrap_or("None")
                    )
                })
                .collect();
            return Err(errors::Error::new_err(format!(
                "every candidate of {} failed for bucket {:?}: {}",
                self.op,
                bucket,
                errors.join("; ")
            )));
        };
        self.state().choices.insert(bucket.clone(), win);
        let Some(location) = &self.location else { return Ok(win) };
        let c = &self.cands[win];
        let candidates: Vec<Value> = self
            .cands
            .iter()
            .zip(&results)
            .map(|(c, s)| {
                let mut v =
                    json!({"runner": c.runner, "runner_index": c.runner_index, "tactic": c.tactic});
                match s.get("error") {
                    Some(e) => v["error"] = e.clone(),
                    None => v["stats"] = s.clone(),
                }
                v
            })
            .collect();
        let mut entry = json!({
            "op": self.op,
            "runner": c.runner,
            "fingerprint": PYTHON_FINGERPRINT,
            "bucket": [bucket],
            "tactic": c.tactic,
            "time_us": results[win].get("median_us"),
            "runner_index": c.runner_index,
            "checksum": self.checksum,
            "rank": rank()?,
            "candidates": candidates,
        });
        if shared {
            entry["section"] = json!("shared");
        }
        let (section, key, e) = parse_entry(&entry, 0, &self.env)?;
        session::record_choice(location, section, key, e);
        session::decided(py)?;
        Ok(win)
    }
}

/// This process's rank (0 alone); a launcher's variable that does not
/// parse is the caller's error, never a silent rank 0 (whose section the
/// entry would then go into).
fn rank() -> PyResult<u32> {
    RankInfo::detect(&RankOverrides::default()).map(|r| r.rank).map_err(errors::to_py)
}

#[pymethods]
impl TunedOp {
    #[new]
    #[pyo3(signature = (op, candidates, cache, strategy, tolerance, retry_failed, validate, legacy_checksum))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        op: String,
        candidates: Vec<(String, usize, usize, Bound<'_, PyAny>)>,
        cache: Option<PyRef<'_, Cache>>,
        strategy: Option<Bound<'_, PyAny>>,
        tolerance: f64,
        retry_failed: Option<bool>,
        validate: bool,
        legacy_checksum: String,
    ) -> PyResult<Self> {
        let (name, _) = crate::rules::strategy_of(py, strategy)?;
        let strategy: Strategy = name.parse().map_err(errors::to_py)?;
        let retry_failed = match retry_failed {
            Some(r) => r,
            None => ranktune_tune::retry_failed_from_env().map_err(PyValueError::new_err)?,
        };
        let cands = candidates
            .iter()
            .map(|(runner, runner_index, tactic_index, t)| {
                Ok(Cand {
                    runner: runner.clone(),
                    runner_index: *runner_index,
                    tactic_index: *tactic_index,
                    tactic: tactic_value(t)?,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let mut runners: Vec<(&str, Vec<Value>)> = Vec::new();
        for c in &cands {
            match runners.iter_mut().find(|(n, _)| *n == c.runner) {
                Some((_, ts)) => ts.push(c.tactic.clone()),
                None => runners.push((&c.runner, vec![c.tactic.clone()])),
            }
        }
        let checksum = candidate_checksum(
            &op,
            runners.iter().map(|(n, ts)| (*n, PYTHON_FINGERPRINT, ts.as_slice())),
        );
        Ok(TunedOp {
            op,
            cands,
            location: cache.map(|c| c.describe().clone()),
            strategy,
            tolerance,
            retry_failed,
            validate,
            checksum,
            legacy_checksum,
            env: Identity::current().digest(),
            state: Mutex::new(State::default()),
        })
    }

    /// The strategy's name.
    #[getter]
    fn strategy(&self) -> &'static str {
        self.strategy.name()
    }

    /// Whether the ranks resolve each bucket together.
    #[getter]
    fn collective(&self) -> bool {
        self.strategy.is_collective()
    }

    /// The candidate set's checksum (stored with every entry).
    #[getter]
    fn checksum(&self) -> &str {
        &self.checksum
    }

    /// The near-tie tolerance.
    #[getter]
    fn tolerance(&self) -> f64 {
        self.tolerance
    }

    /// Buckets measured by this op in this process.
    #[getter]
    fn measured(&self) -> u32 {
        self.state().measured
    }

    /// Why buckets of a collective strategy were tuned alone.
    #[getter]
    fn fallbacks(&self) -> Vec<String> {
        self.state().fallbacks.clone()
    }

    /// Known-bad candidates a measure did not run: `(runner, tactic,
    /// reason)`.
    #[getter]
    fn skipped<'py>(&self, py: Python<'py>) -> PyResult<Vec<(String, PyObject, String)>> {
        let skipped = self.state().skipped.clone();
        skipped
            .iter()
            .map(|(r, t, why)| Ok((r.clone(), crate::convert::to_py(py, t)?, why.clone())))
            .collect()
    }

    /// Hard failures of isolated measuring: `(bucket, runner, tactic,
    /// kind, reason)`.
    #[getter]
    fn failures<'py>(&self, py: Python<'py>) -> PyResult<Vec<PyObject>> {
        let failures = self.state().failures.clone();
        failures
            .iter()
            .map(|(b, r, t, kind, why)| {
                let b = PyTuple::new(py, b)?;
                Ok(PyTuple::new(
                    py,
                    [
                        b.into_any().unbind(),
                        r.into_pyobject(py)?.into_any().unbind(),
                        crate::convert::to_py(py, t)?,
                        kind.into_pyobject(py)?.into_any().unbind(),
                        why.into_pyobject(py)?.into_any().unbind(),
                    ],
                )?
                .into_any()
                .unbind())
            })
            .collect()
    }

    /// `{bucket: position}`: the choices made or loaded so far.
    fn choices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let choices = self.state().choices.clone();
        for (b, p) in &choices {
            d.set_item(PyTuple::new(py, b)?, p)?;
        }
        Ok(d)
    }

    /// `dispatch(bucket, tuning, level)`: what a call at `bucket` that
    /// missed the hit path does, `(action, position)`: `"hit"` (run it and
    /// memoize it), `"agreed"` (run it; not memoized while the ranks tune
    /// together), `"check"` (its first use: run and check it, then
    /// [`checked`](Self::checked)), `"tune"`, `"together"` (resolve with
    /// the ranks) or `"fallback"` (run the first candidate; the first time
    /// at a bucket it warns, at Python stack level `level`). Loads the
    /// cache on the op's first miss.
    fn dispatch(
        &self,
        py: Python<'_>,
        bucket: Bucket,
        tuning: bool,
        level: i32,
    ) -> PyResult<(&'static str, usize)> {
        self.load(py)?;
        let collective = self.collective() && tuning;
        let (found, pos) = {
            let st = self.state();
            let pos = st.choices.get(&bucket).copied().unwrap_or(0);
            let found = if st.unchecked.contains(&bucket) {
                Found::Unchecked
            } else if st.choices.contains_key(&bucket) {
                Found::Hit { confirm: collective && !st.agreed.contains(&bucket) }
            } else if st.fallback.contains(&bucket) {
                Found::Fallback
            } else {
                Found::Nothing
            };
            (found, pos)
        };
        Ok(match miss_action(found, tuning) {
            MissAction::Hit if collective => ("agreed", pos),
            MissAction::Hit => ("hit", pos),
            MissAction::Validate => ("check", pos),
            MissAction::Tune { .. } if self.collective() => ("together", pos),
            MissAction::Tune { .. } => ("tune", pos),
            MissAction::Fallback { warn: first } => {
                if first {
                    self.state().fallback.insert(bucket.clone());
                    let text = format!(
                        "ranktune: no tuned choice for {} bucket {:?}; running the first candidate ({}). \
                         Run once inside `with ranktune.tuning():` to tune it",
                        self.op, bucket, self.cands[0].runner
                    );
                    warn(py, &text, level)?;
                }
                ("fallback", 0)
            }
        })
    }

    /// `checked(bucket, why, level)`: the first use of `bucket`'s cached
    /// choice ran; `why` says why it failed its check (None: it passed).
    /// A failed one is replaced by the fallback for this process (one
    /// warning), is put on the cache's blocklist (kind `validation`), and
    /// the bucket is tuned again by the next tuning run without it.
    fn checked(
        &self,
        py: Python<'_>,
        bucket: Bucket,
        why: Option<String>,
        level: i32,
    ) -> PyResult<()> {
        let pos = {
            let mut st = self.state();
            st.unchecked.remove(&bucket);
            let Some(why) = &why else { return Ok(()) };
            let pos = st.choices.remove(&bucket).unwrap_or(0);
            st.fallback.insert(bucket.clone());
            if let (Some(dims), false) = (sizes(&bucket), self.collective()) {
                let (key, record) = self.block(pos, dims, "validation", why);
                st.blocklist.insert(key, record);
            }
            pos
        };
        let why = why.unwrap_or_default();
        let text = format!(
            "ranktune: the cached choice {} of {} bucket {:?} failed its validation ({why}); using \
             the first candidate in this process and marking it bad in the cache (the next tuning \
             run tunes this bucket again without it)",
            self.name_of(pos),
            self.op,
            bucket
        );
        warn(py, &text, level)?;
        let (Some(location), Some(dims)) = (&self.location, sizes(&bucket)) else { return Ok(()) };
        let mut update = ranktune_cache::CacheData::default();
        let (key, record) = self.block(pos, dims, "validation", &why);
        update.blocklist.insert(key, record);
        crate::logs::ensure();
        if let Err(e) = py.allow_threads(|| location.open()?.save(&update)) {
            let text = format!(
                "ranktune: could not record the failed validation on the blocklist ({e}); the next \
                 tuning run may choose it again"
            );
            warn(py, &text, level)?;
        }
        Ok(())
    }

    /// `measure(bucket, positions, run, level)`: the stats of the
    /// candidates at `positions` (in that order; `{"error": ...}` for one
    /// that failed). `run(ps)` measures positions `ps` on the call's
    /// arguments and returns `(stats, hard)`, `hard` being `[(i, kind,
    /// reason)]` of the crashes, time-outs and memory failures among them
    /// (`i` indexes `ps`). A known-bad candidate (the blocklist, unless
    /// `retry_failed`) is not run and fails with its recorded reason; one
    /// retried that worked leaves the blocklist; a hard failure goes on it
    /// with the next save. No deferred save runs while `run` does.
    fn measure<'py>(
        &self,
        py: Python<'py>,
        bucket: Bucket,
        positions: Vec<usize>,
        run: Bound<'py, PyAny>,
        level: i32,
    ) -> PyResult<Bound<'py, PyList>> {
        if let Some(&p) = positions.iter().find(|&&p| p >= self.cands.len()) {
            return Err(PyValueError::new_err(format!("no candidate {p}")));
        }
        let blocked: HashMap<usize, String> =
            self.blocked(&self.state(), &bucket).into_iter().collect();
        let skip = |p: &usize| !self.retry_failed && blocked.contains_key(p);
        let ran: Vec<usize> = positions.iter().copied().filter(|p| !skip(p)).collect();
        let (got, hard): (Bound<'py, PyList>, Vec<(usize, String, String)>) =
            session::measuring(py, || run.call1((ran.clone(),)))?.extract()?;
        let mut by_pos: HashMap<usize, Bound<'py, PyAny>> = HashMap::new();
        for (p, s) in ran.iter().zip(got.iter()) {
            by_pos.insert(*p, s);
        }
        let skipped: Vec<usize> = positions.iter().copied().filter(|p| skip(p)).collect();
        if !skipped.is_empty() {
            let mut st = self.state();
            let first = !st.warned_skip;
            st.warned_skip = true;
            for &p in &skipped {
                let c = &self.cands[p];
                st.skipped.push((c.runner.clone(), c.tactic.clone(), blocked[&p].clone()));
            }
            drop(st);
            if first {
                let listed: Vec<String> = skipped
                    .iter()
                    .map(|&p| format!("{}: {}", self.name_of(p), blocked[&p]))
                    .collect();
                let text = format!(
                    "ranktune: {} bucket {:?}: not measuring known-bad candidates (the cache's \
                     blocklist) -- {}; the same at later buckets (tuner.skipped lists them); \
                     retry_failed=True or RANKTUNE_RETRY_FAILED=1 measures them again",
                    self.op,
                    bucket,
                    listed.join("; ")
                );
                warn(py, &text, level)?;
            }
        }
        self.hard_failures(py, &bucket, &ran, hard, level)?;
        // Retried and worked: off the blocklist.
        if let (Some(location), Some(dims)) = (&self.location, sizes(&bucket)) {
            for (&p, s) in &by_pos {
                if blocked.contains_key(&p) && !s.downcast::<PyDict>()?.contains("error")? {
                    if let Err(e) = self.unblock(py, location, p, &dims) {
                        let text = format!(
                            "ranktune: {} worked when retried at {} bucket {:?}, but its blocklist \
                             record could not be cleared ({e})",
                            self.name_of(p),
                            self.op,
                            bucket
                        );
                        warn(py, &text, level)?;
                    }
                }
            }
        }
        let out = PyList::empty(py);
        for p in &positions {
            match by_pos.get(p) {
                Some(s) => out.append(s)?,
                None => {
                    let d = PyDict::new(py);
                    d.set_item("error", format!("skipped: a known-bad tactic ({})", blocked[p]))?;
                    out.append(d)?;
                }
            }
        }
        Ok(out)
    }

    /// `tune(bucket, run, level)`: measures every candidate (as
    /// [`measure`](Self::measure)), decides, records the winner to be
    /// saved, and returns its position; raises `ranktune.Error` when every
    /// candidate failed.
    fn tune(
        &self,
        py: Python<'_>,
        bucket: Bucket,
        run: Bound<'_, PyAny>,
        level: i32,
    ) -> PyResult<usize> {
        let all: Vec<usize> = (0..self.cands.len()).collect();
        let stats = self.measure(py, bucket.clone(), all, run, level)?;
        self.state().measured += 1;
        let winner = decide_list(&stats, self.tolerance)?;
        self.record(py, &bucket, winner, &stats, false)
    }

    /// `resolved(bucket, res, level)`: the ranks resolved `bucket`
    /// (`Coordinator.resolve`'s dict): records their choice and returns
    /// its position.
    fn resolved(
        &self,
        py: Python<'_>,
        bucket: Bucket,
        res: Bound<'_, PyDict>,
        level: i32,
    ) -> PyResult<usize> {
        self.state().agreed.insert(bucket.clone());
        if let Some(why) = res.get_item("fallback")?.filter(|f| !f.is_none()) {
            let why: String = why.extract()?;
            self.state().fallbacks.push(why.clone());
            warn(py, &format!("ranktune: {why}"), level)?;
        }
        let kind: String =
            res.get_item("kind")?.map(|k| k.extract()).transpose()?.unwrap_or_default();
        if kind == "hit" {
            return Ok(self.state().choices.get(&bucket).copied().unwrap_or(0));
        }
        let measured_here: u32 =
            res.get_item("measured_here")?.map(|m| m.extract()).transpose()?.unwrap_or(0);
        if measured_here > 0 {
            self.state().measured += 1;
        }
        let winner: Option<usize> =
            res.get_item("winner")?.map(|w| w.extract()).transpose()?.flatten();
        let results = res
            .get_item("results")?
            .ok_or_else(|| PyValueError::new_err("res has no \"results\""))?;
        self.record(py, &bucket, winner, results.downcast()?, kind == "shared")
    }

    /// `spawn_init(bucket, positions, spec)`: the `init` message of a
    /// spawned worker that measures the candidates at `positions` at
    /// `bucket` (sent with no bucket when a dim is negative: the worker
    /// needs only the call), `spec` being what it rebuilds them from
    /// (`{"python": {...}}`). A message the worker could not read (over
    /// the protocol's line limit) raises `ValueError` naming the largest
    /// argument of `spec["python"]["call"]`.
    fn spawn_init<'py>(
        &self,
        py: Python<'py>,
        bucket: Bucket,
        positions: Vec<usize>,
        spec: &Bound<'py, PyAny>,
    ) -> PyResult<PyObject> {
        use ranktune_tune::isolation::protocol::{self, Init, InitCandidate, ToWorker, MAX_LINE};
        let spec = crate::convert::from_py(spec, "spec")?;
        let mut candidates = Vec::with_capacity(positions.len());
        for &p in &positions {
            let c = self
                .cands
                .get(p)
                .ok_or_else(|| PyValueError::new_err(format!("no candidate {p}")))?;
            candidates.push(InitCandidate {
                runner: c.runner_index as u32,
                runner_name: c.runner.clone(),
                tactic: c.tactic_index as u32,
                value: c.tactic.clone(),
            });
        }
        let bucket = sizes(&bucket).map(|d| vec![d]).unwrap_or_default();
        let init = Init {
            protocol: protocol::PROTOCOL_VERSION,
            op: self.op.clone(),
            bucket,
            candidates,
            spec,
        };
        let message = ToWorker::Init { init };
        let size = protocol::encode(&message).len();
        if size > MAX_LINE {
            let call = &message_spec(&message)["python"]["call"];
            let mut parts: Vec<(String, &Value)> = Vec::new();
            if let Some(args) = call["args"].as_array() {
                parts.extend(args.iter().enumerate().map(|(i, a)| (format!("argument {i}"), a)));
            }
            if let Some(kwargs) = call["kwargs"].as_object() {
                parts.extend(kwargs.iter().map(|(k, a)| (format!("argument {k:?}"), a)));
            }
            let len = |v: &Value| v.to_string().len();
            let (name, biggest) =
                parts.into_iter().max_by_key(|(_, v)| len(v)).unwrap_or(("the call".into(), call));
            return Err(PyValueError::new_err(format!(
                "isolate=\"spawn\" describes the call to its worker in one protocol line of at \
                 most {MAX_LINE} bytes, but this one takes {size} ({name}: {} bytes -- plain \
                 values are sent as they are, tensors and arrays by shape); pass large data as a \
                 tensor or an array, or use isolate=\"fork\"",
                len(biggest)
            )));
        }
        let value =
            serde_json::to_value(&message).map_err(|e| PyValueError::new_err(e.to_string()))?;
        crate::convert::to_py(py, &value)
    }

    /// The position of `bucket`'s choice, if it has one.
    fn position(&self, bucket: Bucket) -> Option<usize> {
        self.state().choices.get(&bucket).copied()
    }
}

impl TunedOp {
    /// Records the hard failures of a measure (`i` indexing `ran`): listed
    /// in `failures`, and put on the blocklist with the next save (a
    /// bucket with a negative dim cannot be: warned once).
    fn hard_failures(
        &self,
        py: Python<'_>,
        bucket: &Bucket,
        ran: &[usize],
        hard: Vec<(usize, String, String)>,
        level: i32,
    ) -> PyResult<()> {
        let mut unkeyed = false;
        for (i, kind, why) in hard {
            let Some(&p) = ran.get(i) else { continue };
            let c = &self.cands[p];
            self.state().failures.push((
                bucket.clone(),
                c.runner.clone(),
                c.tactic.clone(),
                kind.clone(),
                why.clone(),
            ));
            let Some(location) = &self.location else { continue };
            match sizes(bucket) {
                Some(dims) => {
                    let (key, record) = self.block(p, dims, &kind, &why);
                    session::record_block(location, key, record)
                }
                None => unkeyed = true,
            }
        }
        if unkeyed {
            let first = !std::mem::replace(&mut self.state().warned_unkeyed, true);
            if first {
                let text = format!(
                    "ranktune: {} bucket {:?} has a negative dim: the candidates that crashed, \
                     timed out or ran out of memory there are not put on the blocklist (it keys \
                     buckets of sizes); they are in tuner.failures",
                    self.op, bucket
                );
                warn(py, &text, level)?;
            }
        }
        Ok(())
    }

    /// Clears this environment's records that block candidate `p` at
    /// `dims`: it was retried and worked.
    fn unblock(
        &self,
        py: Python<'_>,
        location: &CacheLocation,
        p: usize,
        dims: &[u64],
    ) -> Result<(), CacheError> {
        let c = &self.cands[p];
        let text = ranktune_cache::tactic_text(&c.tactic);
        let shapes = [dims.to_vec()];
        py.allow_threads(|| {
            let store = location.open()?;
            let loaded = store.inspect()?;
            let now = ranktune_core::clock::unix_now();
            let mut update = ranktune_cache::CacheData::default();
            for (k, _) in loaded.data.blocklist.blocking(&self.op, Some(&self.env), &shapes) {
                if k.runner == c.runner
                    && k.fingerprint == PYTHON_FINGERPRINT
                    && k.tactic_text() == text
                {
                    update.blocklist.clear(k.clone(), now);
                }
            }
            if update.blocklist.cleared().count() > 0 {
                store.save(&update)?;
            }
            Ok(())
        })
    }
}

/// The winner among `stats` (dicts in canonical order) by the median +
/// near-tie rule, or None when none ran.
fn decide_list(stats: &Bound<'_, PyList>, tolerance: f64) -> PyResult<Option<usize>> {
    let mut parsed: Vec<Option<Stats>> = Vec::with_capacity(stats.len());
    for d in stats.iter() {
        let d = d.downcast::<PyDict>()?;
        if d.contains("error")? {
            parsed.push(None);
            continue;
        }
        let v = crate::convert::from_py(d.as_any(), "stats")?;
        parsed.push(Some(
            serde_json::from_value(v).map_err(|e| PyValueError::new_err(format!("stats: {e}")))?,
        ));
    }
    let refs: Vec<Option<&Stats>> = parsed.iter().map(Option::as_ref).collect();
    Ok(decide(&refs, tolerance))
}

/// The spec an init message carries.
fn message_spec(m: &ranktune_tune::isolation::protocol::ToWorker) -> &Value {
    match m {
        ranktune_tune::isolation::protocol::ToWorker::Init { init } => &init.spec,
        _ => &Value::Null,
    }
}
