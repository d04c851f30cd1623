//! Tuning strategies: how the ranks of a job share the tuning of a bucket.
//!
//! - [`Strategy`]: `independent` (each rank tunes alone, entries in its
//!   `rank_<N>` section), `broadcast` (rank 0 measures, everyone adopts),
//!   `merge` (everyone measures everything, the slowest rank's timing counts),
//!   `parallel` (candidates split round-robin, each rank measures its share).
//!   The last three give identical results on every rank, stored once in the
//!   `shared` section. `RANKTUNE_STRATEGY` names the default.
//! - [`Coordinator::resolve`]: one bucket, start to finish — agreement on
//!   hit/miss first (so a rank's cache hit never leaves others waiting in a
//!   collective), measuring through a closure the tuner passes, exchanging,
//!   combining ([`combine_ranks`]) and deciding with the near-tie rule. Every
//!   wait is bounded; a failure makes the bucket fall back to independent
//!   tuning and the [`Resolution`] says why (op, bucket, ranks).
//! - [`parallel_share`]: the parallel strategy's work split.
//!
//! This module never touches the cache or files and never measures by
//! itself; the tuner owns both and calls in here on a miss in tuning mode.
//!
//! ```
//! use ranktune_collective::SingleRank;
//! use ranktune_cache::Stats;
//! use ranktune_tune::strategy::{BucketCtx, Coordinator, Resolved, Strategy};
//!
//! let mut coord = Coordinator::new(Box::new(SingleRank));
//! let candidates = [(0, 0), (0, 1), (1, 0)];
//! let ctx = BucketCtx {
//!     op: "gemm", bucket: &[vec![64, 512]], checksum: "c0ffee", candidates: &candidates,
//!     local_hit: None, tie_tolerance: 0.03,
//! };
//! let times = [30.0, 20.0, 25.0];
//! let res = coord.resolve(Strategy::Merge, &ctx, &mut |positions| {
//!     positions.iter().map(|&i| Ok(Stats { min_us: times[i], median_us: times[i], p90_us: times[i], spread: 0.0, samples: 3 })).collect()
//! });
//! assert_eq!((res.kind, res.winner), (Resolved::Shared, Some(1)));
//! ```

mod combine;
mod coordinator;
mod error;
mod kind;
mod split;
#[cfg(test)]
mod tests;

pub use combine::{combine_ranks, RankMeasurement};
pub use coordinator::{
    bucket_label, BucketCtx, Coordinator, CoordinatorStats, Fallback, Measured, Resolution,
    Resolved,
};
pub use error::StrategyError;
pub use kind::{
    timeout_from_env, timeout_from_env_with, timeout_from_text, Strategy, DEFAULT_TIMEOUT,
    STRATEGY_ENV, TIMEOUT_ENV,
};
pub use split::{balanced_share, parallel_share};
