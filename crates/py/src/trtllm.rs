//! The file half of `ranktune.trtllm`'s drop-in: reads TensorRT-LLM's own
//! cache file and replaces it with a spliced one (ranktune-formats'
//! `trtllm::native` does the text), atomically (temp file, fsync, rename).
//!
//! Owns only the file steps: the caller (Python) creates the directory and
//! holds TensorRT-LLM's lock (`fcntl.lockf` on `<file>.lock`) and
//! ranktune's (`flock` on the same file) around each call. A file that is
//! not a TensorRT-LLM cache is set aside as `<file>.corrupt-<stamp>` (with
//! a warning), never overwritten.

use crate::{convert, errors};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use ranktune_formats::trtllm::{self as tconv, NativeEntry, NativeUpdate};
use std::path::{Path, PathBuf};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(trtllm_native_save, m)?)?;
    m.add_function(wrap_pyfunction!(trtllm_native_load, m)?)?;
    Ok(())
}

/// ranktune's notes for a save of `sections` from this machine.
fn extras<'a>(sections: impl Iterator<Item = &'a str>) -> serde_json::Value {
    let identity = ranktune_cache::Identity::current();
    let digest = identity.digest();
    let now = ranktune_core::clock::unix_now();
    let saved: serde_json::Map<String, serde_json::Value> = sections
        .map(|name| (name.to_string(), serde_json::json!({"env": digest, "saved_unix": now})))
        .collect();
    serde_json::json!({
        "environments": {digest.clone(): identity},
        "sections": saved,
    })
}

/// The file's text; `None` when it does not exist.
fn read_text(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| format!("{} is not UTF-8 text (byte {})", path.display(), e.utf8_error().valid_up_to())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Moves a file that is not a cache to `<file>.corrupt-<unix seconds>[-n]`;
/// returns the warning that says so.
fn set_aside(path: &Path, why: &str) -> Result<String, String> {
    let stamp = ranktune_core::clock::unix_now();
    let mut base = path.as_os_str().to_owned();
    base.push(format!(".corrupt-{stamp}"));
    let mut aside = PathBuf::from(&base);
    let mut n = 1;
    while std::fs::symlink_metadata(&aside).is_ok() {
        let mut next = base.clone();
        next.push(format!("-{n}"));
        aside = PathBuf::from(next);
        n += 1;
    }
    std::fs::rename(path, &aside)
        .map_err(|e| format!("cannot set {} aside: {e}", path.display()))?;
    Ok(format!(
        "{} is not a TensorRT-LLM cache ({why}); it was set aside as {} and a new file started",
        path.display(),
        aside.display()
    ))
}

/// The file's text (`None`: no file); a file that is not UTF-8 is set
/// aside and reads as empty.
fn current_text(path: &Path, warnings: &mut Vec<String>) -> Result<Option<String>, String> {
    match read_text(path) {
        Err(why) if why.contains("not UTF-8") => {
            warnings.push(set_aside(path, &why)?);
            Ok(Some(String::new()))
        }
        other => other,
    }
}

fn entries(list: &Bound<'_, PyList>) -> PyResult<Vec<NativeEntry>> {
    list.iter()
        .map(|item| {
            let (key, runner_id, tactic, min_time): (String, i64, String, f64) = item.extract()?;
            Ok(NativeEntry { key, runner_id, tactic, min_time })
        })
        .collect()
}

/// Merges `sections` (`[(name, [(key, runner_id, tactic_repr, min_time)])]`)
/// into the TensorRT-LLM cache at `path` as its own saver does; `metadata`
/// (`[(name, value)]`) is written when the file has none; ranktune's
/// extras (this machine's environment identity, and for each saved section
/// which environment saved it and when) are merged into the `ranktune`
/// member. The caller holds the locks. Returns `{"written", "total"}`.
#[pyfunction]
fn trtllm_native_save<'py>(
    py: Python<'py>,
    path: PathBuf,
    sections: &Bound<'py, PyList>,
    metadata: &Bound<'py, PyList>,
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
    update.extras = extras(update.sections.iter().map(|(n, _)| n.as_str()));
    let (spliced, warnings) = py
        .allow_threads(|| -> Result<_, String> {
            let mut warnings = Vec::new();
            let old = current_text(&path, &mut warnings)?.unwrap_or_default();
            let spliced = match tconv::splice_native(&old, &update) {
                Ok(s) => s,
                Err(e) => {
                    warnings.push(set_aside(&path, &e.to_string())?);
                    tconv::splice_native("", &update).map_err(|e| e.to_string())?
                }
            };
            ranktune_core::atomic_file::Publish::new(&path)
                .durable()
                .keep_permissions()
                .regular_target_only()
                .bytes(spliced.text.as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok((spliced, warnings))
        })
        .map_err(errors::msg)?;
    crate::cache::warn_all(py, &warnings)?;
    let d = PyDict::new(py);
    d.set_item("written", spliced.written)?;
    d.set_item("total", spliced.total)?;
    Ok(d)
}

/// Reads `metadata`, `shared` and `rank_<rank>` of the TensorRT-LLM cache
/// at `path`: `{"metadata": dict or None, "shared": [(key, runner_id,
/// tactic_repr, min_time)], "rank": [...]}`; `None` when there is no file.
/// A file that is not a TensorRT-LLM cache is set aside (a warning says
/// where) and reads as empty; entries that are not `{runner_id, tactic,
/// min_time}` are left out with a warning each.
#[pyfunction]
fn trtllm_native_load(py: Python<'_>, path: PathBuf, rank: u32) -> PyResult<PyObject> {
    let read = py
        .allow_threads(|| -> Result<_, String> {
            let mut warnings = Vec::new();
            let Some(text) = current_text(&path, &mut warnings)? else {
                return Ok(None);
            };
            let mut loaded = match tconv::read_native(&text, rank) {
                Ok(l) => l,
                Err(e) => {
                    warnings.push(set_aside(&path, &e.to_string())?);
                    tconv::NativeLoaded::default()
                }
            };
            warnings.append(&mut loaded.warnings);
            loaded.warnings = warnings;
            Ok(Some(loaded))
        })
        .map_err(errors::msg)?;
    let Some(loaded) = read else {
        return Ok(py.None());
    };
    crate::cache::warn_all(py, &loaded.warnings)?;
    let list = |es: &[NativeEntry]| -> PyResult<Bound<'_, PyList>> {
        PyList::new(py, es.iter().map(|e| (e.key.as_str(), e.runner_id, e.tactic.as_str(), e.min_time)))
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
