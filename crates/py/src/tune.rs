//! The Rust tuner's measuring and decision rule for `ranktune.autotune`:
//! [`measure_all`] (warm-ups, calibrated repetitions, fixed or adaptive
//! sampling, failures isolated) drives Python callables. The decisions
//! are `tuned.rs`'s; the saves `session.rs`'s.
//!
//! Owns only the bridging: it never decides anything itself and holds no
//! Rust lock while Python code runs (the candidates run with the GIL held).

use crate::convert;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use ranktune_cache::Stats;
use ranktune_tune::{measure_all, CpuTimer, Sampling, Timer, DEFAULT_TIE_TOLERANCE};
use std::cell::Cell;
use std::rc::Rc;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tune_measure, m)?)?;
    m.add("DEFAULT_TIE_TOLERANCE", DEFAULT_TIE_TOLERANCE)?;
    Ok(())
}

/// A timer whose time is what the user's `timer=` callables reported for
/// the runs between `start` and `stop`.
struct Reported(Rc<Cell<f64>>);

impl Timer for Reported {
    fn start(&mut self) {
        self.0.set(0.0);
    }
    fn stop(&mut self) -> f64 {
        self.0.get()
    }
}

/// Measures `n` candidates: `run(i)` runs candidate `i` once. With
/// `timed=True`, `run(i)` returns the run's duration in seconds (a user
/// timer such as CUDA events) instead of being wall-clock timed. Returns,
/// per candidate, a stats dict (`min_us`, `median_us`, `p90_us`, `spread`,
/// `samples`) or `{"error": text}` (an exception's type and message).
#[pyfunction]
#[pyo3(signature = (n, run, timed=false, warmup=None, samples=None))]
fn tune_measure<'py>(
    py: Python<'py>,
    n: usize,
    run: Bound<'py, PyAny>,
    timed: bool,
    warmup: Option<u32>,
    samples: Option<u32>,
) -> PyResult<Bound<'py, PyList>> {
    let policy = sampling(warmup, samples);
    let reported = Rc::new(Cell::new(0.0));
    let mut cpu = CpuTimer::default();
    let mut user = Reported(Rc::clone(&reported));
    let timer: &mut dyn Timer = if timed { &mut user } else { &mut cpu };
    // A KeyboardInterrupt or SystemExit must stop tuning, not be recorded.
    let mut fatal: Option<PyErr> = None;
    let mut call = |i: usize, reps: u32| -> Result<(), String> {
        if fatal.is_some() {
            return Err("interrupted".into());
        }
        for _ in 0..reps {
            match run.call1((i,)) {
                Ok(v) => {
                    if timed {
                        reported.set(reported.get() + timer_seconds(&v)? * 1e6);
                    }
                }
                Err(e) => {
                    if !e.is_instance_of::<pyo3::exceptions::PyException>(py) {
                        fatal = Some(e);
                        return Err("interrupted".into());
                    }
                    return Err(exception_text(py, &e));
                }
            }
        }
        Ok(())
    };
    let results = measure_all(policy, timer, n, &mut call);
    if let Some(e) = fatal {
        return Err(e);
    }
    results_list(py, results)
}

/// The seconds a `timer=` call returned, or why that is no duration.
pub(crate) fn timer_seconds(v: &Bound<'_, PyAny>) -> Result<f64, String> {
    let secs: f64 =
        v.extract().ok().filter(|_| !v.is_instance_of::<pyo3::types::PyBool>()).ok_or_else(
            || "timer= must return the run's duration in seconds (a float)".to_string(),
        )?;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(format!("timer= returned {secs}, not a duration"));
    }
    Ok(secs)
}

/// What a candidate's exception says: `Type: message` (`Type` alone for an
/// empty message), as a failed candidate's reason.
pub(crate) fn exception_text(py: Python<'_>, e: &PyErr) -> String {
    let message = e.value(py).to_string();
    if message.is_empty() {
        type_name(py, e)
    } else {
        format!("{}: {message}", type_name(py, e))
    }
}

/// The sampler's results as Python gets them: a list with, per candidate,
/// its statistics (see [`return_stats`]) or `{"error": text}`.
pub(crate) fn results_list<'py>(
    py: Python<'py>,
    results: Vec<Result<Stats, String>>,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for r in results {
        let d = PyDict::new(py);
        match r {
            Ok(s) => {
                let v =
                    serde_json::to_value(&s).map_err(|e| PyValueError::new_err(e.to_string()))?;
                return_stats(&d, &v, py)?;
            }
            Err(e) => d.set_item("error", e)?,
        }
        out.append(d)?;
    }
    Ok(out)
}

/// The sampling policy of `warmup=`/`samples=`: fixed when `samples` is
/// given, else the tuner's adaptive sampling (with `warmup` warm-ups when
/// given).
pub(crate) fn sampling(warmup: Option<u32>, samples: Option<u32>) -> Sampling {
    match (warmup, samples) {
        (w, Some(s)) => Sampling::Fixed { warmups: w.unwrap_or(2), samples: s.max(1) },
        (Some(w), None) => match Sampling::ADAPTIVE {
            Sampling::Adaptive {
                min_samples,
                max_samples,
                eliminate_ratio,
                stable_tol,
                stable_runs,
                ..
            } => Sampling::Adaptive {
                warmups: w,
                min_samples,
                max_samples,
                eliminate_ratio,
                stable_tol,
                stable_runs,
            },
            fixed => fixed,
        },
        (None, None) => Sampling::ADAPTIVE,
    }
}

pub(crate) fn return_stats(
    d: &Bound<'_, PyDict>,
    v: &serde_json::Value,
    py: Python<'_>,
) -> PyResult<()> {
    if let Some(o) = v.as_object() {
        for (k, x) in o {
            d.set_item(k, convert::to_py(py, x)?)?;
        }
    }
    Ok(())
}

pub(crate) fn type_name(py: Python<'_>, e: &PyErr) -> String {
    e.get_type(py).name().map(|n| n.to_string()).unwrap_or_else(|_| "Exception".into())
}
