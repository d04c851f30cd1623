//! Tuner runners for the built-in kernels: GEMM, softmax and RMSNorm as
//! [`Op`]s with their inputs, bucketing configs and synthetic inputs.
//!
//! Each op's tactics are grouped into runners by family (e.g. GEMM's
//! `naive`, `blocked`, `library`, `threaded`), in the kernels' canonical
//! order, so runner 0's tactic 0 is the kernel's fallback. This module only
//! adapts the kernels to the tuner; it must never change their arithmetic.

use super::{gemm, rmsnorm, softmax, KernelError};
use ranktune_tune::{
    fingerprint_of, Constraint, DynamicDim, Op, OpError, RunError, Runner, TuneInputs, TuningConfig,
};
use serde::Serialize;

/// Version of the runner adapters; part of every fingerprint, so changing
/// how a kernel is driven invalidates old entries.
const ADAPTER_VERSION: u32 = 1;

fn dim(shapes: &[Vec<u64>], i: usize, d: usize) -> usize {
    shapes.get(i).and_then(|s| s.get(d)).map_or(0, |&v| usize::try_from(v).unwrap_or(usize::MAX))
}

/// Deterministic pseudo-random values in [-1, 1).
fn fill(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn alloc_len(op: &str, dims: &[usize]) -> Result<usize, RunError> {
    dims.iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= 1 << 30)
        .ok_or_else(|| RunError(format!("{op}: shape {dims:?} is too large for synthetic inputs")))
}

fn kerr(e: KernelError) -> RunError {
    RunError(e.to_string())
}

/// One family of a kernel's tactics.
pub struct KernelRunner<T, I> {
    op: &'static str,
    family: &'static str,
    tactics: Vec<T>,
    valid: fn(&T, &[Vec<u64>]) -> bool,
    run: fn(&T, &mut I) -> Result<(), KernelError>,
}

#[derive(Serialize)]
struct RunnerParams<'a> {
    op: &'a str,
    family: &'a str,
    adapter: u32,
}

impl<T: Serialize + Send + Sync, I> Runner<I> for KernelRunner<T, I> {
    fn name(&self) -> &str {
        self.family
    }
    fn fingerprint(&self) -> String {
        fingerprint_of(&RunnerParams { op: self.op, family: self.family, adapter: ADAPTER_VERSION })
    }
    fn tactics(&self) -> Vec<serde_json::Value> {
        self.tactics
            .iter()
            .map(|t| serde_json::to_value(t).unwrap_or(serde_json::Value::Null))
            .collect()
    }
    fn valid(&self, tactic: usize, shapes: &[Vec<u64>]) -> bool {
        self.tactics.get(tactic).is_some_and(|t| (self.valid)(t, shapes))
    }
    fn run(&self, tactic: usize, io: &mut I) -> Result<(), RunError> {
        match self.tactics.get(tactic) {
            Some(t) => (self.run)(t, io).map_err(kerr),
            None => Err(RunError(format!("{}/{}: no tactic {tactic}", self.op, self.family))),
        }
    }
}

/// Splits `all` into runners by family, keeping first-appearance order.
fn families<T: Serialize + Send + Sync + 'static, I: 'static>(
    op: &'static str,
    all: Vec<T>,
    family: fn(&T) -> &'static str,
    valid: fn(&T, &[Vec<u64>]) -> bool,
    run: fn(&T, &mut I) -> Result<(), KernelError>,
) -> Vec<Box<dyn Runner<I>>> {
    let mut out: Vec<KernelRunner<T, I>> = Vec::new();
    for t in all {
        let f = family(&t);
        match out.iter_mut().find(|r| r.family == f) {
            Some(r) => r.tactics.push(t),
            None => out.push(KernelRunner { op, family: f, tactics: vec![t], valid, run }),
        }
    }
    out.into_iter().map(|r| Box::new(r) as Box<dyn Runner<I>>).collect()
}

fn rows_config(max_tokens: u64) -> TuningConfig {
    TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)])
        .with_constraint(Constraint::same_as(1, 0, 0, 0))
        .with_max_tokens(max_tokens)
}

// ---------------------------------------------------------------- GEMM

/// GEMM inputs: `a` (m×k), `b` (k×n), output `c` (m×n).
#[derive(Clone, Debug)]
pub struct GemmIo {
    /// Left operand, row-major m×k.
    pub a: Vec<f32>,
    /// Right operand, row-major k×n.
    pub b: Vec<f32>,
    /// Output, row-major m×n.
    pub c: Vec<f32>,
    shapes: [[usize; 2]; 2],
}

impl GemmIo {
    /// Zero-free synthetic operands for `m×k · k×n`.
    pub fn new(m: usize, n: usize, k: usize) -> Result<Self, RunError> {
        Ok(GemmIo {
            a: fill(alloc_len("gemm", &[m, k])?, 1),
            b: fill(alloc_len("gemm", &[k, n])?, 2),
            c: vec![0.0; alloc_len("gemm", &[m, n])?],
            shapes: [[m, k], [m, n]],
        })
    }

    /// (m, n, k).
    pub fn mnk(&self) -> (usize, usize, usize) {
        (self.shapes[0][0], self.shapes[1][1], self.shapes[0][1])
    }
}

/// Keys see `a` (m×k) and `c` (m×n); `b` follows from them.
impl TuneInputs for GemmIo {
    fn num_inputs(&self) -> usize {
        2
    }
    fn shape(&self, input: usize) -> &[usize] {
        self.shapes.get(input).map_or(&[], |s| &s[..])
    }
    fn synthetic(shapes: &[Vec<u64>]) -> Result<Self, RunError> {
        GemmIo::new(dim(shapes, 0, 0), dim(shapes, 1, 1), dim(shapes, 0, 1))
    }
}

fn gemm_family(t: &gemm::GemmTactic) -> &'static str {
    match t {
        gemm::GemmTactic::Naive { .. } => "naive",
        gemm::GemmTactic::Blocked { .. } => "blocked",
        gemm::GemmTactic::Library => "library",
        gemm::GemmTactic::Threaded { .. } => "threaded",
    }
}

/// The GEMM op: M (tokens) dynamic, powers of two up to `max_tokens`.
pub fn gemm_op(max_tokens: u64) -> Result<Op<GemmIo>, OpError> {
    let runners = families(
        "gemm",
        gemm::tactics(),
        gemm_family,
        |t, s| gemm::valid_for(t, dim(s, 0, 0), dim(s, 1, 1), dim(s, 0, 1)),
        |t, io: &mut GemmIo| {
            let (m, n, k) = io.mnk();
            gemm::run(t, &io.a, &io.b, &mut io.c, m, n, k)
        },
    );
    Op::new("gemm", runners, rows_config(max_tokens))
}

/// Shapes GEMM is tuned from: `a` 1×k, `c` 1×n (m is bucketed).
pub fn gemm_base(n: usize, k: usize) -> Vec<Vec<u64>> {
    vec![vec![1, k as u64], vec![1, n as u64]]
}

// ---------------------------------------------------------------- softmax

/// Softmax inputs: `x` and output `out`, both rows×cols.
#[derive(Clone, Debug)]
pub struct SoftmaxIo {
    /// Input.
    pub x: Vec<f32>,
    /// Output.
    pub out: Vec<f32>,
    shapes: [[usize; 2]; 2],
}

impl SoftmaxIo {
    /// Synthetic rows×cols input.
    pub fn new(rows: usize, cols: usize) -> Result<Self, RunError> {
        let len = alloc_len("softmax", &[rows, cols])?;
        Ok(SoftmaxIo { x: fill(len, 3), out: vec![0.0; len], shapes: [[rows, cols]; 2] })
    }
}

impl TuneInputs for SoftmaxIo {
    fn num_inputs(&self) -> usize {
        2
    }
    fn shape(&self, input: usize) -> &[usize] {
        self.shapes.get(input).map_or(&[], |s| &s[..])
    }
    fn synthetic(shapes: &[Vec<u64>]) -> Result<Self, RunError> {
        SoftmaxIo::new(dim(shapes, 0, 0), dim(shapes, 0, 1))
    }
}

fn softmax_family(t: &softmax::SoftmaxTactic) -> &'static str {
    match t {
        softmax::SoftmaxTactic::TwoPass | softmax::SoftmaxTactic::Online => "rowwise",
        softmax::SoftmaxTactic::Chunked { .. } => "chunked",
        softmax::SoftmaxTactic::Threaded { .. } => "threaded",
    }
}

/// The softmax op: rows dynamic.
pub fn softmax_op(max_tokens: u64) -> Result<Op<SoftmaxIo>, OpError> {
    let runners = families(
        "softmax",
        softmax::tactics(),
        softmax_family,
        |t, s| softmax::valid_for(t, dim(s, 0, 0), dim(s, 0, 1)),
        |t, io: &mut SoftmaxIo| {
            let [rows, cols] = io.shapes[0];
            softmax::run(t, &io.x, &mut io.out, rows, cols)
        },
    );
    Op::new("softmax", runners, rows_config(max_tokens))
}

/// Shapes softmax is tuned from.
pub fn rows_base(cols: usize) -> Vec<Vec<u64>> {
    vec![vec![1, cols as u64], vec![1, cols as u64]]
}

// ---------------------------------------------------------------- RMSNorm

/// RMSNorm inputs: `x` and output `out` (rows×cols), `weight` (cols).
#[derive(Clone, Debug)]
pub struct RmsNormIo {
    /// Input.
    pub x: Vec<f32>,
    /// Per-column scale.
    pub weight: Vec<f32>,
    /// Output.
    pub out: Vec<f32>,
    /// Epsilon.
    pub eps: f32,
    shapes: [[usize; 2]; 2],
}

impl RmsNormIo {
    /// Synthetic rows×cols input.
    pub fn new(rows: usize, cols: usize) -> Result<Self, RunError> {
        let len = alloc_len("rmsnorm", &[rows, cols])?;
        Ok(RmsNormIo {
            x: fill(len, 4),
            weight: fill(cols, 5),
            out: vec![0.0; len],
            eps: 1e-6,
            shapes: [[rows, cols]; 2],
        })
    }
}

impl TuneInputs for RmsNormIo {
    fn num_inputs(&self) -> usize {
        2
    }
    fn shape(&self, input: usize) -> &[usize] {
        self.shapes.get(input).map_or(&[], |s| &s[..])
    }
    fn synthetic(shapes: &[Vec<u64>]) -> Result<Self, RunError> {
        RmsNormIo::new(dim(shapes, 0, 0), dim(shapes, 0, 1))
    }
}

fn rmsnorm_family(t: &rmsnorm::RmsNormTactic) -> &'static str {
    match t {
        rmsnorm::RmsNormTactic::Scalar | rmsnorm::RmsNormTactic::Chunked { .. } => "rowwise",
        rmsnorm::RmsNormTactic::Threaded { .. } => "threaded",
    }
}

/// The RMSNorm op: rows dynamic.
pub fn rmsnorm_op(max_tokens: u64) -> Result<Op<RmsNormIo>, OpError> {
    let runners = families(
        "rmsnorm",
        rmsnorm::tactics(),
        rmsnorm_family,
        |t, s| rmsnorm::valid_for(t, dim(s, 0, 0), dim(s, 0, 1)),
        |t, io: &mut RmsNormIo| {
            let [rows, cols] = io.shapes[0];
            rmsnorm::run(t, &io.x, &io.weight, &mut io.out, rows, cols, io.eps)
        },
    );
    Op::new("rmsnorm", runners, rows_config(max_tokens))
}
