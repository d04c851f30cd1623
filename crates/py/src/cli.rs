//! `_ranktune.cli_main(argv, rank_exe=None)`: the `ranktune` command,
//! compiled into the extension (feature `cli`, the wheel's), so that `pip
//! install` gives the same command, exit statuses and `--help` as the
//! cargo-built binary through the `ranktune` script (`ranktune._cli`).
//!
//! Owns only the call: the command is the `ranktune` crate's. The GIL is
//! released for the whole run (the command never calls into Python).

use pyo3::prelude::*;
use std::ffi::OsString;
use std::path::PathBuf;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    Ok(())
}

/// Runs the command on `argv` (the program name first) and returns its exit
/// status; `rank_exe` is what `tune --ranks N` starts its ranks with (the
/// script itself). `--help`, `--version` and usage errors end the process
/// after printing, as the binary does.
#[pyfunction]
#[pyo3(signature = (argv, rank_exe=None))]
fn cli_main(py: Python<'_>, argv: Vec<OsString>, rank_exe: Option<PathBuf>) -> u8 {
    py.allow_threads(|| ranktune_cli::run(argv, rank_exe).code())
}
