//! The file half of `ranktune.trtllm`'s drop-in: reads TensorRT-LLM's own
//! cache file and replaces it with a spliced one (ranktune-formats'
//! `trtllm::native` does the text), atomically (temp file, fsync, rename).
//! A save is two steps: its entries go to a spool file
//! (`<file>.trtllm-spool/<ns>-<pid>-<n>.json`, no lock), then, under the
//! locks, the first save to get them folds every waiting spool in one
//! rewrite; the rest find theirs folded.
//!
//! Owns only the file steps: the caller (Python) creates the directory and
//! holds TensorRT-LLM's lock (`fcntl.lockf` on `<file>.lock`) and
//! ranktune's (`flock` on the same file) around the fold and the load. A file that is
//! not a TensorRT-LLM cache is set aside as `<file>.corrupt-<stamp>` (with
//! a warning), never overwritten.

use crate::{convert, errors};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use ranktune_formats::trtllm::{self as tconv, NativeEntry, NativeUpdate};
use std::path::{Path, PathBuf};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(trtllm_native_spool, m)?)?;
    m.add_function(wrap_pyfunction!(trtllm_native_fold, m)?)?;
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
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|e| {
            format!("{} is not UTF-8 text (byte {})", path.display(), e.utf8_error().valid_up_to())
        }),
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

/// Where saves wait to be folded into `path`: `<file>.trtllm-spool/`.
fn spool_dir(path: &Path) -> PathBuf {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".trtllm-spool");
    PathBuf::from(dir)
}

/// One save as spool text: `{"metadata": [[name, value]], "sections":
/// [[name, [[key, runner_id, tactic, min_time bits]]]]}` (bits, so `inf`
/// and every float survive JSON exactly).
fn spool_text(update: &NativeUpdate) -> String {
    let sections: Vec<serde_json::Value> = update
        .sections
        .iter()
        .map(|(name, es)| {
            let es: Vec<serde_json::Value> = es
                .iter()
                .map(|e| serde_json::json!([e.key, e.runner_id, e.tactic, e.min_time.to_bits()]))
                .collect();
            serde_json::json!([name, es])
        })
        .collect();
    let metadata: Vec<serde_json::Value> =
        update.metadata.iter().map(|(k, v)| serde_json::json!([k, v])).collect();
    serde_json::json!({"metadata": metadata, "sections": sections}).to_string()
}

/// A spool file's save; `None` when it is not one (a damaged file).
fn parse_spool(text: &str) -> Option<NativeUpdate> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut update = NativeUpdate::default();
    for m in v.get("metadata")?.as_array()? {
        update.metadata.push((m.get(0)?.as_str()?.to_string(), m.get(1)?.clone()));
    }
    for s in v.get("sections")?.as_array()? {
        let mut es = Vec::new();
        for e in s.get(1)?.as_array()? {
            es.push(NativeEntry {
                key: e.get(0)?.as_str()?.to_string(),
                runner_id: e.get(1)?.as_i64()?,
                tactic: e.get(2)?.as_str()?.to_string(),
                min_time: f64::from_bits(e.get(3)?.as_u64()?),
            });
        }
        update.sections.push((s.get(0)?.as_str()?.to_string(), es));
    }
    Some(update)
}

/// Writes one save (`sections`: `[(name, [(key, runner_id, tactic_repr,
/// min_time)])]`; `metadata`: `[(name, value)]`, what a file without
/// metadata gets) as a spool file next to the cache at `path`, without any
/// lock, and returns its path: step one of a save (see
/// [`trtllm_native_fold`]).
#[pyfunction]
fn trtllm_native_spool(
    py: Python<'_>,
    path: PathBuf,
    sections: &Bound<'_, PyList>,
    metadata: &Bound<'_, PyList>,
) -> PyResult<PathBuf> {
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
    py.allow_threads(|| -> Result<PathBuf, String> {
        let dir = spool_dir(&path);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file = dir.join(format!("{now:024}-{}-{seq}.json", std::process::id()));
        ranktune_core::atomic_file::Publish::new(&file)
            .bytes(spool_text(&update).as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        Ok(file)
    })
    .map_err(errors::msg)
}

/// Step two of a save, with TensorRT-LLM's and ranktune's locks held: when
/// `spool` is still there, folds **every** waiting spool file (in the order
/// they were written) into the cache at `path` as TensorRT-LLM's own saver
/// merges one save (after waiting while more spools arrive: a quiet 10 ms,
/// 200 ms at most), writes the file once (temp, fsync, rename), then
/// deletes the folded spools. When `spool` is gone, a save that held the
/// lock before folded it, and nothing is written. Ranks that save at once
/// so share one or two rewrites instead of one each. Returns `{"written"
/// (this save's entries), "total" (entries in the file, when it was
/// rewritten here; else None), "folded" (spool files folded)}`.
#[pyfunction]
fn trtllm_native_fold<'py>(
    py: Python<'py>,
    path: PathBuf,
    spool: PathBuf,
) -> PyResult<Bound<'py, PyDict>> {
    let (written, total, folded, warnings) = py
        .allow_threads(|| -> Result<_, String> {
            let mut warnings = Vec::new();
            let Ok(own) = std::fs::read_to_string(&spool) else {
                return Ok((None, None, 0, warnings));
            };
            let written =
                parse_spool(&own).map(|u| u.sections.iter().map(|(_, e)| e.len()).sum::<usize>());
            let dir = spool_dir(&path);
            // Ranks that finish together are folded together: wait while
            // spools keep arriving (a quiet 10 ms; 200 ms at most).
            let count = || std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
            let mut seen = count();
            for _ in 0..20 {
                std::thread::sleep(std::time::Duration::from_millis(10));
                let now = count();
                if now == seen {
                    break;
                }
                seen = now;
            }
            let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.extension().is_some_and(|x| x == "json")
                        && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect();
            names.sort();
            let mut update = NativeUpdate::default();
            let mut done = Vec::new();
            for name in names {
                let Ok(text) = std::fs::read_to_string(&name) else { continue };
                match parse_spool(&text) {
                    Some(u) => {
                        if update.metadata.is_empty() {
                            update.metadata = u.metadata;
                        }
                        for (section, es) in u.sections {
                            match update.sections.iter_mut().find(|(n, _)| *n == section) {
                                Some((_, all)) => all.extend(es),
                                None => update.sections.push((section, es)),
                            }
                        }
                    }
                    None => warnings.push(format!(
                        "{} is not a ranktune spool file (damaged); it was removed",
                        name.display()
                    )),
                }
                done.push(name);
            }
            update.extras = extras(update.sections.iter().map(|(n, _)| n.as_str()));
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
            // Only now, with the file in place and synced, are they done.
            for name in &done {
                let _ = std::fs::remove_file(name);
            }
            Ok((written, Some(spliced.total), done.len(), warnings))
        })
        .map_err(errors::msg)?;
    crate::cache::warn_all(py, &warnings)?;
    let d = PyDict::new(py);
    d.set_item("written", written)?;
    d.set_item("total", total)?;
    d.set_item("folded", folded)?;
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
