//! `ranktune.trace` from Python: one recording session per process, spans
//! with Python names, and the analysis side (summary, merge).
//!
//! Owns only the bridging. The path rule, the recorder, the export and the
//! analysis are ranktune-trace's and ranktune-trace-analyze's. Signal
//! handling is left to the Python layer (`python/ranktune/trace.py`), so
//! the session here never installs SIGINT/SIGTERM handlers of its own.

use crate::{convert, errors};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_trace::{IterWindow, Site, SpanGuard, TraceConfig, TraceSession};
use ranktune_trace_analyze as analyze;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(trace_start, m)?)?;
    m.add_function(wrap_pyfunction!(trace_stop, m)?)?;
    m.add_function(wrap_pyfunction!(trace_step, m)?)?;
    m.add_function(wrap_pyfunction!(trace_active, m)?)?;
    m.add_function(wrap_pyfunction!(trace_after_fork_in_child, m)?)?;
    m.add_function(wrap_pyfunction!(trace_summary, m)?)?;
    m.add_function(wrap_pyfunction!(trace_merge, m)?)?;
    m.add_class::<SpanSite>()?;
    m.add_class::<Span>()?;
    Ok(())
}

/// The process's session. Taken out before anything slow is done with it,
/// so the mutex is never held while the GIL is released or reacquired.
fn slot() -> &'static Mutex<Option<TraceSession>> {
    static SLOT: OnceLock<Mutex<Option<TraceSession>>> = OnceLock::new();
    SLOT.get_or_init(|| Mutex::new(None))
}

fn lock_slot() -> std::sync::MutexGuard<'static, Option<TraceSession>> {
    slot().lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts recording to `path` (the same path rule as the CLI's `--trace`:
/// `{rank}` placeholders, a directory ending in `/`, per-rank files).
/// `iterations` is a window such as "10-20". Returns this rank's file.
#[pyfunction]
#[pyo3(signature = (path, iterations=None))]
fn trace_start(py: Python<'_>, path: PathBuf, iterations: Option<String>) -> PyResult<PathBuf> {
    let rank = RankInfo::detect(&RankOverrides::default()).map_err(errors::to_py)?;
    let mut cfg = TraceConfig::from_env_or(Some(path.clone()))
        .map_err(errors::to_py)?
        .unwrap_or_else(|| TraceConfig::new(path));
    if let Some(w) = iterations {
        cfg.window = Some(IterWindow::parse_from("iterations", &w).map_err(errors::to_py)?);
    }
    cfg.handle_signals = false;
    if lock_slot().is_some() {
        return Err(errors::msg(
            "a trace is already recording in this process; call ranktune.trace.stop() first",
        ));
    }
    let session = py.allow_threads(|| TraceSession::start(cfg, &rank)).map_err(errors::to_py)?;
    let file = session.path().to_path_buf();
    let mut slot = lock_slot();
    if slot.is_some() {
        // Another thread started one meanwhile; ours is dropped (and writes
        // its empty file), theirs stays.
        drop(slot);
        drop(session);
        return Err(errors::msg(
            "a trace is already recording in this process; call ranktune.trace.stop() first",
        ));
    }
    *slot = Some(session);
    Ok(file)
}

/// Stops recording and writes this rank's file atomically; returns its
/// path, or None when nothing was recording.
#[pyfunction]
fn trace_stop(py: Python<'_>) -> PyResult<Option<PathBuf>> {
    let taken = lock_slot().take();
    match taken {
        None => Ok(None),
        Some(s) => py.allow_threads(|| s.stop()).map(Some).map_err(errors::to_py),
    }
}

/// In a child made by `fork`: forgets the session inherited from the
/// parent (without exporting it: the file is the parent's), so the child
/// records nothing and its exit writes nothing. Python calls it through
/// `os.register_at_fork(after_in_child=…)`.
#[pyfunction]
fn trace_after_fork_in_child() {
    if let Some(inherited) = lock_slot().take() {
        // Dropping it would try the final export, which a forked child is
        // refused anyway; forgetting it says nothing at all.
        std::mem::forget(inherited);
    }
}

/// Whether a session is recording.
#[pyfunction]
fn trace_active() -> bool {
    lock_slot().is_some()
}

/// Marks the end of one iteration (`ProfilerStep#N`).
#[pyfunction]
fn trace_step() {
    ranktune_trace::step();
}

/// A span name interned for the process's lifetime (the recorder keeps
/// names as `&'static str`): one per distinct Python name.
#[pyclass(module = "ranktune._ranktune", frozen)]
pub struct SpanSite {
    site: &'static Site,
}

#[pymethods]
impl SpanSite {
    /// The site for `name` in category `cat` (the same object for the same
    /// pair, so names are kept once).
    #[new]
    #[pyo3(signature = (name, cat="python"))]
    fn new(name: &str, cat: &str) -> SpanSite {
        static SITES: OnceLock<Mutex<HashMap<(String, String), &'static Site>>> = OnceLock::new();
        let mut sites = SITES
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let site = *sites.entry((name.to_string(), cat.to_string())).or_insert_with(|| {
            let n: &'static str = Box::leak(name.to_string().into_boxed_str());
            let c: &'static str = Box::leak(cat.to_string().into_boxed_str());
            Box::leak(Box::new(Site::new(n, c)))
        });
        SpanSite { site }
    }

    /// Opens a span here; it is recorded when the returned object's
    /// `close()` is called (or it is garbage collected).
    #[pyo3(signature = (args=None))]
    fn open(&self, args: Option<&Bound<'_, PyDict>>) -> PyResult<Span> {
        let mut g = ranktune_trace::span_at(self.site);
        if g.is_recording() {
            if let Some(args) = args {
                for (k, v) in args.iter() {
                    let key: String = k.extract()?;
                    let value = match convert::from_py(&v, &format!("span argument {key}")) {
                        Ok(v) => v,
                        Err(_) => serde_json::Value::String(v.str()?.to_string()),
                    };
                    g = g.with_arg(&key, value);
                }
            }
        }
        Ok(Span { guard: Some(g) })
    }
}

/// An open span (internal; use `ranktune.trace.span`).
#[pyclass(module = "ranktune._ranktune", unsendable)]
pub struct Span {
    guard: Option<SpanGuard>,
}

#[pymethods]
impl Span {
    /// Ends the span (records it). Further calls do nothing.
    fn close(&mut self) {
        self.guard.take();
    }
}

/// The traces named by `paths` (files, directories, globs).
fn resolve(paths: Vec<String>) -> Result<analyze::Resolved, String> {
    analyze::resolve(&paths, &[])
        .map_err(|e| format!("reading the trace inputs: {}", ranktune_core::error_chain::Chain(&e)))
}

/// `trace summary --json` as a dict (the same document, built by
/// ranktune-trace-analyze).
#[pyfunction]
#[pyo3(signature = (paths, top=10))]
fn trace_summary(py: Python<'_>, paths: Vec<String>, top: usize) -> PyResult<PyObject> {
    let doc = py
        .allow_threads(|| -> Result<serde_json::Value, String> {
            let res = resolve(paths)?;
            let s = analyze::summarize(
                &res.inputs,
                &analyze::SummaryOptions { top, ..Default::default() },
            )
            .map_err(|e| {
                format!("summarizing the traces: {}", ranktune_core::error_chain::Chain(&e))
            })?;
            Ok(s.document(&res).to_json())
        })
        .map_err(errors::msg)?;
    convert::to_py(py, &doc)
}

/// `trace merge`: one file with every rank on one timeline. Returns a
/// report dict.
#[pyfunction]
#[pyo3(signature = (paths, out, align="absolute"))]
fn trace_merge(
    py: Python<'_>,
    paths: Vec<String>,
    out: PathBuf,
    align: &str,
) -> PyResult<PyObject> {
    let align = match align {
        "absolute" => analyze::Align::Absolute,
        "first-step" | "first_step" => analyze::Align::FirstStep,
        other => {
            return Err(PyValueError::new_err(format!(
                "align={other:?}: use \"absolute\" or \"first-step\""
            )))
        }
    };
    let doc = py
        .allow_threads(|| -> Result<serde_json::Value, String> {
            let res = resolve(paths)?;
            let report = analyze::merge(
                &res.inputs,
                &out,
                &analyze::MergeOptions { align, ..Default::default() },
            )
            .map_err(|e| {
                format!("merging into {}: {}", out.display(), ranktune_core::error_chain::Chain(&e))
            })?;
            let mut warnings = res.warnings;
            warnings.extend(report.warnings);
            Ok(serde_json::json!({
                "out": out.display().to_string(),
                "events": report.events,
                "bytes_in": report.bytes_in,
                "base_ns": report.base_ns.to_string(),
                "ranks": report.ranks.iter().map(|r| serde_json::json!({
                    "rank": r.rank,
                    "path": r.path.display().to_string(),
                    "events": r.events,
                    "shift_ns": r.shift_ns.to_string(),
                })).collect::<Vec<_>>(),
                "warnings": warnings,
            }))
        })
        .map_err(errors::msg)?;
    convert::to_py(py, &doc)
}
