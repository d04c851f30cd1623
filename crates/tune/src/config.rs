//! Per-op tuning configuration: dynamic dims, constraints, the token clamp,
//! and how a call's shapes become a [`BucketKey`] (and the reverse: the
//! profiles to tune).
//!
//! Owns shape → key. [`TuningConfig::key_of`] runs on the hot path and must
//! never allocate or log.

use super::bucket::{Constraint, DynamicDim};
use super::isolation::Isolation;
use super::key::BucketKey;
use super::runner::TuneInputs;
use super::strategy::Strategy;

/// The default clamp for dynamic dims (TensorRT-LLM's `tune_max_num_tokens`).
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

/// How an op's input shapes are bucketed.
///
/// Dims not named in `dynamic` or `constraints` are static: kept as they are.
#[derive(Clone, Debug)]
pub struct TuningConfig {
    /// Bucketed dims.
    pub dynamic: Vec<DynamicDim>,
    /// Dims derived from the bucketed ones, applied in order after them.
    pub constraints: Vec<Constraint>,
    /// Dynamic values are clamped to this before mapping, and no bucket above
    /// it is generated (unless the dim has its own `max`).
    pub max_tokens: u64,
    /// How the ranks share this op's tuning; `None`: the tuner's default
    /// ([`TunerOptions::strategy`](super::TunerOptions::strategy)).
    pub strategy: Option<Strategy>,
    /// Whether this op's candidates are measured in a worker process;
    /// `None`: the tuner's default
    /// ([`TunerOptions::isolation`](super::TunerOptions::isolation)).
    pub isolation: Option<Isolation>,
}

impl Default for TuningConfig {
    fn default() -> Self {
        TuningConfig {
            dynamic: Vec::new(),
            constraints: Vec::new(),
            max_tokens: DEFAULT_MAX_TOKENS,
            strategy: None,
            isolation: None,
        }
    }
}

impl TuningConfig {
    /// A config with these dynamic dims and the default clamp.
    pub fn new(dynamic: Vec<DynamicDim>) -> Self {
        TuningConfig { dynamic, ..Default::default() }
    }

    /// Adds a constraint.
    pub fn with_constraint(mut self, c: Constraint) -> Self {
        self.constraints.push(c);
        self
    }

    /// Sets the clamp.
    pub fn with_max_tokens(mut self, max: u64) -> Self {
        self.max_tokens = max.max(1);
        self
    }

    /// Sets this op's strategy (overrides the tuner's default).
    pub fn with_strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = Some(strategy);
        self
    }

    /// Sets how this op's candidates are measured (overrides the tuner's
    /// default): e.g. [`Isolation::Fork`] for an op whose tactics may crash.
    pub fn with_isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = Some(isolation);
        self
    }

    /// Maps raw shapes (already in `key`) to their bucket, in place.
    #[inline]
    pub fn bucketize(&self, key: &mut BucketKey) -> bool {
        for d in &self.dynamic {
            let Some(p) = key.pos(d.input, d.dim) else {
                return false;
            };
            let v = key.at(p).min(d.max.unwrap_or(self.max_tokens));
            key.set_at(p, d.map.map(v));
        }
        for c in &self.constraints {
            let Some(p) = key.pos(c.input, c.dim) else {
                return false;
            };
            let v = c.derive.value(key);
            key.set_at(p, v);
        }
        true
    }

    /// The bucket key of a call. `None` when the shapes exceed the key limits
    /// or do not have the dims the config names. Never allocates.
    pub fn key_of<I: TuneInputs>(&self, inputs: &I) -> Option<BucketKey> {
        let mut key = BucketKey::default();
        self.key_into(inputs, &mut key).then_some(key)
    }

    /// Like [`key_of`](Self::key_of), writing into `key` (which must be
    /// empty) so the hot path never moves the key around. `false`: no key.
    #[inline]
    pub fn key_into<I: TuneInputs>(&self, inputs: &I, key: &mut BucketKey) -> bool {
        for i in 0..inputs.num_inputs() {
            if !key.push_dims(inputs.shape(i)) {
                return false;
            }
        }
        self.bucketize(key)
    }

    /// Every profile to tune: the product of the dynamic dims' buckets, with
    /// static dims taken from `base` and constraints applied.
    pub fn profiles(&self, base: &[Vec<u64>]) -> Vec<BucketKey> {
        let Some(base) = BucketKey::from_nested(base) else {
            return Vec::new();
        };
        let lists: Vec<Vec<u64>> =
            self.dynamic.iter().map(|d| d.gen.generate(d.max.unwrap_or(self.max_tokens))).collect();
        let mut out = vec![base];
        for (d, list) in self.dynamic.iter().zip(&lists) {
            let mut next = Vec::with_capacity(out.len() * list.len());
            for k in &out {
                for &b in list {
                    let mut k2 = *k;
                    if k2.set(d.input, d.dim, b) {
                        next.push(k2);
                    }
                }
            }
            out = next;
        }
        for k in &mut out {
            for c in &self.constraints {
                let v = c.derive.value(k);
                k.set(c.input, c.dim, v);
            }
        }
        out.dedup();
        out
    }
}
