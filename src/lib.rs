//! ranktune: autotuning and profiling for multi-rank jobs.
//!
//! A multi-rank job runs one process per GPU or shard. Every process needs to
//! (1) pick the fastest implementation ("tactic") of each operation for each
//! input-shape bucket and remember it, and (2) record what it spent its time on.
//! ranktune does both without the failure modes of today's tools: all ranks
//! share **one tuning cache file** that concurrent writers, crashes and bad
//! input cannot corrupt or empty, and every rank writes **its own trace file**
//! that never collides with another rank's.
//!
//! The modules follow the architecture:
//!
//! - [`rank`]: who am I (rank, world size, local rank) from the launcher.
//! - [`cache`]: the tuning cache: entries in memory and the stores that keep them.
//! - [`tune`]: the tuner: `choose_one`, buckets, measuring, the tuning session.
//! - [`kernels`]: real CPU operators with several tactics each.
//! - [`trace`]: per-rank profiling traces, and their merge and summary.
//! - [`collective`]: how ranks exchange bytes (store-based, in-process).
//! - [`atomic_file`]: publishing a file atomically (temp file, rename), for
//!   every writer above.

pub mod atomic_file;
pub mod cache;
pub mod collective;
pub mod error_chain;
pub mod kernels;
pub mod rank;
pub mod trace;
pub mod tune;
