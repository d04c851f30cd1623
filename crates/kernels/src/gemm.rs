//! f32 GEMM `C = A·B`: `A` is `m×k`, `B` is `k×n`, `C` is `m×n`, all
//! row-major and contiguous. Like a linear layer, `m` is the dynamic token
//! count and `n`, `k` are fixed.
//!
//! Tactics: naive loops in three orders, cache-blocked loops with several
//! tile sizes, the `matrixmultiply` crate as the "vendor library", and the
//! library split over threads by rows of `C`.
//!
//! ```
//! use ranktune_kernels::gemm::{self, GemmTactic};
//! let (m, n, k) = (2, 2, 3);
//! let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
//! let mut c = [0.0; 4];
//! gemm::run(&GemmTactic::Library, &a, &b, &mut c, m, n, k)?;
//! assert_eq!(c, [4.0, 5.0, 10.0, 11.0]);
//! # Ok::<(), ranktune_kernels::KernelError>(())
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::{check_len, product};
use super::parallel::for_row_slabs;
use super::KernelError;

const OP: &str = "gemm";

/// Suggested fixed `n` (output features) for tuning: a linear layer of 512.
pub const DEFAULT_N: usize = 512;
/// Suggested fixed `k` (input features) for tuning.
pub const DEFAULT_K: usize = 512;
/// Suggested `n` for quick runs (tests, demos): seconds for a whole tuning job.
pub const QUICK_N: usize = 64;
/// Suggested `k` for quick runs.
pub const QUICK_K: usize = 64;

/// Loop order of the naive triple loop (`i` over `m`, `j` over `n`, `p`
/// over `k`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopOrder {
    /// Dot product per element of `C`; walks `B` down its columns (strided).
    Ijk,
    /// Row of `C` += `A[i][p]` × row of `B`: contiguous, vectorizable.
    Ikj,
    /// For each row of `B`, update every row of `C`: streams all of `C` `k`
    /// times, good only while `C` fits in cache.
    Kij,
}

/// One configuration of the GEMM.
///
/// JSON (externally tagged, snake_case):
/// `{"naive":{"order":"ikj"}}`, `{"blocked":{"tile_m":32,"tile_n":128,"tile_k":128}}`,
/// `"library"`, `{"threaded":{"threads":2}}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GemmTactic {
    /// The plain triple loop in the given order.
    Naive {
        /// Loop order.
        order: LoopOrder,
    },
    /// Cache-blocked loops: tiles of `tile_m×tile_k` of `A` and
    /// `tile_k×tile_n` of `B` update a `tile_m×tile_n` tile of `C`.
    Blocked {
        /// Rows of `A`/`C` per tile.
        tile_m: u16,
        /// Columns of `B`/`C` per tile.
        tile_n: u16,
        /// Depth per tile.
        tile_k: u16,
    },
    /// `matrixmultiply::sgemm` (packing + SIMD micro-kernels, runtime CPU
    /// feature detection): the "vendor" choice.
    Library,
    /// `matrixmultiply::sgemm` on `threads` slabs of rows of `C`, one per
    /// scoped thread (the calling thread takes the first).
    Threaded {
        /// Number of threads, at least 1.
        threads: u8,
    },
}

impl fmt::Display for GemmTactic {
    /// Short names for tables: `naive-ikj`, `blocked-32x128x128`, `library`,
    /// `threaded-2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GemmTactic::Naive { order } => {
                let order = match order {
                    LoopOrder::Ijk => "ijk",
                    LoopOrder::Ikj => "ikj",
                    LoopOrder::Kij => "kij",
                };
                write!(f, "naive-{order}")
            }
            GemmTactic::Blocked { tile_m, tile_n, tile_k } => {
                write!(f, "blocked-{tile_m}x{tile_n}x{tile_k}")
            }
            GemmTactic::Library => f.write_str("library"),
            GemmTactic::Threaded { threads } => write!(f, "threaded-{threads}"),
        }
    }
}

/// The tile shapes of [`tactics`], as `(tile_m, tile_n, tile_k)`.
const TILES: [(u16, u16, u16); 6] =
    [(4, 64, 64), (8, 128, 128), (16, 256, 64), (32, 128, 128), (64, 64, 256), (128, 256, 128)];

/// Every tactic, in canonical order. The first, `naive-ikj`, is the
/// fallback: valid and reasonable for any shape.
pub fn tactics() -> Vec<GemmTactic> {
    let mut all = vec![
        GemmTactic::Naive { order: LoopOrder::Ikj },
        GemmTactic::Naive { order: LoopOrder::Ijk },
        GemmTactic::Naive { order: LoopOrder::Kij },
    ];
    all.extend(TILES.iter().map(|&(tile_m, tile_n, tile_k)| GemmTactic::Blocked {
        tile_m,
        tile_n,
        tile_k,
    }));
    all.push(GemmTactic::Library);
    all.extend([2, 4].map(|threads| GemmTactic::Threaded { threads }));
    all
}

/// Whether `t` is worth measuring for an `m×n×k` problem.
///
/// Every tactic computes the right answer for every shape; this only rules
/// out wasteful ones: a tile that is more than twice the problem in some
/// dimension (a smaller tile does the same work), `naive-ijk` beyond
/// 2^24 multiply-adds (its strided walk over `B` makes it orders of
/// magnitude slower; measuring it would dominate tuning time), and more
/// threads than rows of `C`. Tactics with zero parameters are never valid.
/// The fallback is valid for every shape.
pub fn valid_for(t: &GemmTactic, m: usize, n: usize, k: usize) -> bool {
    let fits = |tile: u16, dim: usize| tile != 0 && usize::from(tile) <= dim.max(1) * 2;
    match *t {
        GemmTactic::Naive { order: LoopOrder::Ijk } => {
            m.checked_mul(n).and_then(|mn| mn.checked_mul(k)).is_some_and(|work| work <= 1 << 24)
        }
        GemmTactic::Naive { .. } | GemmTactic::Library => true,
        GemmTactic::Blocked { tile_m, tile_n, tile_k } => {
            fits(tile_m, m) && fits(tile_n, n) && fits(tile_k, k)
        }
        GemmTactic::Threaded { threads } => threads >= 2 && usize::from(threads) <= m,
    }
}

/// Computes `C = A·B` with tactic `t`.
///
/// Errors (never panics) when a slice length does not match the shape, the
/// shape overflows `usize`, the tactic has a zero parameter, or a worker
/// thread cannot be started. Empty shapes (`m`, `n` or `k` zero) are fine:
/// `C` is all zeros (or empty).
pub fn run(
    t: &GemmTactic,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    m: usize,
    n: usize,
    k: usize,
) -> Result<(), KernelError> {
    check_shapes(a, b, c, m, n, k)?;
    check_tactic(t)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        c.fill(0.0);
        return Ok(());
    }
    match *t {
        GemmTactic::Naive { order } => match order {
            LoopOrder::Ijk => naive_ijk(a, b, c, n, k),
            LoopOrder::Ikj => naive_ikj(a, b, c, n, k),
            LoopOrder::Kij => naive_kij(a, b, c, n, k),
        },
        GemmTactic::Blocked { tile_m, tile_n, tile_k } => {
            blocked(a, b, c, (m, n, k), (tile_m.into(), tile_n.into(), tile_k.into()))
        }
        GemmTactic::Library => library(a, b, c, m, n, k),
        GemmTactic::Threaded { threads } => {
            return for_row_slabs(OP, threads.into(), m, n, c, |first_row, slab| {
                let rows = slab.len() / n;
                let a_rows = &a[first_row * k..(first_row + rows) * k];
                library(a_rows, b, slab, rows, n, k);
            });
        }
    }
    Ok(())
}

/// `C = A·B` accumulating in f64, for tests. Checks lengths like [`run`].
pub fn reference(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    m: usize,
    n: usize,
    k: usize,
) -> Result<(), KernelError> {
    check_shapes(a, b, c, m, n, k)?;
    for i in 0..m {
        for j in 0..n {
            let mut sum = 0.0f64;
            for p in 0..k {
                sum += f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
            }
            c[i * n + j] = sum as f32;
        }
    }
    Ok(())
}

fn check_shapes(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    m: usize,
    n: usize,
    k: usize,
) -> Result<(), KernelError> {
    check_len(OP, "A", a.len(), product(OP, "m*k", m, k)?, "m*k")?;
    check_len(OP, "B", b.len(), product(OP, "k*n", k, n)?, "k*n")?;
    check_len(OP, "C", c.len(), product(OP, "m*n", m, n)?, "m*n")
}

fn check_tactic(t: &GemmTactic) -> Result<(), KernelError> {
    let reason = match *t {
        GemmTactic::Blocked { tile_m, tile_n, tile_k }
            if tile_m == 0 || tile_n == 0 || tile_k == 0 =>
        {
            "tile sizes must be at least 1"
        }
        GemmTactic::Threaded { threads: 0 } => "threads must be at least 1",
        _ => return Ok(()),
    };
    Err(KernelError::InvalidTactic { op: OP, tactic: t.to_string(), reason: reason.to_string() })
}

/// `c += alpha * b`, element-wise; the compiler vectorizes it.
#[inline(always)]
fn axpy(c: &mut [f32], alpha: f32, b: &[f32]) {
    for (cv, &bv) in c.iter_mut().zip(b) {
        *cv += alpha * bv;
    }
}

// The kernels below assume checked shapes with m, n, k > 0.

fn naive_ijk(a: &[f32], b: &[f32], c: &mut [f32], n: usize, k: usize) {
    for (a_row, c_row) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
        for (j, cv) in c_row.iter_mut().enumerate() {
            let column = b[j..].iter().step_by(n);
            *cv = a_row.iter().zip(column).map(|(&x, &y)| x * y).sum();
        }
    }
}

fn naive_ikj(a: &[f32], b: &[f32], c: &mut [f32], n: usize, k: usize) {
    for (a_row, c_row) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
        c_row.fill(0.0);
        for (&a_ip, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
            axpy(c_row, a_ip, b_row);
        }
    }
}

fn naive_kij(a: &[f32], b: &[f32], c: &mut [f32], n: usize, k: usize) {
    c.fill(0.0);
    for (p, b_row) in b.chunks_exact(n).enumerate() {
        for (a_row, c_row) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
            axpy(c_row, a_row[p], b_row);
        }
    }
}

/// Tiles: for each `tile_m` slab of rows, for each `tile_n` slab of
/// columns, the `tile_m×tile_n` block of `C` accumulates over `tile_k`
/// deep blocks; inside a block the loop is `ikj` on contiguous segments.
fn blocked(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    (m, n, k): (usize, usize, usize),
    (tm, tn, tk): (usize, usize, usize),
) {
    c.fill(0.0);
    for i0 in (0..m).step_by(tm) {
        let i1 = (i0 + tm).min(m);
        let a_slab = &a[i0 * k..i1 * k];
        let c_slab = &mut c[i0 * n..i1 * n];
        for j0 in (0..n).step_by(tn) {
            let j1 = (j0 + tn).min(n);
            for p0 in (0..k).step_by(tk) {
                let p1 = (p0 + tk).min(k);
                let b_block = &b[p0 * n..p1 * n];
                for (a_row, c_row) in a_slab.chunks_exact(k).zip(c_slab.chunks_exact_mut(n)) {
                    let c_seg = &mut c_row[j0..j1];
                    for (&a_ip, b_row) in a_row[p0..p1].iter().zip(b_block.chunks_exact(n)) {
                        axpy(c_seg, a_ip, &b_row[j0..j1]);
                    }
                }
            }
        }
    }
}

/// `matrixmultiply::sgemm` on checked, contiguous row-major slices.
fn library(a: &[f32], b: &[f32], c: &mut [f32], m: usize, n: usize, k: usize) {
    debug_assert!(a.len() == m * k && b.len() == k * n && c.len() == m * n);
    if m == 0 || n == 0 {
        return;
    }
    // Strides of contiguous row-major matrices; every dimension fits in
    // isize because the slices exist.
    let (rsa, rsb, rsc) = (k as isize, n as isize, n as isize);
    // SAFETY: `run` checked a.len() == m*k, b.len() == k*n, c.len() == m*n
    // (and `Threaded` passes matching sub-slices), so with row strides k, n,
    // n and column stride 1 every element sgemm reads or writes lies inside
    // the slices; `c` is a unique borrow, so it aliases neither `a` nor `b`.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa,
            1,
            b.as_ptr(),
            rsb,
            1,
            0.0,
            c.as_mut_ptr(),
            rsc,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_tactic_is_fallback_valid_everywhere() {
        let fallback = tactics()[0];
        for (m, n, k) in [(0, 0, 0), (1, 1, 1), (1, 4096, 4096), (8192, 512, 512)] {
            assert!(valid_for(&fallback, m, n, k));
        }
    }

    #[test]
    fn tactics_are_unique() {
        let all = tactics();
        let set: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(set.len(), all.len());
    }
}
