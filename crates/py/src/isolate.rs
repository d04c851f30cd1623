//! Isolated measuring for `ranktune.autotune(isolate=...)`: what the Rust
//! tuner decides about it, for the Python side to use as it is.
//!
//! - [`measure_requests`]: the tuner's sampler over runs that time
//!   themselves ([`measure_timed`], the sampling `tune_measure` uses), so a
//!   worker's timings give the same statistic as in-process ones;
//! - [`IsolationLimits`]: the limits' defaults and the per-candidate time
//!   limit rule ([`Limits::for_local_ranks`], [`Limits::timeout_for`]);
//! - [`protocol_read`], [`protocol_line`]: the worker protocol's messages,
//!   parsed and written by [`protocol`] itself;
//! - [`isolation_settings`], [`isolation_local_ranks`]: `isolate=`,
//!   `candidate_timeout=`, `candidate_memory=` and their variables, read by
//!   the tuner's [`settings`] as `ranktune tune` reads its flags (one
//!   wording), and the launchers' local size.
//!
//! Owns only the bridging: nothing here forks, waits or kills (`worker.rs`
//! supervises the workers Python starts).

use crate::{convert, tune};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyList, PyString};
use ranktune_tune::isolation::protocol::{self, FromWorker, ToWorker};
use ranktune_tune::isolation::reasons;
use ranktune_tune::isolation::settings::{self, Mode, SettingError};
use ranktune_tune::isolation::Limits;
use ranktune_tune::measure_timed;
use std::time::Duration;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(protocol_read, m)?)?;
    m.add_function(wrap_pyfunction!(protocol_line, m)?)?;
    m.add_function(wrap_pyfunction!(isolation_settings, m)?)?;
    m.add_function(wrap_pyfunction!(isolation_local_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(reason_signal_name, m)?)?;
    m.add_function(wrap_pyfunction!(reason_mib, m)?)?;
    m.add_function(wrap_pyfunction!(reason_last_line, m)?)?;
    m.add_function(wrap_pyfunction!(reason_memory_line, m)?)?;
    m.add_function(wrap_pyfunction!(reason_classify, m)?)?;
    m.add("ISOLATE_ENV", settings::ISOLATE_ENV)?;
    m.add("TIMEOUT_ENV", settings::TIMEOUT_ENV)?;
    m.add("MEMORY_ENV", settings::MEMORY_ENV)?;
    m.add_class::<IsolationLimits>()?;
    m.add("PROTOCOL_VERSION", protocol::PROTOCOL_VERSION)?;
    m.add("PROTOCOL_MAX_LINE", protocol::MAX_LINE)?;
    Ok(())
}

/// Measures `n` candidates whose runs time themselves: `request(i,
/// reps)` runs candidate `i` `reps` times in a row (in a worker process)
/// and gives how long that took, in µs for all `reps`, or the reason it
/// failed (kept as it is). A Python `Exception` it raises fails the
/// candidate with its type and message, as in `tune_measure`; a
/// `KeyboardInterrupt` or `SystemExit` stops the measuring and is raised.
/// The sampling (`warmup`/`samples`, else adaptive) is `tune_measure`'s,
/// so both give the same statistic: the tuner's [`measure_timed`]. Returns
/// one stats dict or `{"error": text}` per candidate.
pub(crate) fn measure_requests<'py>(
    py: Python<'py>,
    n: usize,
    warmup: Option<u32>,
    samples: Option<u32>,
    mut request: impl FnMut(usize, u32) -> PyResult<Result<f64, String>>,
) -> PyResult<Bound<'py, PyList>> {
    let mut fatal: Option<PyErr> = None;
    let mut call = |i: usize, reps: u32| -> Result<f64, String> {
        if fatal.is_some() {
            return Err("interrupted".into());
        }
        match request(i, reps) {
            Ok(Ok(us)) if us.is_finite() && us >= 0.0 => Ok(us),
            Ok(Ok(us)) => Err(format!("the measured time is not one: {us}")),
            Ok(Err(why)) => Err(why),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyException>(py) => {
                Err(format!("{}: {}", tune::type_name(py, &e), e.value(py)))
            }
            Err(e) => {
                fatal = Some(e);
                Err("interrupted".into())
            }
        }
    };
    let results = measure_timed(tune::sampling(warmup, samples), n, &mut call);
    if let Some(e) = fatal {
        return Err(e);
    }
    tune::results_list(py, results)
}

/// `IsolationLimits(local_ranks=1, timeout=None, memory_mib=None)`: the
/// limits an isolated worker runs under, as the Rust tuner sets them:
/// `memory` defaults to half the memory available now divided by
/// `local_ranks` (`None` where that cannot be read), the time limit to
/// `max(floor, factor × the reference)` unless `timeout` (seconds) fixes
/// it.
#[pyclass(module = "ranktune._ranktune", frozen)]
pub(crate) struct IsolationLimits {
    limits: Limits,
}

impl IsolationLimits {
    /// The limits themselves.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }
}

#[pymethods]
impl IsolationLimits {
    #[new]
    #[pyo3(signature = (local_ranks=1, timeout=None, memory_mib=None))]
    fn new(local_ranks: u32, timeout: Option<f64>, memory_mib: Option<u64>) -> PyResult<Self> {
        let mut limits = Limits::for_local_ranks(local_ranks);
        if let Some(t) = timeout {
            limits.timeout = Some(Duration::try_from_secs_f64(t).map_err(|_| {
                PyValueError::new_err(format!("timeout={t}: give a number of seconds above 0"))
            })?);
        }
        if let Some(m) = memory_mib {
            limits.memory =
                Some(m.checked_mul(1 << 20).ok_or_else(|| {
                    PyValueError::new_err(format!("memory_mib={m} is out of range"))
                })?);
        }
        Ok(IsolationLimits { limits })
    }

    /// The fixed per-candidate time limit (seconds), or `None` (derived).
    #[getter]
    fn timeout(&self) -> Option<f64> {
        self.limits.timeout.map(|d| d.as_secs_f64())
    }

    /// Bytes of address space a worker may add over the tuning process's
    /// size when it starts, or `None` for no limit.
    #[getter]
    fn memory(&self) -> Option<u64> {
        self.limits.memory
    }

    /// Seconds a worker may take to start (until it says it is ready).
    #[getter]
    fn start_timeout(&self) -> f64 {
        self.limits.start_timeout.as_secs_f64()
    }

    /// The derived limit's floor and factor, and the limit before anything
    /// of the bucket has been timed: `(floor_s, factor, unreferenced_s)`.
    #[getter]
    fn derived(&self) -> (f64, f64, f64) {
        (
            self.limits.timeout_floor.as_secs_f64(),
            self.limits.timeout_factor,
            self.limits.unreferenced_timeout.as_secs_f64(),
        )
    }

    /// The time limit (seconds) of one request, given the reference
    /// request's time for as many runs (µs), if any.
    #[pyo3(signature = (reference_us=None))]
    fn timeout_for(&self, reference_us: Option<f64>) -> f64 {
        self.limits.timeout_for(reference_us).as_secs_f64()
    }
}

/// Which side wrote a protocol message.
fn from_worker(side: &str) -> PyResult<bool> {
    match side {
        "worker" => Ok(true),
        "tuner" => Ok(false),
        _ => Err(PyValueError::new_err(format!(
            "side={side:?}: give \"worker\" (its answers) or \"tuner\" (its requests)"
        ))),
    }
}

/// `protocol_read(line, side)`: one line of the worker protocol (bytes,
/// with or without its newline) written by `side` (`"worker"`: `ready`,
/// `us`, `error`; `"tuner"`: `init`, `run`) as a dict. A line that is not
/// such a message raises `ValueError` with the protocol's own text, which
/// names the line.
#[pyfunction]
fn protocol_read<'py>(py: Python<'py>, line: &[u8], side: &str) -> PyResult<PyObject> {
    let value = if from_worker(side)? {
        let m = protocol::decode::<FromWorker>(line)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        serde_json::to_value(&m)
    } else {
        let m =
            protocol::decode::<ToWorker>(line).map_err(|e| PyValueError::new_err(e.to_string()))?;
        serde_json::to_value(&m)
    }
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    convert::to_py(py, &value)
}

/// `protocol_line(message, side)`: a message of `side` (a dict of the
/// protocol's form) as its line, newline included. One that is not a
/// message of that side raises `ValueError`.
#[pyfunction]
fn protocol_line<'py>(
    py: Python<'py>,
    message: &Bound<'py, PyAny>,
    side: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let value = convert::from_py(message, "message")
        .map_err(|e| PyTypeError::new_err(format!("protocol_line: {e}")))?;
    let bad = |e: serde_json::Error| {
        PyValueError::new_err(format!("not a protocol message of the {side}: {e}"))
    };
    let line = if from_worker(side)? {
        protocol::encode(&serde_json::from_value::<FromWorker>(value).map_err(bad)?)
    } else {
        protocol::encode(&serde_json::from_value::<ToWorker>(value).map_err(bad)?)
    };
    Ok(PyBytes::new(py, &line))
}

/// A variable's value when it is set to something other than blanks (a
/// value that is not text is read lossily, so parsing it names it).
fn env_text(name: &str) -> Option<String> {
    let v = match std::env::var(name) {
        Ok(v) => v,
        Err(std::env::VarError::NotPresent) => return None,
        Err(std::env::VarError::NotUnicode(v)) => v.to_string_lossy().into_owned(),
    };
    (!v.trim().is_empty()).then_some(v)
}

/// The text a Python argument stands for: a str as it is, an int or a
/// float as its decimal text (`str()`), anything else as its `repr()`
/// (which then fails to parse, and the error shows it).
fn arg_text(v: &Bound<'_, PyAny>) -> String {
    let text = if v.is_instance_of::<PyString>()
        || (!v.is_instance_of::<PyBool>()
            && (v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>()))
    {
        v.str()
    } else {
        v.repr()
    };
    text.map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| "?".to_string())
}

/// One setting: the argument when given (named `argument=`), else its
/// variable when set, else `None`.
fn setting<T>(
    value: Option<&Bound<'_, PyAny>>,
    argument: &str,
    variable: &str,
    parse: impl Fn(&str, &str) -> Result<T, SettingError>,
) -> PyResult<Option<T>> {
    let bad = |e: SettingError| PyValueError::new_err(e.to_string());
    match value {
        Some(v) => parse(&arg_text(v), argument).map(Some).map_err(bad),
        None => env_text(variable).map(|t| parse(&t, variable)).transpose().map_err(bad),
    }
}

/// `isolation_settings(isolate=None, timeout=None, memory=None)`: `(mode,
/// limits)` of `autotune`'s `isolate=`, `candidate_timeout=` and
/// `candidate_memory=` -- each `None` reads its variable
/// (`RANKTUNE_ISOLATE`, `RANKTUNE_CANDIDATE_TIMEOUT`,
/// `RANKTUNE_CANDIDATE_MEMORY`). The mode is `"off"`, `"fork"` or
/// `"spawn"` (`isolate=True`/`False`: fork/off; unset: off); `limits` the
/// worker's [`IsolationLimits`] for this machine's share (None when off).
/// A bad value, or a limit given where nothing is isolated, raises
/// `ValueError` with the tuner's sentence, naming the argument or the
/// variable and what to give.
#[pyfunction]
#[pyo3(signature = (isolate=None, timeout=None, memory=None))]
fn isolation_settings(
    isolate: Option<&Bound<'_, PyAny>>,
    timeout: Option<&Bound<'_, PyAny>>,
    memory: Option<&Bound<'_, PyAny>>,
) -> PyResult<(&'static str, Option<IsolationLimits>)> {
    let mode = match isolate {
        Some(v) if v.is_instance_of::<PyBool>() => {
            if v.is_truthy()? {
                Mode::Fork
            } else {
                Mode::Off
            }
        }
        _ => setting(isolate, "isolate=", settings::ISOLATE_ENV, Mode::parse)?.unwrap_or(Mode::Off),
    };
    let given = timeout.is_some() || memory.is_some();
    let timeout = setting(timeout, "candidate_timeout=", settings::TIMEOUT_ENV, settings::timeout)?;
    let memory = setting(memory, "candidate_memory=", settings::MEMORY_ENV, settings::memory_mib)?;
    let turn_on = format!("isolate=\"fork\" or \"spawn\" (or {})", settings::ISOLATE_ENV);
    settings::limits_need_isolation(
        mode != Mode::Off,
        given,
        "candidate_timeout= and candidate_memory=",
        &turn_on,
    )
    .map_err(PyValueError::new_err)?;
    if mode == Mode::Off {
        return Ok((mode.name(), None));
    }
    let local_ranks = settings::local_ranks_from(|name| std::env::var(name).ok());
    let mut limits = Limits::for_local_ranks(local_ranks);
    limits.timeout = timeout.or(limits.timeout);
    if let Some(m) = memory {
        limits.memory = Some(m.saturating_mul(1 << 20));
    }
    Ok((mode.name(), Some(IsolationLimits { limits })))
}

/// `isolation_local_ranks()`: how many ranks run on this machine, as the
/// launcher says (`LOCAL_WORLD_SIZE`, `OMPI_COMM_WORLD_LOCAL_SIZE`,
/// `MPI_LOCALNRANKS`, `SLURM_NTASKS_PER_NODE`), else 1 -- the command's
/// rule, for the memory limit's share.
#[pyfunction]
fn isolation_local_ranks() -> u32 {
    settings::local_ranks_from(|name| std::env::var(name).ok())
}

/// The name of signal `sig` as a reason says it: `SIGSEGV`, or `signal N`.
#[pyfunction]
fn reason_signal_name(sig: i32) -> String {
    reasons::signal_name(sig)
}

/// Bytes as MiB as a reason says them: `512 MiB`, `1.5 MiB`.
#[pyfunction]
fn reason_mib(bytes: u64) -> String {
    reasons::mib(bytes)
}

/// The last non-empty line of `text`, at most 300 characters.
#[pyfunction]
fn reason_last_line(text: &str) -> &str {
    reasons::last_line(text)
}

/// The line of a worker's standard error that says an allocation failed,
/// or `None` (Rust's rule: its first `memory allocation of …`, else the
/// last line naming another allocator's error).
#[pyfunction]
fn reason_memory_line(text: &str) -> Option<&str> {
    reasons::memory_line(text)
}

/// `reason_classify(status, max_rss, killed_for, memory_limit, stderr)`:
/// why a worker is lost, `(kind, reason)`, by the tuner's own rule
/// (`ranktune_tune::isolation::reasons::classify`). `status`: its `wait`
/// status, `None` when it could not be reaped; `killed_for`: `(kind,
/// reason)` when the supervisor killed it, else `None`.
#[pyfunction]
#[pyo3(signature = (status, max_rss, killed_for, memory_limit, stderr))]
fn reason_classify(
    status: Option<i32>,
    max_rss: u64,
    killed_for: Option<(String, String)>,
    memory_limit: Option<u64>,
    stderr: &str,
) -> PyResult<(&'static str, String)> {
    let killed_for = match killed_for {
        None => None,
        Some((kind, why)) => {
            let kind = ranktune_tune::FailureKind::ALL
                .into_iter()
                .find(|k| k.as_str() == kind)
                .ok_or_else(|| PyValueError::new_err(format!("{kind:?} is not a failure kind")))?;
            Some((kind, why))
        }
    };
    let (kind, why) = reasons::classify(&reasons::Ending {
        exit: status.map(reasons::Exit::from_wait_status),
        max_rss,
        killed_for,
        memory_limit,
        stderr,
    });
    Ok((kind.as_str(), why))
}
