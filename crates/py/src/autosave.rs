//! Durable progress for `ranktune.tuning(save_every=...)`: the Rust
//! tuner's save policy ([`SaveEvery`]: its parsing, its words, its
//! variable) and its clock arithmetic ([`RustAutosave`]: when a save is
//! due, the back-off after a failed one), bound as `_ranktune.Autosave`, so
//! that Python and `ranktune tune` have one policy and one implementation.
//!
//! Owns only the bridging: the clock is read here (`Instant::now()`) so
//! Python passes what a save cost, never an instant. Nothing here saves or
//! runs Python code; the lock around the state is held only inside these
//! methods, which never call back into Python.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyInt, PyString};
use ranktune_tune::{Autosave as RustAutosave, SaveEvery, SaveEveryError, SAVE_EVERY_ENV};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Autosave>()?;
    m.add("SAVE_EVERY_ENV", SAVE_EVERY_ENV)?;
    Ok(())
}

/// How `save_every=` is named in the policy's error (`save_every="x"`).
const ARGUMENT: &str = "save_every";

/// The policy `save_every=` asks for: `None` reads [`SAVE_EVERY_ENV`] (else
/// auto); a str is parsed as the command's `--save-every` is; an int or a
/// float is its decimal text, parsed the same way. Anything else is the
/// policy's error, naming the argument.
fn policy(value: Option<&Bound<'_, PyAny>>) -> Result<SaveEvery, SaveEveryError> {
    let Some(v) = value else {
        return SaveEvery::resolve(None, ARGUMENT);
    };
    let bad = |text: String| SaveEveryError { origin: ARGUMENT.to_string(), text };
    if let Ok(s) = v.downcast::<PyString>() {
        let text: String = s.extract().map_err(|_| bad(s.to_string_lossy().into_owned()))?;
        return SaveEvery::parse(&text, ARGUMENT);
    }
    // bool is an int in Python, and no policy.
    let number = !v.is_instance_of::<pyo3::types::PyBool>()
        && (v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>());
    let text = if number { v.str() } else { v.repr() }
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "?".to_string());
    if number {
        SaveEvery::parse(&text, ARGUMENT)
    } else {
        Err(bad(text))
    }
}

/// The longest wait [`Autosave::wait`] reports before saying "never": a
/// policy of more seconds than this (`save_every=1e30`) saves only at the
/// end.
const NEVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How long after `now` the state says a save is due: zero when it is due
/// now, `None` when it never will be (`end`, or beyond [`NEVER`]).
fn until_due(state: &RustAutosave, now: Instant) -> Option<Duration> {
    state.next_due(now).map(|t| t.saturating_duration_since(now)).filter(|d| *d <= NEVER)
}

/// `Autosave(save_every=None)`: the save policy of one `tuning()` session
/// and its state. `save_every` is `"auto"`, `"end"`, or a number of
/// seconds (an int, a float or their text; `0`: after every choice);
/// `None` reads `RANKTUNE_SAVE_EVERY`, else auto. A bad value raises
/// `ValueError` with the tuner's sentence, naming `save_every` or the
/// variable.
///
/// The rule is the tuner's: the first choice is saved at once; auto waits
/// 20 times the last save's cost (at most 60 s, or twice that cost); a
/// number of seconds waits that long; a failed save is tried again no
/// sooner than 20 times what it cost (at least 1 s; same cap), whatever
/// the policy; end never saves before the end.
#[pyclass(module = "ranktune._ranktune", frozen)]
pub(crate) struct Autosave {
    state: Mutex<RustAutosave>,
}

impl Autosave {
    fn with<T>(&self, f: impl FnOnce(&mut RustAutosave) -> T) -> T {
        // A poisoned lock: a panic while it was held, which these methods
        // cannot have (they do arithmetic); the state is still whole.
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }
}

#[pymethods]
impl Autosave {
    #[new]
    #[pyo3(signature = (save_every=None))]
    fn new(save_every: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let policy = policy(save_every).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Autosave { state: Mutex::new(RustAutosave::new(policy)) })
    }

    /// `"auto"`, `"end"` or `"every"`.
    #[getter]
    fn policy(&self) -> &'static str {
        match self.with(|s| s.policy()) {
            SaveEvery::Auto => "auto",
            SaveEvery::End => "end",
            SaveEvery::Every(_) => "every",
        }
    }

    /// The seconds between saves of `"every"`; `0.0` for the others.
    #[getter]
    fn interval(&self) -> f64 {
        match self.with(|s| s.policy()) {
            SaveEvery::Every(d) => d.as_secs_f64(),
            SaveEvery::Auto | SaveEvery::End => 0.0,
        }
    }

    /// Whether a save is due now (when anything is pending).
    fn due(&self) -> bool {
        let now = Instant::now();
        self.with(|s| s.due(now))
    }

    /// Seconds from now until a save is due (`0.0`: now), or `None` when
    /// none will be before the session ends (`end`, or after a failed save
    /// under a policy that never saves on its own).
    fn wait(&self) -> Option<f64> {
        let now = Instant::now();
        self.with(|s| until_due(s, now)).map(|d| d.as_secs_f64())
    }

    /// A save that took `cost` seconds has just ended; `ok` says whether it
    /// worked (a failed one is tried again no sooner than the back-off).
    fn saved(&self, cost: f64, ok: bool) -> PyResult<()> {
        let cost = Duration::try_from_secs_f64(cost).map_err(|_| {
            PyValueError::new_err(format!("cost={cost}: give the save's seconds, 0 or more"))
        })?;
        let ended = Instant::now();
        let started = ended.checked_sub(cost).unwrap_or(ended);
        self.with(|s| s.saved(started, ended, ok));
        Ok(())
    }

    /// The policy as `save_every=` takes it back: `auto`, `end`, or seconds.
    fn __str__(&self) -> String {
        self.with(|s| s.policy()).to_string()
    }

    fn __repr__(&self) -> String {
        format!("Autosave({:?})", self.__str__())
    }
}
