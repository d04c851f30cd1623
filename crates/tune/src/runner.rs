//! What the tuner tunes: the [`Runner`] trait, the inputs an op runs on
//! ([`TuneInputs`]), and stable fingerprints.
//!
//! This module owns the contract between the tuner and implementations. It
//! must never hash with Rust's randomized `Hash`: fingerprints and checksums
//! end up in cache files and must be equal in every process and every run.

use serde::Serialize;

/// Why one run of a tactic failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RunError(pub String);

impl From<String> for RunError {
    fn from(s: String) -> Self {
        RunError(s)
    }
}

impl From<&str> for RunError {
    fn from(s: &str) -> Self {
        RunError(s.to_string())
    }
}

/// The inputs of one op call: their shapes, and how to make synthetic ones.
///
/// `shape` must not allocate: it is called on the hot path.
pub trait TuneInputs: Sized {
    /// Number of inputs (tensors) of the op.
    fn num_inputs(&self) -> usize;
    /// Shape of input `input` (outermost dim first).
    fn shape(&self, input: usize) -> &[usize];
    /// Builds inputs of exactly these shapes for measuring. Index-like inputs
    /// (ids, offsets) must be valid for the shapes, so every tactic can run.
    fn synthetic(shapes: &[Vec<u64>]) -> Result<Self, RunError>;
}

/// One implementation family of an op, with its tactics.
///
/// Tactics are identified by their position in [`Runner::tactics`], which is
/// the runner's canonical order; the tactic values themselves (any serde
/// value) are what the cache stores. Runner 0's tactic 0 is the op's
/// fallback and must be valid for every shape.
pub trait Runner<I>: Send + Sync {
    /// Short name, e.g. `blocked`.
    fn name(&self) -> &str;
    /// Stable fingerprint of the runner's parameters (see [`fingerprint_of`]).
    /// Two runners with different parameters must have different fingerprints.
    fn fingerprint(&self) -> String;
    /// Every tactic (a configuration, as a value), in canonical order; a
    /// tactic's position in this list is its *tactic index*.
    fn tactics(&self) -> Vec<serde_json::Value>;
    /// Whether the tactic at index `tactic_index` can run on inputs of these shapes.
    fn valid(&self, tactic_index: usize, shapes: &[Vec<u64>]) -> bool;
    /// Runs the tactic at index `tactic_index` on `io` once.
    fn run(&self, tactic_index: usize, io: &mut I) -> Result<(), RunError>;
    /// Checks what the tactic at `tactic_index` left in `io` after it ran:
    /// part of the check of a cached tactic on its first use in a process,
    /// for ops built [`with_validation`](crate::Op::with_validation). An
    /// `Err` fails the tactic (it is replaced by the fallback and put on the
    /// blocklist). The default accepts.
    fn validate(&self, tactic_index: usize, io: &I) -> Result<(), RunError> {
        let _ = (tactic_index, io);
        Ok(())
    }
}

pub use ranktune_core::hash::StableHasher;

/// A stable fingerprint of a runner's parameters: the FNV-1a hash of their
/// JSON form, as 16 hex digits. Equal in every process and every run.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Params { tile: u32 }
/// let a = ranktune_tune::fingerprint_of(&Params { tile: 32 });
/// let b = ranktune_tune::fingerprint_of(&Params { tile: 64 });
/// assert_ne!(a, b);
/// assert_eq!(a, ranktune_tune::fingerprint_of(&Params { tile: 32 }));
/// ```
pub fn fingerprint_of<T: Serialize + ?Sized>(params: &T) -> String {
    let mut h = StableHasher::default();
    match serde_json::to_vec(params) {
        Ok(bytes) => h.write(&bytes),
        // Serializing plain parameter structs cannot fail; hash the error text
        // so the result is still stable.
        Err(e) => h.write_str(&e.to_string()),
    }
    h.hex()
}
