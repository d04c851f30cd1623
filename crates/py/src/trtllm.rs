//! The bindings of `ranktune.trtllm`'s drop-in: TensorRT-LLM's own cache
//! file, saved and loaded through the cache store's
//! [`ForeignFile`](ranktune_cache::ForeignFile) in the format
//! [`NativeFormat`] (crate `ranktune-formats`).
//!
//! Owns only the conversion of Python's entries and the call: the trust
//! checks on every path, the locks (ranktune's `flock` and TensorRT-LLM's
//! record lock on `<file>.lock`, with the timeout, the waiting message and
//! the fork guard), the spool, the fold and the set-aside are the store's,
//! the text is the format's. This module must keep none of its own.

use crate::{convert, errors, logs};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use ranktune_cache::{ForeignFile, ForeignLock};
use ranktune_formats::trtllm::{
    read_native, spool_bytes, NativeEntry, NativeFormat, NativeLoaded, NativeUpdate,
};
use std::path::PathBuf;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(trtllm_save, m)?)?;
    m.add_function(wrap_pyfunction!(trtllm_load, m)?)?;
    m.add_function(wrap_pyfunction!(trtllm_lock, m)?)?;
    m.add_class::<TrtllmLock>()?;
    Ok(())
}

/// The file at `path`, its lock timeout from `RANKTUNE_LOCK_TIMEOUT`.
fn file(path: PathBuf) -> PyResult<ForeignFile<NativeFormat>> {
    logs::ensure();
    ForeignFile::from_env(path, NativeFormat).map_err(|e| errors::cache("", e))
}

fn entries(list: &Bound<'_, PyList>) -> PyResult<Vec<NativeEntry>> {
    list.iter()
        .map(|item| {
            let (key, runner_id, tactic, min_time): (String, i64, String, f64) = item.extract()?;
            Ok(NativeEntry { key, runner_id, tactic, min_time })
        })
        .collect()
}

/// Saves `sections` (`[(name, [(key, runner_id, tactic_repr, min_time)])]`;
/// `metadata`: `[(name, value)]`, what a file without metadata gets) into
/// the TensorRT-LLM cache at `path`, creating missing directories as
/// TensorRT-LLM does: the store's save (spool, lock or a lock holder's
/// fold, group commit). Returns `{"written", "total"}` (`total`: entries in
/// the file after this save's rewrite; where another rank's rewrite folded
/// this save, the entries this save wrote, as for every store's save).
#[pyfunction]
fn trtllm_save<'py>(
    py: Python<'py>,
    path: PathBuf,
    sections: &Bound<'_, PyList>,
    metadata: &Bound<'_, PyList>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut update = NativeUpdate::default();
    for item in sections.iter() {
        let t = item.downcast::<PyTuple>()?;
        let name: String = t.get_item(0)?.extract()?;
        let list = t.get_item(1)?;
        update.sections.push((name, entries(list.downcast::<PyList>()?)?));
    }
    for item in metadata.iter() {
        let t = item.downcast::<PyTuple>()?;
        let name: String = t.get_item(0)?.extract()?;
        update.metadata.push((name, convert::from_py(&t.get_item(1)?, "metadata")?));
    }
    let written: usize = update.sections.iter().map(|(_, es)| es.len()).sum();
    let file = file(path)?.creating_dirs();
    let report = py
        .allow_threads(|| file.save(spool_bytes(&update), written))
        .map_err(|e| errors::cache("", e))?;
    crate::cache::warn_all(py, &report.warnings)?;
    let d = PyDict::new(py);
    d.set_item("written", written)?;
    d.set_item("total", report.total)?;
    Ok(d)
}

/// Reads `metadata`, `shared` and `rank_<rank>` of the TensorRT-LLM cache
/// at `path` under its lock, saves still waiting in the spool included:
/// `{"metadata": dict or None, "shared": [(key, runner_id, tactic_repr,
/// min_time)], "rank": [...]}`; `None` when there is no file. A file that
/// is not a TensorRT-LLM cache is set aside (a warning says where) and
/// reads as empty; entries that are not `{runner_id, tactic, min_time}` are
/// left out with a warning each.
#[pyfunction]
fn trtllm_load(py: Python<'_>, path: PathBuf, rank: u32) -> PyResult<PyObject> {
    let file = file(path)?;
    let read = py.allow_threads(|| -> Result<Option<NativeLoaded>, PyErr> {
        let Some(loaded) = file.load().map_err(|e| errors::cache("", e))? else {
            return Ok(None);
        };
        let text = std::str::from_utf8(&loaded.bytes).map_err(|e| errors::msg(e.to_string()))?;
        let mut native = read_native(text, rank)
            .map_err(|e| errors::msg(format!("{}: {e}", file.path().display())))?;
        let mut warnings = loaded.warnings;
        warnings.append(&mut native.warnings);
        native.warnings = warnings;
        Ok(Some(native))
    })?;
    let Some(loaded) = read else {
        return Ok(py.None());
    };
    crate::cache::warn_all(py, &loaded.warnings)?;
    let list = |es: &[NativeEntry]| -> PyResult<Bound<'_, PyList>> {
        PyList::new(
            py,
            es.iter().map(|e| (e.key.as_str(), e.runner_id, e.tactic.as_str(), e.min_time)),
        )
    };
    let d = PyDict::new(py);
    match &loaded.metadata {
        Some(m) => d.set_item("metadata", convert::to_py(py, m)?)?,
        None => d.set_item("metadata", py.None())?,
    }
    d.set_item("shared", list(&loaded.shared)?)?;
    d.set_item("rank", list(&loaded.rank)?)?;
    Ok(d.into_any().unbind())
}

/// The lock of the TensorRT-LLM cache at `path` (ranktune's and
/// TensorRT-LLM's), held until `release()`; see [`trtllm_lock`].
#[pyclass(module = "ranktune._ranktune")]
pub(crate) struct TrtllmLock {
    held: Option<ForeignLock>,
}

#[pymethods]
impl TrtllmLock {
    /// Lets go of the lock (a second call does nothing).
    fn release(&mut self) {
        self.held = None;
    }
}

/// Takes the lock of the TensorRT-LLM cache at `path`, waiting at most
/// `RANKTUNE_LOCK_TIMEOUT` (`ranktune.LockTimeout` after).
#[pyfunction]
fn trtllm_lock(py: Python<'_>, path: PathBuf) -> PyResult<TrtllmLock> {
    let file = file(path)?;
    let held = py.allow_threads(|| file.lock()).map_err(|e| errors::cache("", e))?;
    Ok(TrtllmLock { held: Some(held) })
}
