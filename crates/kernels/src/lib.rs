//! Real CPU operators with several tactics each, so the tuner has something
//! real to tune on any machine.
//!
//! ```
//! use ranktune_kernels::gemm::{self, GemmTactic};
//!
//! // C (2×2) = A (2×3) · B (3×2), row-major, with a cache-blocked tactic.
//! let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let b = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
//! let mut c = [0.0f32; 4];
//! let tactic = GemmTactic::Blocked { tile_m: 2, tile_n: 2, tile_k: 2 };
//! gemm::run(&tactic, &a, &b, &mut c, 2, 2, 3).unwrap();
//! assert_eq!(c, [58.0, 64.0, 139.0, 154.0]);
//! // Every tactic computes the same product; the first is the fallback.
//! assert_eq!(gemm::tactics()[0].to_string(), "naive-ikj");
//! ```
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
//! [`rmsnorm`] over rows (rows dynamic). [`crashy`] is a test op whose
//! tactics crash on purpose, built only with the `crash-tactics` feature.
//!
//! The op modules own the arithmetic only. They must never time anything,
//! log on the hot path, read the environment, or know about the tuner or the
//! cache: [`runners`] adapts them to the tuner as [`Op`](ranktune_tune::Op)s.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod crashy;
pub mod gemm;
pub mod rmsnorm;
pub mod runners;
pub mod softmax;

mod error;
mod parallel;

pub use error::KernelError;
