//! The one error type of the kernels, and the slice-length checks that
//! produce it.

/// Why a kernel refused to run.
///
/// A kernel checks everything before touching memory: slice lengths against
/// the shape, the shape against `usize` overflow, and the tactic's parameters
/// (a tactic may come from a cache file, so `tile_m: 0` must be an error, not
/// a hang or a panic).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// A slice does not have the length the shape requires.
    #[error("{op}: {what} has {got} elements, expected {formula} = {expected}")]
    Length {
        /// The op, e.g. `gemm`.
        op: &'static str,
        /// Which slice, e.g. `A`.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length the shape requires.
        expected: usize,
        /// How the expected length is derived, e.g. `m*k`.
        formula: &'static str,
    },
    /// The shape's element count does not fit in `usize`.
    #[error("{op}: {formula} overflows usize; the shape is too large")]
    ShapeOverflow {
        /// The op.
        op: &'static str,
        /// The product that overflowed, e.g. `m*k`.
        formula: &'static str,
    },
    /// The tactic's parameters are unusable (e.g. a zero tile size read
    /// from a hand-edited cache file).
    #[error("{op}: tactic {tactic} is invalid: {reason}")]
    InvalidTactic {
        /// The op.
        op: &'static str,
        /// The tactic, in its short display form.
        tactic: String,
        /// What is wrong and what would be accepted.
        reason: String,
    },
    /// A scalar argument is out of range (e.g. a negative epsilon).
    #[error("{op}: {what}")]
    InvalidArgument {
        /// The op.
        op: &'static str,
        /// What is wrong and what would be accepted.
        what: String,
    },
    /// A worker thread of a threaded tactic could not be started; the
    /// output is incomplete.
    #[error("{op}: could not start a worker thread")]
    Spawn {
        /// The op.
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// `a*b` or a [`KernelError::ShapeOverflow`].
pub(crate) fn product(
    op: &'static str,
    formula: &'static str,
    a: usize,
    b: usize,
) -> Result<usize, KernelError> {
    a.checked_mul(b).ok_or(KernelError::ShapeOverflow { op, formula })
}

/// Checks that `slice_len == expected`, naming the slice in the error.
pub(crate) fn check_len(
    op: &'static str,
    what: &'static str,
    slice_len: usize,
    expected: usize,
    formula: &'static str,
) -> Result<(), KernelError> {
    if slice_len == expected {
        Ok(())
    } else {
        Err(KernelError::Length { op, what, got: slice_len, expected, formula })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_message_names_slice_formula_and_numbers() {
        let e = check_len("gemm", "A", 10, 12, "m*k").unwrap_err();
        assert_eq!(e.to_string(), "gemm: A has 10 elements, expected m*k = 12");
    }

    #[test]
    fn overflow_is_an_error() {
        let e = product("gemm", "m*k", usize::MAX, 2).unwrap_err();
        assert!(e.to_string().contains("m*k overflows"), "{e}");
        assert_eq!(product("gemm", "m*k", 3, 4).unwrap(), 12);
    }
}
