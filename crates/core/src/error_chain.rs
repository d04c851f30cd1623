//! Printing an error with its causes on one line.
//!
//! Library errors keep the OS error (or other cause) as their `source()`
//! instead of repeating it in their message; wherever the library itself
//! logs an error, it prints the whole chain with [`Chain`] so no cause is
//! lost.

use std::error::Error;
use std::fmt;

/// Displays an error followed by each of its causes, `": "`-separated.
///
/// ```
/// use ranktune_core::error_chain::Chain;
/// #[derive(Debug, thiserror::Error)]
/// #[error("writing c.json")]
/// struct WriteError(#[source] std::io::Error);
///
/// let err = WriteError(std::io::Error::other("disk full"));
/// assert_eq!(Chain(&err).to_string(), "writing c.json: disk full");
/// ```
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}
