//! The blocklist for `ranktune.autotune`: which of a bucket's candidates
//! are known-bad ([`TuneBlocklist`], a snapshot read once per op when its
//! cache is loaded, so every rank of a job decides on the same records),
//! recording a candidate that failed validation ([`tune_block`]), clearing
//! one that was retried and worked ([`tune_unblock`]), and
//! `RANKTUNE_RETRY_FAILED` ([`tune_retry_failed`]).
//!
//! The rules are the Rust tuner's (`ranktune_cache::Blocklist`: a record
//! blocks its tactic at its bucket and at larger ones; records of this
//! environment for an op tuned alone, of every environment for one tuned
//! with the other ranks). Owns only the bridging; saves go through the
//! store's locked, merging save, with the GIL released.

use crate::cache::{entries_update, warn_all, Cache};
use crate::errors;
use crate::rules::{tactic_value, PYTHON_FINGERPRINT};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ranktune_cache::{sizes_bucket, BlockKey, BlockKind, Blocked, Blocklist, CacheData, Identity};
use serde_json::Value;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TuneBlocklist>()?;
    m.add_function(wrap_pyfunction!(tune_block, m)?)?;
    m.add_function(wrap_pyfunction!(tune_unblock, m)?)?;
    m.add_function(wrap_pyfunction!(tune_save, m)?)?;
    m.add_function(wrap_pyfunction!(tune_retry_failed, m)?)?;
    Ok(())
}

/// `(runner, tactic)` pairs in their stored form.
fn candidates(cands: &Bound<'_, PyAny>) -> PyResult<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for item in cands.try_iter()? {
        let (name, tactic): (String, Bound<'_, PyAny>) = item?.extract()?;
        out.push((name, tactic_value(&tactic)?));
    }
    Ok(out)
}

/// `TuneBlocklist(cache, op, collective)`: the blocklist records of `op`
/// as the cache holds them now (this environment's; every environment's
/// when `collective`).
#[pyclass(module = "ranktune._ranktune", frozen)]
pub(crate) struct TuneBlocklist {
    op: String,
    list: Blocklist,
    env: Option<String>,
}

#[pymethods]
impl TuneBlocklist {
    #[new]
    fn new(
        py: Python<'_>,
        cache: PyRef<'_, Cache>,
        op: String,
        collective: bool,
    ) -> PyResult<Self> {
        let store = cache.open_store()?;
        let loaded = py.allow_threads(|| store.inspect()).map_err(|e| {
            errors::cache(&format!("cannot read the blocklist of {}", cache.describe()), e)
        })?;
        warn_all(py, &loaded.warnings)?;
        let env = (!collective).then(|| Identity::current().digest());
        Ok(TuneBlocklist { op, list: loaded.data.blocklist, env })
    }

    /// `{position: "kind: message"}` for the candidates (`[(runner,
    /// tactic), ...]`, stored form) blocked at `bucket` (the dims tuple).
    /// The first candidate (the fallback) is never blocked.
    fn blocked<'py>(
        &self,
        py: Python<'py>,
        bucket: Vec<u64>,
        cands: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let shapes = [bucket];
        for (i, (runner, tactic)) in candidates(cands)?.iter().enumerate().skip(1) {
            let text = ranktune_cache::tactic_text(tactic);
            let hit = self.list.blocking(&self.op, self.env.as_deref(), &shapes).find(|(k, _)| {
                k.runner == *runner
                    && k.fingerprint == PYTHON_FINGERPRINT
                    && k.tactic_text() == text
            });
            if let Some((_, r)) = hit {
                d.set_item(i, format!("{}: {}", r.kind, r.message))?;
            }
        }
        Ok(d)
    }

    /// Number of records.
    fn __len__(&self) -> usize {
        self.list.len()
    }
}

/// Puts `runner`'s `tactic` of `op` on the blocklist at `bucket` (the
/// dims tuple) for this environment, as kind `kind` (`validation`,
/// `crash`, `timeout`, `memory`) with `message`, seen now by `rank`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn tune_block(
    py: Python<'_>,
    cache: PyRef<'_, Cache>,
    op: &str,
    runner: &str,
    tactic: &Bound<'_, PyAny>,
    bucket: Vec<u64>,
    kind: &str,
    message: &str,
    rank: Option<u32>,
) -> PyResult<()> {
    let mut update = CacheData::default();
    block_into(&mut update, op, runner, tactic, bucket, kind, message, rank)?;
    save(py, &cache, &update)
}

/// Adds the record of [`tune_block`] to `update`.
#[allow(clippy::too_many_arguments)]
fn block_into(
    update: &mut CacheData,
    op: &str,
    runner: &str,
    tactic: &Bound<'_, PyAny>,
    bucket: Vec<u64>,
    kind: &str,
    message: &str,
    rank: Option<u32>,
) -> PyResult<()> {
    let key = BlockKey::new(
        op,
        runner,
        PYTHON_FINGERPRINT,
        &tactic_value(tactic)?,
        Identity::current().digest(),
        sizes_bucket(&[bucket]),
    );
    let now = ranktune_core::clock::unix_now();
    let record =
        Blocked::new(BlockKind::parse(kind), message, now, rank, ranktune_core::rank::host_name());
    update.blocklist.insert(key, record);
    Ok(())
}

/// One blocklist record of [`tune_save`]: `(op, runner, tactic, bucket,
/// kind, message, rank)`, as [`tune_block`] takes them.
type BlockArgs<'py> = (String, String, Bound<'py, PyAny>, Vec<u64>, String, String, Option<u32>);

/// `tune_save(cache, entries, blocks)`: saves tuned choices (`entries`,
/// dicts as `Cache.save` takes them) and blocklist records (`blocks`,
/// tuples of `tune_block`'s arguments) in one locked, merging save -- a
/// decision and the hard failures it was made without are durable
/// together. Returns how many entries were written.
#[pyfunction]
fn tune_save(
    py: Python<'_>,
    cache: PyRef<'_, Cache>,
    entries: &Bound<'_, PyAny>,
    blocks: Vec<BlockArgs<'_>>,
) -> PyResult<usize> {
    let mut update = entries_update(entries)?;
    for (op, runner, tactic, bucket, kind, message, rank) in blocks {
        block_into(&mut update, &op, &runner, &tactic, bucket, &kind, &message, rank)?;
    }
    let store = cache.open_store()?;
    let report = py
        .allow_threads(|| store.save(&update))
        .map_err(|e| errors::cache(&format!("saving into {}", cache.describe()), e))?;
    warn_all(py, &report.warnings)?;
    Ok(report.written)
}

/// Clears the records (of this environment) that block `runner`'s
/// `tactic` of `op` at `bucket`: it was retried and worked. Returns how
/// many were cleared.
#[pyfunction]
fn tune_unblock(
    py: Python<'_>,
    cache: PyRef<'_, Cache>,
    op: &str,
    runner: &str,
    tactic: &Bound<'_, PyAny>,
    bucket: Vec<u64>,
) -> PyResult<usize> {
    let store = cache.open_store()?;
    let loaded = py
        .allow_threads(|| store.inspect())
        .map_err(|e| errors::cache(&format!("cannot read {}", cache.describe()), e))?;
    let env = Identity::current().digest();
    let text = ranktune_cache::tactic_text(&tactic_value(tactic)?);
    let shapes = [bucket];
    let now = ranktune_core::clock::unix_now();
    let mut update = CacheData::default();
    for (k, _) in loaded.data.blocklist.blocking(op, Some(&env), &shapes) {
        if k.runner == runner && k.fingerprint == PYTHON_FINGERPRINT && k.tactic_text() == text {
            update.blocklist.clear(k.clone(), now);
        }
    }
    let n = update.blocklist.cleared().count();
    if n > 0 {
        save(py, &cache, &update)?;
    }
    Ok(n)
}

/// `RANKTUNE_RETRY_FAILED` as a bool; a value that is not yes/no raises
/// `ValueError` naming it.
#[pyfunction]
fn tune_retry_failed() -> PyResult<bool> {
    ranktune_tune::retry_failed_from_env().map_err(pyo3::exceptions::PyValueError::new_err)
}

fn save(py: Python<'_>, cache: &Cache, update: &CacheData) -> PyResult<()> {
    let store = cache.open_store()?;
    let report = py.allow_threads(|| store.save(update)).map_err(|e| {
        errors::cache(&format!("saving the blocklist into {}", cache.describe()), e)
    })?;
    warn_all(py, &report.warnings)
}
