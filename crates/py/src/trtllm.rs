//! TensorRT-LLM's autotuner cache persistence through ranktune's store (the
//! Rust half of `ranktune.trtllm`). Python hands over sections in the
//! reference's own JSON shape (`str()` keys, `repr` tactics, milliseconds);
//! ranktune-formats' converter turns them into entries, and the file store
//! saves them with its locked, merging, crash-safe save. Loading is the
//! reverse, with the store's `load` (a corrupt file is set aside).
//!
//! Owns only the bridging; the key and tactic formats are ranktune-formats'
//! `trtllm` module's. Never writes a file itself.

use crate::{convert, errors};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ranktune_cache::{CacheLocation, Identity, Section, Store};
use ranktune_formats::trtllm as tconv;
use serde_json::Value;
use std::path::PathBuf;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(trtllm_save, m)?)?;
    m.add_function(wrap_pyfunction!(trtllm_load, m)?)?;
    Ok(())
}

/// Saves `sections` (`{"shared"|"rank_<N>": {key_text: {"runner_id",
/// "tactic", "min_time"}}}`) into the cache at `path`; entries are recorded
/// as measured on this machine. Returns `{"written", "total", "skipped"}`.
#[pyfunction]
fn trtllm_save<'py>(
    py: Python<'py>,
    path: PathBuf,
    sections: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let doc = convert::from_py(sections.as_any(), "cache")?;
    let store = open(&path)?;
    let (report, skipped, warnings) = py
        .allow_threads(|| -> Result<_, PyErrText> {
            let imported = tconv::import(&doc).map_err(|e| {
                PyErrText::Plain(format!(
                    "the autotuner cache cannot be converted: {}",
                    ranktune_core::error_chain::Chain(&e)
                ))
            })?;
            let mut data = imported.data;
            let current = Identity::current();
            let digest = current.digest();
            data.metadata.environments.clear();
            data.metadata.environments.insert(digest.clone(), current);
            for entries in data.sections.values_mut() {
                for e in entries.values_mut() {
                    e.env = digest.clone();
                    e.created_unix = ranktune_core::clock::unix_now();
                }
            }
            let report = store.save(&data).map_err(PyErrText::Cache)?;
            // Metadata guesses do not apply: entries are this machine's.
            let warnings: Vec<String> =
                imported.warnings.into_iter().filter(|w| w.contains(" entry ")).collect();
            Ok((report, imported.skipped, warnings))
        })
        .map_err(|e| e.into_py(&path))?;
    let mut all = warnings;
    all.extend(report.warnings);
    crate::cache::warn_all(py, &all)?;
    let d = PyDict::new(py);
    d.set_item("written", report.written)?;
    d.set_item("total", report.total)?;
    d.set_item("skipped", skipped)?;
    Ok(d)
}

/// Loads the `shared` section and `rank_<rank>`'s from the cache at `path`
/// in the reference's JSON shape: `{"shared": {...}, "rank": {...}}`.
/// A file that does not parse is set aside (a warning says where).
#[pyfunction]
fn trtllm_load(py: Python<'_>, path: PathBuf, rank: u32) -> PyResult<PyObject> {
    let store = open(&path)?;
    let (doc, warnings) = py
        .allow_threads(|| -> Result<_, PyErrText> {
            let loaded = store
                .load_sections(&[Section::Shared, Section::Rank(rank)])
                .map_err(PyErrText::Cache)?;
            let mut data = loaded.data;
            data.sections.retain(|s, _| *s == Section::Shared || *s == Section::Rank(rank));
            let (exported, exported_doc) = tconv::export_document(&data);
            let mut warnings = loaded.warnings;
            warnings.extend(exported.warnings);
            let section = |name: &str| exported_doc.get(name).cloned().unwrap_or(Value::Null);
            let doc = serde_json::json!({
                "shared": section("shared"),
                "rank": section(&Section::Rank(rank).name()),
            });
            Ok((doc, warnings))
        })
        .map_err(|e| e.into_py(&path))?;
    crate::cache::warn_all(py, &warnings)?;
    convert::to_py(py, &doc)
}

/// The store at `path` (a file path or a Redis URL).
fn open(path: &std::path::Path) -> PyResult<Box<dyn Store + Send + Sync>> {
    let loc = CacheLocation::parse_os(path.as_os_str())
        .map_err(|e| errors::cache("cannot open the cache", e))?;
    loc.open().map_err(|e| errors::cache(&format!("cannot open {loc}"), e))
}

/// An error produced without the GIL, turned into a Python one after.
enum PyErrText {
    Plain(String),
    Cache(ranktune_cache::CacheError),
}

impl PyErrText {
    fn into_py(self, path: &std::path::Path) -> PyErr {
        match self {
            PyErrText::Plain(m) => errors::msg(m),
            PyErrText::Cache(e) => errors::cache(
                &CacheLocation::parse_os(path.as_os_str())
                    .map(|l| l.to_string())
                    .unwrap_or_else(|_| path.display().to_string()),
                e,
            ),
        }
    }
}
