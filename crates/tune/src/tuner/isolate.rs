//! Panic isolation: a runner that panics while validating or running fails
//! that candidate, never the tuner or the caller's job.
//!
//! Owns turning a caught panic into an error message; nothing else.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`, turning a panic into `Err` with its message.
pub(super) fn isolate<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| panic_message(&*p))
}

/// The text of a panic payload (`&str` or `String`), or a placeholder.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}
