//! The exception family: `ranktune.Error` and the subclasses callers catch
//! one by one. Messages are the Rust errors' full chains, as the CLI prints
//! them. Owns only the mapping; never decides what is an error.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use ranktune_cache::CacheError;
use ranktune_core::error_chain::Chain;

create_exception!(ranktune, Error, PyException, "Base class of every error ranktune raises.");
create_exception!(
    ranktune,
    LockTimeout,
    Error,
    "A cache's lock could not be taken in time (RANKTUNE_LOCK_TIMEOUT)."
);
create_exception!(
    ranktune,
    CorruptFile,
    Error,
    "A file does not parse (truncated, not JSON, not UTF-8, ...)."
);
create_exception!(
    ranktune,
    UnsupportedFile,
    Error,
    "A well-formed file this version must not read or rewrite (another format or a future version)."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("LockTimeout", py.get_type::<LockTimeout>())?;
    m.add("CorruptFile", py.get_type::<CorruptFile>())?;
    m.add("UnsupportedFile", py.get_type::<UnsupportedFile>())?;
    Ok(())
}

/// Any library error as `ranktune.Error` with its whole chain as message.
pub(crate) fn to_py(e: impl std::error::Error + 'static) -> PyErr {
    Error::new_err(Chain(&e).to_string())
}

/// A cache error, with `context` in front as the CLI's `with_context` puts
/// it, mapped to the subclass a caller can catch.
pub(crate) fn cache(context: &str, e: CacheError) -> PyErr {
    let msg = if context.is_empty() {
        Chain(&e).to_string()
    } else {
        format!("{context}: {}", Chain(&e))
    };
    match e {
        CacheError::LockTimeout { .. } => LockTimeout::new_err(msg),
        CacheError::Corrupt { .. } => CorruptFile::new_err(msg),
        CacheError::Unsupported { .. } => UnsupportedFile::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// A plain `ranktune.Error` with `msg`.
pub(crate) fn msg(msg: impl Into<String>) -> PyErr {
    Error::new_err(msg.into())
}
