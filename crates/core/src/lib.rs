//! ranktune-core: what every other ranktune crate stands on.
//!
//! - [`rank`]: who am I (rank, world size, local rank) from the launcher's
//!   environment (torchrun, Open MPI, MPICH/Hydra, Slurm, or explicit
//!   `RANKTUNE_*` settings).
//! - [`job`]: which run this process belongs to (the launcher's job id)
//!   and the trace clock base a launcher gives all its ranks.
//! - [`atomic_file`]: publishing a file atomically (exclusive temp file,
//!   optional fsync, rename), for every writer above: cache, spool, trace
//!   export, trace merge, collective messages.
//! - [`hash`]: the one stable hash (FNV-1a, 64 bit) and hasher, for
//!   fingerprints, checksums and names — never Rust's randomized `Hash`.
//! - [`clock`]: the one "now in unix seconds" helper, and calendar dates.
//! - [`error_chain`]: rendering an error with its sources on one line.
//! - [`setting`]: one rule, and one wording, for seconds and whole numbers
//!   given as a flag, an environment variable or a Python argument.
//!
//! This crate never reads a cache or a trace and never talks to other ranks.
//!
//! ```
//! use ranktune_core::rank::{RankInfo, RankOverrides};
//! // torchrun's variables, read through a closure instead of the process environment.
//! let env = |name: &str| match name {
//!     "RANK" => Some("3".to_string()),
//!     "WORLD_SIZE" => Some("8".to_string()),
//!     _ => None,
//! };
//! let me = RankInfo::detect_with(&RankOverrides::default(), env).unwrap();
//! assert_eq!((me.rank, me.world_size), (3, 8));
//! ```

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod atomic_file;
pub mod clock;
pub mod error_chain;
pub mod fork_guard;
pub mod hash;
pub mod job;
pub mod rank;
pub mod setting;
