//! The `ranktune._ranktune` Python extension module: PyO3 bindings over the
//! library crates. The public Python API lives in `python/ranktune/`
//! (which wraps this module and keeps only what must be Python: the hit,
//! the user's callables, a worker's fork, rebuilding arguments); everything
//! here converts arguments, releases the GIL around file I/O, lock waits,
//! merges and trace export, and maps Rust errors to the `ranktune.Error`
//! exception family. An autotuned op's decisions (`tuned.rs`) and its saves
//! (`session.rs`) run here, on the library crates' rules.
//!
//! This crate must never hold a Rust lock while running Python code, never
//! re-write a rule the library crates own (cache merging, the path rule,
//! the check rules, the miss dispatch), and never depend on the command's
//! crates (clap, indicatif).

mod autosave;
mod blocklist;
mod cache;
#[cfg(feature = "cli")]
mod cli;
mod convert;
mod errors;
mod isolate;
mod logs;
mod rules;
mod session;
mod strategy;
mod torch;
mod trace;
mod trtllm;
mod tune;
mod tuned;
mod worker;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use ranktune_core::rank::{RankInfo, RankOverrides};

/// `rank_info()`: this process's place in the job from the launcher's
/// environment (torchrun, mpirun, srun, `RANKTUNE_*`), by the same rules as
/// the Rust side.
#[pyfunction]
fn rank_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let info = RankInfo::detect(&RankOverrides::default()).map_err(errors::to_py)?;
    let d = PyDict::new(py);
    d.set_item("rank", info.rank)?;
    d.set_item("world_size", info.world_size)?;
    d.set_item("local_rank", info.local_rank)?;
    d.set_item("source", info.source.to_string())?;
    Ok(d)
}

/// The extension module.
#[pymodule]
fn _ranktune(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(rank_info, m)?)?;
    errors::register(m)?;
    cache::register(m)?;
    trace::register(m)?;
    trtllm::register(m)?;
    tune::register(m)?;
    strategy::register(m)?;
    rules::register(m)?;
    blocklist::register(m)?;
    isolate::register(m)?;
    autosave::register(m)?;
    session::register(m)?;
    tuned::register(m)?;
    torch::register(m)?;
    worker::register(m)?;
    #[cfg(feature = "cli")]
    cli::register(m)?;
    Ok(())
}
