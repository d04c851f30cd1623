//! The blocklist records `ranktune.autotune` writes: a candidate that
//! failed validation, crashed, timed out or ran out of memory ([`record`],
//! used by `tuned.rs`; [`tune_block`] plants one, for tests and tools), and
//! `RANKTUNE_RETRY_FAILED` ([`tune_retry_failed`]).
//!
//! The rules are the Rust tuner's (`ranktune_cache::Blocklist`: a record
//! blocks its tactic at its bucket and at larger ones). Owns only the
//! bridging; saves go through the store's locked, merging save, with the
//! GIL released.

use crate::cache::{warn_all, Cache};
use crate::errors;
use crate::rules::{tactic_value, PYTHON_FINGERPRINT};
use pyo3::prelude::*;
use ranktune_cache::{sizes_bucket, BlockKey, BlockKind, Blocked, CacheData, Identity};
use serde_json::Value;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tune_block, m)?)?;
    m.add_function(wrap_pyfunction!(tune_retry_failed, m)?)?;
    Ok(())
}

/// The record that blocks `runner`'s `tactic` (stored form) of `op` at
/// `dims` in environment `env`, as kind `kind` (`validation`, `crash`,
/// `timeout`, `memory`) with `message`, seen now by `rank` on this host.
pub(crate) fn record(
    op: &str,
    runner: &str,
    tactic: &Value,
    env: &str,
    dims: Vec<u64>,
    (kind, message): (&str, &str),
    rank: Option<u32>,
) -> (BlockKey, Blocked) {
    let key = BlockKey::new(op, runner, PYTHON_FINGERPRINT, tactic, env, sizes_bucket(&[dims]));
    let now = ranktune_core::clock::unix_now();
    let host = ranktune_core::rank::host_name();
    (key, Blocked::new(BlockKind::parse(kind), message, now, rank, host))
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
    let env = Identity::current().digest();
    let (key, blocked) =
        record(op, runner, &tactic_value(tactic)?, &env, bucket, (kind, message), rank);
    let mut update = CacheData::default();
    update.blocklist.insert(key, blocked);
    let store = cache.open_store()?;
    let report = py.allow_threads(|| store.save(&update)).map_err(|e| {
        errors::cache(&format!("saving the blocklist into {}", cache.describe()), e)
    })?;
    warn_all(py, &report.warnings)
}

/// `RANKTUNE_RETRY_FAILED` as a bool; a value that is not yes/no raises
/// `ValueError` naming it.
#[pyfunction]
fn tune_retry_failed() -> PyResult<bool> {
    ranktune_tune::retry_failed_from_env().map_err(pyo3::exceptions::PyValueError::new_err)
}
