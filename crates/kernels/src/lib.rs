//! Real CPU operators with several tactics each, so the tuner has something
//! real to tune on any machine.
//!
//! Each op lives in its own module with the same shape of API:
//!
//! - a `…Tactic` enum: every configuration of the op, a plain serde value
//!   (stored in the tuning cache as JSON, see `docs/kernels.md`);
//! - `tactics()`: every tactic in canonical order; the **first one is the
//!   fallback**, correct and reasonable for any shape;
//! - `valid_for(tactic, shape…)`: whether a tactic is worth measuring for a
//!   shape (a tile larger than the problem, or more threads than rows, is
//!   wasteful). Every tactic still computes the right answer on every shape;
//! - `run(tactic, inputs…, outputs…, shape…)`: checks slice lengths and the
//!   tactic's parameters and returns [`KernelError`] instead of panicking;
//! - `reference(…)`: a plain f64-accumulating implementation for tests.
//!
//! Ops: [`gemm`] (f32 `C = A·B`, M dynamic), [`softmax`] over rows and
//! [`rmsnorm`] over rows (rows dynamic).
//!
//! This module owns the arithmetic only. It must never time anything, log on
//! the hot path, read the environment, or know about the tuner or the cache.

pub mod gemm;
pub mod rmsnorm;
pub mod runners;
pub mod softmax;

mod error;
mod parallel;

pub use error::KernelError;
