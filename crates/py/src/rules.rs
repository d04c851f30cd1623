//! What `ranktune.autotune` asks the Rust crates instead of deciding itself:
//! [`Buckets`] (a call's dims to its bucket, by the tuner's
//! [`BucketMap`]s), the strategy names and their default
//! ([`Strategy`]), the candidate-set checksum
//! ([`ranktune_tune::candidate_checksum`]) with the fingerprint of a Python
//! candidate ([`PYTHON_FINGERPRINT`]). An op's own decisions are
//! `tuned.rs`'s.
//!
//! Owns only the bridging of those decisions: it must never measure, never
//! write a cache, and never hold a Rust lock while Python code runs.

use crate::convert;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyList, PyString, PyTuple};
use ranktune_tune::strategy::{Strategy, STRATEGY_ENV};
use ranktune_tune::{candidate_checksum, BucketMap, DynamicDim};
use serde_json::Value;

/// The fingerprint of a Python candidate. A Rust runner's fingerprint
/// hashes its parameters ([`ranktune_tune::fingerprint_of`]); a Python
/// callable has none ranktune can read, so every one has this fixed value
/// (the value packages before this one wrote, so their entries still match).
pub(crate) const PYTHON_FINGERPRINT: &str = "python";

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Buckets>()?;
    m.add_function(wrap_pyfunction!(tune_strategy, m)?)?;
    m.add_function(wrap_pyfunction!(tune_checksum, m)?)?;
    let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
    m.add("STRATEGIES", PyTuple::new(m.py(), names)?)?;
    m.add("DEFAULT_STRATEGY", Strategy::default().name())?;
    m.add("PYTHON_FINGERPRINT", PYTHON_FINGERPRINT)?;
    Ok(())
}

/// `Buckets(spec)`: how a call's dims map to its bucket. `spec` is
/// `"pow2"` (the last power of two <= each dim, the tuner's
/// [`BucketMap::LastPowerOfTwo`]), `"exact"` (each dim as it is) or a
/// non-empty list of bucket values (the largest one <= each dim, else the
/// smallest: [`BucketMap::FloorIn`]). Calling it with the dims tuple returns
/// the bucket tuple; a dim below 0 counts as 0 where a rule applies.
#[pyclass(name = "Buckets", module = "ranktune._ranktune", frozen)]
pub(crate) struct Buckets {
    /// `None`: exact.
    map: Option<BucketMap>,
}

/// The error for a `buckets=` the tuner does not know.
fn bad_buckets(spec: &Bound<'_, PyAny>) -> PyErr {
    let shown = spec.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into());
    PyValueError::new_err(format!(
        "buckets={shown}: use \"pow2\" (last power of two <= each dim, as the Rust tuner), \
         \"exact\", a sorted list of bucket values, or a callable mapping the dims tuple"
    ))
}

#[pymethods]
impl Buckets {
    #[new]
    fn new(spec: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(s) = spec.downcast::<PyString>() {
            return match &*s.to_cow()? {
                "pow2" => Ok(Buckets { map: Some(DynamicDim::powers_of_two(0, 0).map) }),
                "exact" => Ok(Buckets { map: None }),
                _ => Err(bad_buckets(spec)),
            };
        }
        let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = spec.downcast::<PyList>() {
            l.iter().collect()
        } else if let Ok(t) = spec.downcast::<PyTuple>() {
            t.iter().collect()
        } else {
            return Err(bad_buckets(spec));
        };
        let mut edges = Vec::with_capacity(items.len());
        for b in &items {
            match b.downcast::<PyInt>().ok().and_then(|i| i.extract::<u64>().ok()) {
                Some(v) => edges.push(v),
                None => return Err(bad_buckets(spec)),
            }
        }
        if edges.is_empty() {
            return Err(bad_buckets(spec));
        }
        Ok(Buckets { map: Some(DynamicDim::explicit(0, 0, &edges).map) })
    }

    /// The bucket of `dims` (a tuple of ints), as a tuple of ints.
    fn __call__<'py>(&self, py: Python<'py>, dims: Vec<i64>) -> PyResult<Bound<'py, PyTuple>> {
        match &self.map {
            None => PyTuple::new(py, dims),
            Some(map) => PyTuple::new(py, dims.iter().map(|&d| map.map(d.max(0) as u64))),
        }
    }
}

/// The strategy `name` names: `(canonical name, whether it is collective)`.
/// `None` reads `RANKTUNE_STRATEGY`, and falls back to the default
/// (`independent`) when that is unset or blank. Parsed by the tuner's rule
/// (the CLI's).
#[pyfunction]
#[pyo3(signature = (name=None))]
fn tune_strategy<'py>(
    py: Python<'py>,
    name: Option<Bound<'py, PyAny>>,
) -> PyResult<(&'static str, bool)> {
    strategy_of(py, name)
}

/// [`tune_strategy`]'s rule, for the bindings.
pub(crate) fn strategy_of<'py>(
    py: Python<'py>,
    name: Option<Bound<'py, PyAny>>,
) -> PyResult<(&'static str, bool)> {
    let given = match name {
        Some(n) => n,
        None => match std::env::var_os(STRATEGY_ENV).map(|v| v.to_string_lossy().into_owned()) {
            Some(v) if !v.trim().is_empty() => PyString::new(py, &v).into_any(),
            _ => {
                let s = Strategy::default();
                return Ok((s.name(), s.is_collective()));
            }
        },
    };
    let parsed = given.extract::<String>().ok().and_then(|t| t.parse::<Strategy>().ok());
    parsed.map(|s| (s.name(), s.is_collective())).ok_or_else(|| {
        let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
        let shown = given.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into());
        PyValueError::new_err(format!(
            "strategy={shown}: use one of {} (None: ${STRATEGY_ENV}, else {})",
            names.join(", "),
            Strategy::default().name()
        ))
    })
}

/// A tactic as the JSON value it is stored as; one that cannot be stored
/// (it can be tuned in-process, never saved) by its `repr`.
pub(crate) fn tactic_value(t: &Bound<'_, PyAny>) -> PyResult<Value> {
    match convert::from_py(t, "tactic") {
        Ok(v) => Ok(v),
        Err(_) => Ok(Value::String(t.repr()?.to_string())),
    }
}

/// Python's candidates as runners: `[(runner, [tactic, ...]), ...]` in
/// canonical order, each tactic already in its stored form.
fn runners(candidates: &Bound<'_, PyAny>) -> PyResult<Vec<(String, Vec<Value>)>> {
    let mut out = Vec::new();
    for item in candidates.try_iter()? {
        let (name, tactics): (String, Bound<'_, PyAny>) = item?.extract()?;
        let ts = tactics.try_iter()?.map(|t| tactic_value(&t?)).collect::<PyResult<Vec<_>>>()?;
        out.push((name, ts));
    }
    Ok(out)
}

/// The checksum of `op`'s candidate set, `candidates` being `[(runner,
/// [tactic, ...]), ...]` (a callable without tactics has the one tactic
/// None), each runner with [`PYTHON_FINGERPRINT`]: the tuner's
/// [`candidate_checksum`].
#[pyfunction]
fn tune_checksum(op: &str, candidates: &Bound<'_, PyAny>) -> PyResult<String> {
    let rs = runners(candidates)?;
    Ok(candidate_checksum(
        op,
        rs.iter().map(|(n, ts)| (n.as_str(), PYTHON_FINGERPRINT, ts.as_slice())),
    ))
}
