//! Softmax over each row of a `rows×cols` row-major f32 matrix:
//! `out[r][j] = exp(x[r][j] - max_r) / Σ_j exp(x[r][j] - max_r)`.
//! `rows` is dynamic (tokens), `cols` fixed.
//!
//! Tactics differ in how many sweeps over a row they make and how many
//! `exp` they compute, plus a threaded variant over rows.
//!
//! ```
//! use ranktune_kernels::softmax::{self, SoftmaxTactic};
//! let x = [0.0, 0.0, 1.0, 1.0];
//! let mut out = [0.0; 4];
//! softmax::run(&SoftmaxTactic::TwoPass, &x, &mut out, 2, 2)?;
//! assert_eq!(out, [0.5; 4]);
//! # Ok::<(), ranktune_kernels::KernelError>(())
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::{check_len, product};
use super::parallel::for_row_slabs;
use super::KernelError;

const OP: &str = "softmax";

/// Suggested fixed `cols` for tuning (an attention row / small vocabulary).
pub const DEFAULT_COLS: usize = 4096;
/// Suggested `cols` for quick runs (tests, demos).
pub const QUICK_COLS: usize = 256;

/// One configuration of the softmax.
///
/// JSON (externally tagged, snake_case): `"two_pass"`, `"online"`,
/// `{"chunked":{"chunk":256}}`, `{"threaded":{"threads":2}}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SoftmaxTactic {
    /// One sweep for the maximum, one for `exp` and the sum (stored in
    /// `out`), one to scale `out`. One `exp` per element.
    TwoPass,
    /// One sweep keeping a running maximum and a rescaled running sum
    /// (online softmax), then one sweep writing `exp(x - max) / sum`.
    /// Reads `x` twice and never reads `out`, but computes `exp` twice per
    /// element.
    Online,
    /// Per chunk of `chunk` columns: the chunk's maximum, `exp` against it
    /// into `out`, and its sum merged online into the row's; then one sweep
    /// scales each chunk by `exp(chunk_max - max) / sum`. Two sweeps over
    /// the row with one `exp` per element.
    Chunked {
        /// Columns per chunk, at least 1.
        chunk: u16,
    },
    /// `TwoPass` on `threads` slabs of rows, one per scoped thread.
    Threaded {
        /// Number of threads, at least 1.
        threads: u8,
    },
}

impl fmt::Display for SoftmaxTactic {
    /// Short names for tables: `two-pass`, `online`, `chunked-256`,
    /// `threaded-2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SoftmaxTactic::TwoPass => f.write_str("two-pass"),
            SoftmaxTactic::Online => f.write_str("online"),
            SoftmaxTactic::Chunked { chunk } => write!(f, "chunked-{chunk}"),
            SoftmaxTactic::Threaded { threads } => write!(f, "threaded-{threads}"),
        }
    }
}

/// Every tactic, in canonical order. The first, `two-pass`, is the
/// fallback: valid and reasonable for any shape.
pub fn tactics() -> Vec<SoftmaxTactic> {
    let mut all = vec![SoftmaxTactic::TwoPass, SoftmaxTactic::Online];
    all.extend([64, 256, 1024].map(|chunk| SoftmaxTactic::Chunked { chunk }));
    all.extend([2, 4].map(|threads| SoftmaxTactic::Threaded { threads }));
    all
}

/// Whether `t` is worth measuring for `rows×cols`: a chunk more than twice
/// the row is the same as a smaller one, and more threads than rows leave
/// threads idle. Tactics with zero parameters are never valid. The fallback
/// is valid for every shape.
pub fn valid_for(t: &SoftmaxTactic, rows: usize, cols: usize) -> bool {
    match *t {
        SoftmaxTactic::TwoPass | SoftmaxTactic::Online => true,
        SoftmaxTactic::Chunked { chunk } => chunk != 0 && usize::from(chunk) <= cols.max(1) * 2,
        SoftmaxTactic::Threaded { threads } => threads >= 2 && usize::from(threads) <= rows,
    }
}

/// Writes the row-wise softmax of `x` (`rows×cols`) into `out`.
///
/// Errors (never panics) when a slice length does not match the shape, the
/// shape overflows, the tactic has a zero parameter, or a worker thread
/// cannot be started. Empty shapes are fine. `-inf` entries (masks) get
/// probability 0; a row that is all `-inf` is all `NaN` (as in the f64
/// reference); a row holding `+inf` or `NaN` gets `NaN`s (which positions
/// depends on the tactic).
pub fn run(
    t: &SoftmaxTactic,
    x: &[f32],
    out: &mut [f32],
    rows: usize,
    cols: usize,
) -> Result<(), KernelError> {
    check_shapes(x, out, rows, cols)?;
    check_tactic(t)?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let rows_of = |x: &[f32], out: &mut [f32], row: fn(&[f32], &mut [f32])| {
        for (x_row, out_row) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
            row(x_row, out_row);
        }
    };
    match *t {
        SoftmaxTactic::TwoPass => rows_of(x, out, two_pass_row),
        SoftmaxTactic::Online => rows_of(x, out, online_row),
        SoftmaxTactic::Chunked { chunk } => {
            let chunk = usize::from(chunk);
            let mut chunk_max = vec![0.0f32; cols.div_ceil(chunk)];
            for (x_row, out_row) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
                chunked_row(x_row, out_row, chunk, &mut chunk_max);
            }
        }
        SoftmaxTactic::Threaded { threads } => {
            return for_row_slabs(OP, threads.into(), rows, cols, out, |first_row, slab| {
                let x_rows = &x[first_row * cols..first_row * cols + slab.len()];
                rows_of(x_rows, slab, two_pass_row);
            });
        }
    }
    Ok(())
}

/// Row-wise softmax in f64, for tests. Checks lengths like [`run`].
pub fn reference(x: &[f32], out: &mut [f32], rows: usize, cols: usize) -> Result<(), KernelError> {
    check_shapes(x, out, rows, cols)?;
    if cols == 0 {
        return Ok(());
    }
    for (x_row, out_row) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
        let max = x_row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v.into()));
        let sum: f64 = x_row.iter().map(|&v| (f64::from(v) - max).exp()).sum();
        for (o, &v) in out_row.iter_mut().zip(x_row) {
            *o = ((f64::from(v) - max).exp() / sum) as f32;
        }
    }
    Ok(())
}

fn check_shapes(x: &[f32], out: &[f32], rows: usize, cols: usize) -> Result<(), KernelError> {
    let len = product(OP, "rows*cols", rows, cols)?;
    check_len(OP, "x", x.len(), len, "rows*cols")?;
    check_len(OP, "out", out.len(), len, "rows*cols")
}

fn check_tactic(t: &SoftmaxTactic) -> Result<(), KernelError> {
    let reason = match *t {
        SoftmaxTactic::Chunked { chunk: 0 } => "chunk must be at least 1",
        SoftmaxTactic::Threaded { threads: 0 } => "threads must be at least 1",
        _ => return Ok(()),
    };
    Err(KernelError::InvalidTactic { op: OP, tactic: t.to_string(), reason: reason.to_string() })
}

fn row_max(x: &[f32]) -> f32 {
    x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

fn scale(out: &mut [f32], factor: f32) {
    for o in out {
        *o *= factor;
    }
}

fn two_pass_row(x: &[f32], out: &mut [f32]) {
    let max = row_max(x);
    let mut sum = 0.0f32;
    for (o, &v) in out.iter_mut().zip(x) {
        let e = (v - max).exp();
        *o = e;
        sum += e;
    }
    scale(out, 1.0 / sum);
}

fn online_row(x: &[f32], out: &mut [f32]) {
    let mut max = f32::NEG_INFINITY;
    let mut sum = 0.0f32;
    for &v in x {
        if v > max {
            // Rescale the sum so far to the new maximum; exp(-inf) = 0
            // handles the first element.
            sum = sum * (max - v).exp() + 1.0;
            max = v;
        } else if v != f32::NEG_INFINITY {
            // A masked element (-inf) adds exp(-inf) = 0; skipping it also
            // avoids exp(-inf - -inf) = NaN while the maximum is still -inf.
            sum += (v - max).exp();
        }
    }
    let inv = 1.0 / sum;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v - max).exp() * inv;
    }
}

/// `chunk_max` has one slot per chunk of the row.
fn chunked_row(x: &[f32], out: &mut [f32], chunk: usize, chunk_max: &mut [f32]) {
    let mut max = f32::NEG_INFINITY;
    let mut sum = 0.0f32;
    let chunks = x.chunks(chunk).zip(out.chunks_mut(chunk));
    for ((x_c, out_c), slot) in chunks.zip(chunk_max.iter_mut()) {
        let c_max = row_max(x_c);
        let mut c_sum = 0.0f32;
        for (o, &v) in out_c.iter_mut().zip(x_c) {
            let e = (v - c_max).exp();
            *o = e;
            c_sum += e;
        }
        *slot = c_max;
        if c_max > max {
            sum = sum * (max - c_max).exp() + c_sum;
            max = c_max;
        } else if c_max != f32::NEG_INFINITY {
            sum += c_sum * (c_max - max).exp();
        }
    }
    let inv = 1.0 / sum;
    for (out_c, &c_max) in out.chunks_mut(chunk).zip(chunk_max.iter()) {
        if c_max == f32::NEG_INFINITY {
            // A fully masked chunk holds exp(-inf - -inf) = NaN: its
            // probabilities are 0, unless the whole row is masked (NaN, as
            // in the other tactics).
            out_c.fill(if max == f32::NEG_INFINITY { f32::NAN } else { 0.0 });
        } else {
            scale(out_c, (c_max - max).exp() * inv);
        }
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
