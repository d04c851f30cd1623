//! `ranktune.autotune(..., strategy=...)` across Python processes: the Rust
//! coordinator ([`ranktune_tune::strategy::Coordinator`]) over ranktune's
//! collective transports (the cache's meeting place exactly as `ranktune
//! tune` picks it: the cache file's directory, the cache's Redis server,
//! `RANKTUNE_COLLECTIVE`, or MPI), driving Python's measurements.
//!
//! Owns only the bridging: the coordinator decides (hit agreement, the
//! split of candidates, combining, the bounded waits and the fallback to
//! independent tuning); Python measures. The GIL is released while the
//! coordinator waits for the other ranks and taken again only to run the
//! `measure` callable; no Rust lock is held while Python runs (the
//! coordinator is taken out of its mutex for the call).

use crate::{convert, errors};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use ranktune_cache::{CacheLocation, Stats};
use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_tune::strategy::{self, BucketCtx, Coordinator, Measured, Resolved, Strategy};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCoordinator>()?;
    m.add_function(wrap_pyfunction!(collective_choice, m)?)?;
    m.add_function(wrap_pyfunction!(job_id, m)?)?;
    Ok(())
}

/// `collective_choice()`: what `RANKTUNE_COLLECTIVE` asks for (`auto`,
/// `file`, `single`, `mpi` or `redis`), by the rule `ranktune tune`
/// follows (`CollectiveChoice::from_env_with`); a value that names none is a
/// `ValueError` saying what it takes.
#[pyfunction]
fn collective_choice() -> PyResult<&'static str> {
    ranktune_collective::CollectiveChoice::from_env_with(|name| std::env::var(name).ok())
        .map(|c| c.name())
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// `job_id()`: this run's id from the launcher's environment
/// (`ranktune_core::job::JobId::detect`: `RANKTUNE_JOB_ID`, torchrun's
/// `TORCHELASTIC_RUN_ID` with `MASTER_ADDR`/`MASTER_PORT`, MPI and Slurm
/// ids, …), or `None` when no launcher says.
#[pyfunction]
fn job_id() -> Option<String> {
    ranktune_core::job::JobId::detect().map(|j| j.value)
}

/// The ranks of one job tuning together: `Coordinator(directory,
/// timeout=None)` connects this process (rank from the launcher's
/// environment) to the others through `directory` (the cache file's, shared
/// by every rank) or MPI, as `ranktune tune` does. `timeout` (seconds)
/// bounds every wait (default `RANKTUNE_STRATEGY_TIMEOUT`, else 300). One
/// per process and directory: the ranks' collective calls are matched by
/// their order.
#[pyclass(name = "Coordinator", module = "ranktune._ranktune")]
pub(crate) struct PyCoordinator {
    /// `None` while a `resolve` call has it (the mutex is never held while
    /// Python code runs).
    inner: Mutex<Option<Coordinator>>,
}

impl PyCoordinator {
    /// A new coordinator for `cache`'s meeting place (see `for_cache`).
    fn connect(
        py: Python<'_>,
        cache: &PyRef<'_, crate::cache::Cache>,
        timeout: Option<f64>,
    ) -> PyResult<Self> {
        let timeout = timeout_or_env(timeout)?;
        let info = RankInfo::detect(&RankOverrides::default()).map_err(errors::to_py)?;
        let location = cache.location_ref().clone();
        let coll = py
            .allow_threads(|| {
                let at = match &location {
                    CacheLocation::File(p) => ranktune_collective::CacheAt::File(p),
                    CacheLocation::Redis(u) => ranktune_collective::CacheAt::Redis(u),
                };
                ranktune_collective::from_env_for_cache(&info, at)
            })
            .map_err(|e| {
                // The collective's error names the place (a directory, a
                // server with its password hidden).
                errors::Error::new_err(format!(
                    "connecting the ranks for the cache {location}: {}; \
                     strategy=\"independent\" needs no connection but lets ranks disagree",
                    ranktune_core::error_chain::Chain(&e)
                ))
            })?;
        let coord = Coordinator::new(coll).with_timeout(timeout);
        Ok(PyCoordinator { inner: Mutex::new(Some(coord)) })
    }
}

#[pymethods]
impl PyCoordinator {
    #[new]
    #[pyo3(signature = (directory, timeout=None))]
    fn new(py: Python<'_>, directory: PathBuf, timeout: Option<f64>) -> PyResult<Self> {
        let timeout = timeout_or_env(timeout)?;
        let info = RankInfo::detect(&RankOverrides::default()).map_err(errors::to_py)?;
        let dir: &Path = if directory.as_os_str().is_empty() { Path::new(".") } else { &directory };
        let coll = py.allow_threads(|| ranktune_collective::from_env(&info, dir)).map_err(|e| {
            errors::Error::new_err(format!(
                "connecting the ranks in {}: {}; \
                     strategy=\"independent\" needs no connection but lets ranks disagree",
                dir.display(),
                ranktune_core::error_chain::Chain(&e)
            ))
        })?;
        let coord = Coordinator::new(coll).with_timeout(timeout);
        Ok(PyCoordinator { inner: Mutex::new(Some(coord)) })
    }

    /// `Coordinator.for_cache(cache, timeout=None)`: the ranks of a job whose
    /// cache is `cache` (a `ranktune.Cache`), meeting exactly where `ranktune
    /// tune --cache` makes them meet: a cache file's directory, a cache on a
    /// Redis server on that server (under its `?prefix=`), unless
    /// `RANKTUNE_COLLECTIVE` names another place or MPI launched the job.
    /// One per process and meeting place (`Cache.meeting_place`): the
    /// ranks' collective calls are matched by their order, so every op of
    /// the process shares one sequence; the first call's `timeout` holds.
    #[staticmethod]
    #[pyo3(signature = (cache, timeout=None))]
    fn for_cache(
        py: Python<'_>,
        cache: PyRef<'_, crate::cache::Cache>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyCoordinator>> {
        static BY_PLACE: Mutex<Vec<(String, Py<PyCoordinator>)>> = Mutex::new(Vec::new());
        let place = cache.location_ref().meeting_place();
        let known = |list: &[(String, Py<PyCoordinator>)]| {
            list.iter().find(|(p, _)| *p == place).map(|(_, c)| c.clone_ref(py))
        };
        if let Some(c) = known(&BY_PLACE.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(c);
        }
        let made = Py::new(py, Self::connect(py, &cache, timeout)?)?;
        let mut list = BY_PLACE.lock().unwrap_or_else(|p| p.into_inner());
        // Another thread may have connected meanwhile: the first one stays.
        Ok(known(&list).unwrap_or_else(|| {
            list.push((place.clone(), made.clone_ref(py)));
            made
        }))
    }

    /// `Coordinator.over_store(store, rank, world_size, job, timeout=None,
    /// name="key-value store")`: the ranks of a job meeting in `store`, a
    /// Python object with `set(key, bytes)`, `get(key) -> bytes | None`
    /// (None at once for a missing key, never waiting) and `delete(key)`,
    /// which every rank reaches (``ranktune.torch`` passes the c10d store
    /// of the job's process group). `job` tells one run of the job from
    /// another sharing the store. The same protocol and bounded waits as
    /// the other meeting places.
    #[staticmethod]
    #[pyo3(signature = (store, rank, world_size, job, timeout=None, name=None))]
    fn over_store(
        store: Py<PyAny>,
        rank: u32,
        world_size: u32,
        job: String,
        timeout: Option<f64>,
        name: Option<String>,
    ) -> PyResult<Self> {
        let timeout = timeout_or_env(timeout)?;
        if job.is_empty() {
            return Err(PyValueError::new_err("job must name this run of the job"));
        }
        let store = PyStore { obj: store, name: name.unwrap_or_else(|| "key-value store".into()) };
        let job = ranktune_collective::JobId { value: job, source: "the process group" };
        let coll = ranktune_collective::KvCollective::new(rank, world_size, Box::new(store), job)
            .map_err(errors::to_py)?;
        let coord = Coordinator::new(Box::new(coll)).with_timeout(timeout);
        Ok(PyCoordinator { inner: Mutex::new(Some(coord)) })
    }

    /// Where the ranks meet, for messages and tests (a directory, a Redis
    /// server with its password hidden, MPI).
    fn describe(&self) -> PyResult<String> {
        let slot = self.inner.lock().map_err(|_| {
            errors::Error::new_err("the coordinator was poisoned by an earlier panic")
        })?;
        Ok(match slot.as_ref() {
            Some(c) => c.describe(),
            None => "(busy: resolve() is running)".to_string(),
        })
    }

    /// Resolves one bucket of `op` under `strategy` (`broadcast`, `merge`,
    /// `parallel`; `independent` tunes alone) with the other ranks: every rank calls it
    /// for the same buckets in the same order. `n` candidates (positions
    /// `0..n`); `local_hit`, this rank's cached choice (a position) or None;
    /// `measure(positions)` measures those candidates on this rank and
    /// returns one stats dict per position (as `tune_measure`). Returns
    /// `{"kind": "hit"|"shared"|"local", "winner": position or None,
    /// "results": [stats or {"error"}], "measured_here": int,
    /// "fallback": reason or None}`. Never raises for another rank's
    /// failure: the bucket is then tuned on this rank alone, and
    /// `fallback` says why.
    #[pyo3(signature = (strategy, op, bucket, checksum, n, local_hit, measure, tolerance=ranktune_tune::DEFAULT_TIE_TOLERANCE))]
    #[allow(clippy::too_many_arguments)]
    fn resolve<'py>(
        &self,
        py: Python<'py>,
        strategy: &str,
        op: &str,
        bucket: Vec<Vec<u64>>,
        checksum: &str,
        n: usize,
        local_hit: Option<usize>,
        measure: Py<PyAny>,
        tolerance: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let strategy: Strategy = strategy.parse().map_err(errors::to_py)?;
        if local_hit.is_some_and(|h| h >= n) {
            return Err(PyValueError::new_err(format!(
                "local_hit {local_hit:?} is not below n={n}"
            )));
        }
        let mut coord = self
            .inner
            .lock()
            .map_err(|_| {
                errors::Error::new_err("the coordinator was poisoned by an earlier panic")
            })?
            .take()
            .ok_or_else(|| {
                errors::Error::new_err(
                    "resolve() is already running on another thread; tune from one thread per rank",
                )
            })?;
        let candidates: Vec<(u32, u32)> = (0..n as u32).map(|i| (i, 0)).collect();
        let ctx = BucketCtx {
            op,
            bucket: &bucket,
            checksum,
            candidates: &candidates,
            local_hit: local_hit.map(|h| (h as u32, 0)),
            tie_tolerance: tolerance,
        };
        // A Python exception from `measure` that is not an ordinary
        // Exception (KeyboardInterrupt, SystemExit) is re-raised after the
        // coordinator returns.
        let mut fatal: Option<PyErr> = None;
        let res = py.allow_threads(|| {
            coord.resolve(strategy, &ctx, &mut |positions: &[usize]| {
                Python::with_gil(|py| match call_measure(py, &measure, positions) {
                    Ok(r) => r,
                    Err(e) => {
                        let msg = format!("measure() raised {e}");
                        fatal.get_or_insert(e);
                        positions.iter().map(|_| Err(msg.clone())).collect()
                    }
                })
            })
        });
        if let Ok(mut slot) = self.inner.lock() {
            *slot = Some(coord);
        }
        if let Some(e) = fatal {
            return Err(e);
        }
        let d = PyDict::new(py);
        let kind = match res.kind {
            Resolved::Hit => "hit",
            Resolved::Shared => "shared",
            Resolved::Local => "local",
        };
        d.set_item("kind", kind)?;
        d.set_item("winner", res.winner)?;
        let results = PyList::empty(py);
        for r in &res.results {
            let item = PyDict::new(py);
            match r {
                Ok(s) => {
                    let v = serde_json::to_value(s)
                        .map_err(|e| PyValueError::new_err(e.to_string()))?;
                    if let Some(o) = v.as_object() {
                        for (k, x) in o {
                            item.set_item(k, convert::to_py(py, x)?)?;
                        }
                    }
                }
                Err(e) => item.set_item("error", e)?,
            }
            results.append(item)?;
        }
        d.set_item("results", results)?;
        d.set_item("measured_here", res.measured_here)?;
        d.set_item("fallback", res.fallback.map(|f| f.reason))?;
        Ok(d)
    }
}

/// A Python key-value store as the collective's meeting place: each call
/// takes the GIL for the one store operation (the coordinator waits without
/// it).
struct PyStore {
    obj: Py<PyAny>,
    name: String,
}

impl PyStore {
    fn call(
        &self,
        method: &str,
        args: impl FnOnce(Python<'_>) -> PyResult<Py<PyAny>>,
    ) -> Result<Py<PyAny>, String> {
        Python::with_gil(|py| {
            let a = args(py).map_err(|e| e.to_string())?;
            let tuple =
                a.bind(py).downcast::<pyo3::types::PyTuple>().map_err(|e| e.to_string())?.clone();
            self.obj.call_method1(py, method, tuple).map_err(|e| format!("{method}() raised {e}"))
        })
    }
}

impl ranktune_collective::KeyValue for PyStore {
    fn set(&mut self, key: &str, value: &[u8]) -> Result<(), String> {
        self.call("set", |py| {
            Ok((key, pyo3::types::PyBytes::new(py, value)).into_pyobject(py)?.into_any().unbind())
        })
        .map(drop)
    }

    fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, String> {
        let v = self.call("get", |py| Ok((key,).into_pyobject(py)?.into_any().unbind()))?;
        Python::with_gil(|py| {
            let v = v.bind(py);
            if v.is_none() {
                return Ok(None);
            }
            v.extract::<Vec<u8>>()
                .map(Some)
                .map_err(|_| format!("get({key:?}) returned {}, not bytes or None", v.get_type()))
        })
    }

    fn delete(&mut self, key: &str) -> Result<(), String> {
        self.call("delete", |py| Ok((key,).into_pyobject(py)?.into_any().unbind())).map(drop)
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}

/// `timeout=` as a duration: a positive number of seconds, or `None` for
/// `RANKTUNE_STRATEGY_TIMEOUT` (else 300 s).
fn timeout_or_env(timeout: Option<f64>) -> PyResult<Duration> {
    match timeout {
        // The variable's rule and words (`strategy::timeout_from_env`).
        Some(t) => strategy::timeout_from_text(&t.to_string(), "timeout=")
            .map_err(|e| PyValueError::new_err(e.to_string())),
        None => strategy::timeout_from_env().map_err(errors::to_py),
    }
}

/// Calls `measure(positions)` and reads one stats dict (or `{"error"}`) per position.
fn call_measure(
    py: Python<'_>,
    measure: &Py<PyAny>,
    positions: &[usize],
) -> PyResult<Vec<Measured>> {
    let out = measure.call1(py, (positions.to_vec(),))?;
    let list: Vec<Bound<'_, PyDict>> = out.bind(py).extract()?;
    if list.len() != positions.len() {
        return Err(PyValueError::new_err(format!(
            "measure() returned {} results for {} candidates",
            list.len(),
            positions.len()
        )));
    }
    list.iter()
        .map(|d| {
            if let Some(e) = d.get_item("error")? {
                return Ok(Err(e.str()?.to_string()));
            }
            let v = convert::from_py(d.as_any(), "stats")?;
            let s: Stats = serde_json::from_value(v)
                .map_err(|e| PyValueError::new_err(format!("stats: {e}")))?;
            Ok(Ok(s))
        })
        .collect()
}
