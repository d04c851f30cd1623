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
use ranktune_tune::{SaveEvery, SaveEveryError, SAVE_EVERY_ENV};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
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

/// The policy of `save_every=` (see [`policy`]), its error as Python's
/// `ValueError`.
pub(crate) fn parse(value: Option<&Bound<'_, PyAny>>) -> PyResult<SaveEvery> {
    policy(value).map_err(|e| PyValueError::new_err(e.to_string()))
}
