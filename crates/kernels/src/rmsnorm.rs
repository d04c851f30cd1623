//! RMSNorm over each row of a `rows×cols` row-major f32 matrix:
//! `out[r][j] = x[r][j] / sqrt(mean_j(x[r][j]²) + eps) * weight[j]`.
//! `rows` is dynamic (tokens), `cols` (the hidden size) fixed.
//!
//! Tactics differ in how the sum of squares is accumulated (one serial
//! accumulator the compiler cannot vectorize, or several independent lanes
//! it can) and in threading over rows.
//!
//! ```
//! use ranktune_kernels::rmsnorm::{self, RmsNormTactic};
//! let x = [3.0, -3.0];
//! let w = [1.0, 2.0];
//! let mut out = [0.0; 2];
//! rmsnorm::run(&RmsNormTactic::Scalar, &x, &w, &mut out, 1, 2, 0.0)?;
//! assert_eq!(out, [1.0, -2.0]);
//! # Ok::<(), ranktune_kernels::KernelError>(())
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::{check_len, product};
use super::parallel::for_row_slabs;
use super::KernelError;

const OP: &str = "rmsnorm";

/// Suggested fixed `cols` (hidden size) for tuning.
pub const DEFAULT_COLS: usize = 4096;
/// Suggested `cols` for quick runs (tests, demos).
pub const QUICK_COLS: usize = 256;

/// Lane counts [`RmsNormTactic::Chunked`] supports.
pub const LANES: [u8; 4] = [4, 8, 16, 32];

/// One configuration of the RMSNorm.
///
/// JSON (externally tagged, snake_case): `"scalar"`,
/// `{"chunked":{"lanes":8}}`, `{"threaded":{"threads":2}}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RmsNormTactic {
    /// One serial f32 accumulator for the sum of squares (f32 addition is
    /// not associative, so the compiler keeps it scalar).
    Scalar,
    /// `lanes` independent accumulators over `chunks_exact(lanes)`, summed
    /// at the end: vectorizable. `lanes` is one of [`LANES`].
    Chunked {
        /// Accumulators; one of 4, 8, 16, 32.
        lanes: u8,
    },
    /// `Chunked { lanes: 16 }` on `threads` slabs of rows, one per scoped
    /// thread.
    Threaded {
        /// Number of threads, at least 1.
        threads: u8,
    },
}

impl fmt::Display for RmsNormTactic {
    /// Short names for tables: `scalar`, `chunked-8`, `threaded-2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RmsNormTactic::Scalar => f.write_str("scalar"),
            RmsNormTactic::Chunked { lanes } => write!(f, "chunked-{lanes}"),
            RmsNormTactic::Threaded { threads } => write!(f, "threaded-{threads}"),
        }
    }
}

/// Every tactic, in canonical order. The first, `scalar`, is the fallback:
/// valid for any shape.
pub fn tactics() -> Vec<RmsNormTactic> {
    let mut all = vec![RmsNormTactic::Scalar];
    all.extend(LANES.map(|lanes| RmsNormTactic::Chunked { lanes }));
    all.extend([2, 4].map(|threads| RmsNormTactic::Threaded { threads }));
    all
}

/// Whether `t` is worth measuring for `rows×cols`: more lanes than columns
/// leave lanes empty, more threads than rows leave threads idle; unsupported
/// parameters are never valid. The fallback is valid for every shape.
pub fn valid_for(t: &RmsNormTactic, rows: usize, cols: usize) -> bool {
    match *t {
        RmsNormTactic::Scalar => true,
        RmsNormTactic::Chunked { lanes } => LANES.contains(&lanes) && usize::from(lanes) <= cols,
        RmsNormTactic::Threaded { threads } => threads >= 2 && usize::from(threads) <= rows,
    }
}

/// Writes the RMSNorm of each row of `x` (`rows×cols`), scaled by `weight`
/// (`cols`), into `out`.
///
/// Errors (never panics) when a slice length does not match the shape, the
/// shape overflows, `eps` is negative or not finite, the tactic's
/// parameters are unsupported, or a worker thread cannot be started. Empty
/// shapes are fine. A row of zeros with `eps = 0` gives `NaN`s (0/0).
#[allow(clippy::too_many_arguments)]
pub fn run(
    t: &RmsNormTactic,
    x: &[f32],
    weight: &[f32],
    out: &mut [f32],
    rows: usize,
    cols: usize,
    eps: f32,
) -> Result<(), KernelError> {
    check_args(x, weight, out, rows, cols, eps)?;
    check_tactic(t)?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let rows_of = |x: &[f32], out: &mut [f32], sum_sq: fn(&[f32]) -> f32| {
        for (x_row, out_row) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
            normalize_row(x_row, weight, out_row, sum_sq(x_row), eps);
        }
    };
    match *t {
        RmsNormTactic::Scalar => rows_of(x, out, sum_sq_scalar),
        RmsNormTactic::Chunked { lanes } => rows_of(x, out, lanes_fn(lanes)),
        RmsNormTactic::Threaded { threads } => {
            return for_row_slabs(OP, threads.into(), rows, cols, out, |first_row, slab| {
                let x_rows = &x[first_row * cols..first_row * cols + slab.len()];
                rows_of(x_rows, slab, sum_sq_lanes::<16>);
            });
        }
    }
    Ok(())
}

/// RMSNorm in f64, for tests. Checks arguments like [`run`].
pub fn reference(
    x: &[f32],
    weight: &[f32],
    out: &mut [f32],
    rows: usize,
    cols: usize,
    eps: f32,
) -> Result<(), KernelError> {
    check_args(x, weight, out, rows, cols, eps)?;
    if cols == 0 {
        return Ok(());
    }
    for (x_row, out_row) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
        let sum_sq: f64 = x_row.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let inv = 1.0 / (sum_sq / cols as f64 + f64::from(eps)).sqrt();
        for ((o, &v), &w) in out_row.iter_mut().zip(x_row).zip(weight) {
            *o = (f64::from(v) * inv * f64::from(w)) as f32;
        }
    }
    Ok(())
}

fn check_args(
    x: &[f32],
    weight: &[f32],
    out: &[f32],
    rows: usize,
    cols: usize,
    eps: f32,
) -> Result<(), KernelError> {
    let len = product(OP, "rows*cols", rows, cols)?;
    check_len(OP, "x", x.len(), len, "rows*cols")?;
    check_len(OP, "weight", weight.len(), cols, "cols")?;
    check_len(OP, "out", out.len(), len, "rows*cols")?;
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(KernelError::InvalidArgument {
            op: OP,
            what: format!("eps is {eps}; it must be finite and at least 0 (e.g. 1e-6)"),
        });
    }
    Ok(())
}

fn check_tactic(t: &RmsNormTactic) -> Result<(), KernelError> {
    let reason = match *t {
        RmsNormTactic::Chunked { lanes } if !LANES.contains(&lanes) => {
            format!("lanes must be one of {LANES:?}")
        }
        RmsNormTactic::Threaded { threads: 0 } => "threads must be at least 1".to_string(),
        _ => return Ok(()),
    };
    Err(KernelError::InvalidTactic { op: OP, tactic: t.to_string(), reason })
}

/// The accumulator for a supported lane count (checked by `check_tactic`).
fn lanes_fn(lanes: u8) -> fn(&[f32]) -> f32 {
    match lanes {
        4 => sum_sq_lanes::<4>,
        8 => sum_sq_lanes::<8>,
        16 => sum_sq_lanes::<16>,
        _ => sum_sq_lanes::<32>,
    }
}

fn sum_sq_scalar(x: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for &v in x {
        sum += v * v;
    }
    sum
}

fn sum_sq_lanes<const L: usize>(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; L];
    let chunks = x.chunks_exact(L);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            *a += v * v;
        }
    }
    let tail_sum: f32 = tail.iter().map(|&v| v * v).sum();
    acc.iter().sum::<f32>() + tail_sum
}

fn normalize_row(x: &[f32], weight: &[f32], out: &mut [f32], sum_sq: f32, eps: f32) {
    let inv = 1.0 / (sum_sq / x.len() as f32 + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = v * inv * w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_tactic_is_fallback_valid_everywhere() {
        for (rows, cols) in [(0, 0), (1, 1), (1, 4096), (8192, 4096)] {
            assert!(valid_for(&tactics()[0], rows, cols));
        }
    }
}
