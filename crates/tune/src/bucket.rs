//! Shape buckets: which dims are dynamic, which bucket values to tune, how a
//! runtime value maps to its bucket, and dims derived from others.
//!
//! Owns only the arithmetic of buckets. Mapping ([`BucketMap::map`]) runs on
//! the hot path and must never allocate or log.

use super::key::BucketKey;
use std::fmt;
use std::sync::Arc;

/// Generates the bucket values to tune for one dynamic dim, up to a maximum.
#[derive(Clone)]
pub enum BucketGen {
    /// `min, 2·min, 4·min, …` up to the maximum (powers of two when `min` is 1).
    PowersOfTwo {
        /// First bucket (rounded up to a power of two, at least 1).
        min: u64,
    },
    /// Exactly these values (those above the maximum are dropped).
    Explicit(Vec<u64>),
    /// A user function of the maximum.
    Custom(Arc<dyn Fn(u64) -> Vec<u64> + Send + Sync>),
}

impl fmt::Debug for BucketGen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BucketGen::PowersOfTwo { min } => write!(f, "PowersOfTwo {{ min: {min} }}"),
            BucketGen::Explicit(v) => write!(f, "Explicit({v:?})"),
            BucketGen::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl BucketGen {
    /// The buckets, sorted, deduplicated, all `<= max` and `>= 1`.
    pub fn generate(&self, max: u64) -> Vec<u64> {
        let mut v = match self {
            BucketGen::PowersOfTwo { min } => {
                let mut b = (*min).max(1).next_power_of_two();
                let mut out = Vec::new();
                while b <= max {
                    out.push(b);
                    match b.checked_mul(2) {
                        Some(n) => b = n,
                        None => break,
                    }
                }
                out
            }
            BucketGen::Explicit(v) => v.clone(),
            BucketGen::Custom(f) => f(max),
        };
        v.retain(|&b| b >= 1 && b <= max);
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Maps a runtime value (already clamped to the maximum) to its bucket.
#[derive(Clone)]
pub enum BucketMap {
    /// The last power of two `<= value` (1 for 0).
    LastPowerOfTwo,
    /// The largest listed value `<= value`, or the smallest one when the value
    /// is below all of them. The list must be sorted ascending.
    FloorIn(Arc<[u64]>),
    /// A user function; must not allocate (it runs on the hot path).
    Custom(Arc<dyn Fn(u64) -> u64 + Send + Sync>),
}

impl fmt::Debug for BucketMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BucketMap::LastPowerOfTwo => f.write_str("LastPowerOfTwo"),
            BucketMap::FloorIn(v) => write!(f, "FloorIn({v:?})"),
            BucketMap::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// The last power of two `<= v` (1 for 0 and 1).
#[inline]
pub fn last_power_of_two(v: u64) -> u64 {
    if v <= 1 {
        1
    } else {
        1u64 << (63 - v.leading_zeros())
    }
}

impl BucketMap {
    /// The bucket of `value`.
    #[inline]
    pub fn map(&self, value: u64) -> u64 {
        match self {
            BucketMap::LastPowerOfTwo => last_power_of_two(value),
            BucketMap::FloorIn(list) => match list.partition_point(|&b| b <= value) {
                0 => list.first().copied().unwrap_or(value),
                i => list[i - 1],
            },
            BucketMap::Custom(f) => f(value),
        }
    }
}

/// One dynamic dim: `inputs[input].shape[dim]` is bucketed.
#[derive(Clone, Debug)]
pub struct DynamicDim {
    /// Which input.
    pub input: usize,
    /// Which dim of it.
    pub dim: usize,
    /// The buckets to tune.
    pub gen: BucketGen,
    /// Runtime value → bucket.
    pub map: BucketMap,
    /// This dim's own clamp; `None` uses the config's `max_tokens`.
    pub max: Option<u64>,
}

impl DynamicDim {
    /// The usual token dimension: dim `dim` (0-based) of input `input`
    /// (0-based, in the order the op's inputs are given) is tuned at the
    /// powers of two 1, 2, 4, … up to the config's `max_tokens` (this dim's
    /// `max` is `None`), and a runtime value maps to the last power of two
    /// `<=` it (5 → 4, 1000 → 512).
    ///
    /// `DynamicDim::powers_of_two(0, 0)` is "the rows of the first input",
    /// e.g. the token count `m` of a GEMM's `[m, k]` activation.
    pub fn powers_of_two(input: usize, dim: usize) -> Self {
        DynamicDim {
            input,
            dim,
            gen: BucketGen::PowersOfTwo { min: 1 },
            map: BucketMap::LastPowerOfTwo,
            max: None,
        }
    }

    /// Exactly these buckets; a value maps to the largest bucket `<=` it.
    pub fn explicit(input: usize, dim: usize, buckets: &[u64]) -> Self {
        let mut list = buckets.to_vec();
        list.sort_unstable();
        list.dedup();
        DynamicDim {
            input,
            dim,
            gen: BucketGen::Explicit(list.clone()),
            map: BucketMap::FloorIn(list.into()),
            max: None,
        }
    }

    /// User functions for both generating and mapping.
    pub fn custom(
        input: usize,
        dim: usize,
        gen: impl Fn(u64) -> Vec<u64> + Send + Sync + 'static,
        map: impl Fn(u64) -> u64 + Send + Sync + 'static,
    ) -> Self {
        DynamicDim {
            input,
            dim,
            gen: BucketGen::Custom(Arc::new(gen)),
            map: BucketMap::Custom(Arc::new(map)),
            max: None,
        }
    }

    /// Gives this dim its own clamp instead of the config's `max_tokens`.
    pub fn with_max(mut self, max: u64) -> Self {
        self.max = Some(max.max(1));
        self
    }
}

/// How a constrained dim is computed from the bucketed shapes.
#[derive(Clone)]
pub enum Derive {
    /// Equal to `inputs[input].shape[dim]`.
    SameAs {
        /// Which input.
        input: usize,
        /// Which dim of it.
        dim: usize,
    },
    /// A user function; must not allocate (it runs on the hot path).
    Fn(Arc<dyn Fn(&BucketKey) -> u64 + Send + Sync>),
}

impl Derive {
    /// The derived value.
    #[inline]
    pub fn value(&self, key: &BucketKey) -> u64 {
        match self {
            Derive::SameAs { input, dim } => key.dim(*input, *dim),
            Derive::Fn(f) => f(key),
        }
    }
}

/// A dim derived from the (bucketed) others, e.g. `out.rows = a.rows`.
#[derive(Clone)]
pub struct Constraint {
    /// Which input.
    pub input: usize,
    /// Which dim of it.
    pub dim: usize,
    /// How it is computed.
    pub derive: Derive,
}

impl fmt::Debug for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Constraint {{ input: {}, dim: {} }}", self.input, self.dim)
    }
}

impl Constraint {
    /// `inputs[input].shape[dim]` is computed by `derive` (which must not allocate).
    pub fn new(
        input: usize,
        dim: usize,
        derive: impl Fn(&BucketKey) -> u64 + Send + Sync + 'static,
    ) -> Self {
        Constraint { input, dim, derive: Derive::Fn(Arc::new(derive)) }
    }

    /// `inputs[input].shape[dim]` equals `inputs[from_input].shape[from_dim]`.
    pub fn same_as(input: usize, dim: usize, from_input: usize, from_dim: usize) -> Self {
        Constraint { input, dim, derive: Derive::SameAs { input: from_input, dim: from_dim } }
    }
}
