//! What `ranktune.torch` asks Rust for: where this rank's `torch.profiler`
//! trace goes (ranktune's per-rank path rule, the path variables), which run
//! and clock base its header names (the same as ranktune's own traces), and
//! the profiling window from the environment.
//!
//! And the publication of what `torch.profiler` exported as this rank's
//! file ([`torch_trace_publish`]: the header, atomic, the cycle's name).
//!
//! Owns only the translation: the rules are `ranktune-trace`'s.

use crate::errors;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ranktune_core::rank::{RankInfo, RankOverrides};
use ranktune_trace::{IterWindow, PATH_VARS, WINDOW_VARS};
use std::path::PathBuf;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(torch_trace_target, m)?)?;
    m.add_function(wrap_pyfunction!(torch_profile_window, m)?)?;
    m.add_function(wrap_pyfunction!(torch_trace_publish, m)?)?;
    Ok(())
}

/// `torch_trace_target(path=None, rank=None, world_size=None)`: this rank's
/// trace file for `path` (else `RANKTUNE_TRACE`, else
/// `TLLM_TORCH_PROFILE_TRACE`) by ranktune's rule, its directory created
/// and checked writable; and the header fields ranktune's own traces write.
/// `rank`/`world_size` override the launcher's variables (a process group's
/// rank). Returns `{"path", "rank", "world_size", "local_rank", "run_id",
/// "run_id_source", "base_ns"}`.
#[pyfunction]
#[pyo3(signature = (path=None, rank=None, world_size=None))]
fn torch_trace_target<'py>(
    py: Python<'py>,
    path: Option<PathBuf>,
    rank: Option<u32>,
    world_size: Option<u32>,
) -> PyResult<Bound<'py, PyDict>> {
    let template = match path {
        Some(p) => p,
        None => PATH_VARS
            .iter()
            .find_map(|v| std::env::var_os(v).filter(|s| !s.is_empty()))
            .map(PathBuf::from)
            .ok_or_else(|| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "no trace path: give trace_handler(path) or set {} (or {})",
                    PATH_VARS[0], PATH_VARS[1]
                ))
            })?,
    };
    let mut info = RankInfo::detect(&RankOverrides::default()).map_err(errors::to_py)?;
    if let Some(w) = world_size {
        info.world_size = w;
    }
    if let Some(r) = rank {
        info.rank = r;
    }
    if info.rank >= info.world_size {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "rank {} is not below world size {}",
            info.rank, info.world_size
        )));
    }
    let host = ranktune_core::rank::host_name();
    let file = ranktune_trace::rank_path(&template, &info, std::process::id(), &host)
        .map_err(errors::to_py)?;
    py.allow_threads(|| ranktune_trace::prepare(&file)).map_err(errors::to_py)?;
    let run = ranktune_trace::run_identity(&info).map_err(errors::to_py)?;
    let d = PyDict::new(py);
    d.set_item("path", file)?;
    d.set_item("rank", info.rank)?;
    d.set_item("world_size", info.world_size)?;
    d.set_item("local_rank", info.local_rank)?;
    d.set_item("run_id", run.run_id)?;
    d.set_item("run_id_source", run.run_id_source)?;
    d.set_item("base_ns", run.base_ns)?;
    Ok(d)
}

/// `torch_profile_window(value=None)`: the inclusive iteration ranges of
/// `value`, else `RANKTUNE_PROFILE_ITERS`, else `TLLM_PROFILE_START_STOP`
/// (`A-B,C-D`, a single `N`; both ends included), sorted; `None` when
/// nothing is set. A malformed value raises, naming the variable.
#[pyfunction]
#[pyo3(signature = (value=None))]
fn torch_profile_window(value: Option<String>) -> PyResult<Option<Vec<(u64, u64)>>> {
    let (var, text) = match value {
        Some(v) => ("window".to_string(), v),
        None => match WINDOW_VARS
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()).map(|s| (*v, s)))
        {
            Some((v, s)) => (v.to_string(), s),
            None => return Ok(None),
        },
    };
    let w = IterWindow::parse_from(&var, &text).map_err(errors::to_py)?;
    Ok(Some(w.ranges().to_vec()))
}

/// `torch_trace_publish(raw, path, cycle, defaults, other)`: publishes the
/// Chrome trace `torch.profiler` exported to `raw` as profiling cycle
/// `cycle` (from 0) of this rank's file `path` (the first cycle `path`
/// itself, then `<stem>.cycle<N><ext>`): `distributedInfo` first, the
/// profiler's members completed with `defaults` (rank, world size, local
/// rank, backend), `otherData` updated with `other` (the run id and
/// versions), then the profiler's members as it wrote them; atomically and
/// durably, gzipped for a `.gz` path. Returns the file written. The GIL is
/// released while it writes.
#[pyfunction]
fn torch_trace_publish(
    py: Python<'_>,
    raw: PathBuf,
    path: PathBuf,
    cycle: u32,
    defaults: &Bound<'_, PyDict>,
    other: &Bound<'_, PyDict>,
) -> PyResult<PathBuf> {
    let object = |d: &Bound<'_, PyDict>,
                  what: &str|
     -> PyResult<serde_json::Map<String, serde_json::Value>> {
        match crate::convert::from_py(d.as_any(), what)? {
            serde_json::Value::Object(m) => Ok(m),
            _ => Err(pyo3::exceptions::PyTypeError::new_err(format!("{what} must be a dict"))),
        }
    };
    let (defaults, other) = (object(defaults, "defaults")?, object(other, "other")?);
    let target = ranktune_trace::cycle_path(&path, cycle);
    py.allow_threads(|| ranktune_trace::publish_adopted(&raw, &target, &defaults, &other))
        .map_err(errors::to_py)?;
    Ok(target)
}
