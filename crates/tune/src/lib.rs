//! ranktune's autotuner: [`Tuner::choose_one`] picks a runner and tactic for
//! a call, from the cache, by measuring (in tuning mode), or the fallback.
//!
//! ```
//! use ranktune_cache::{Identity, Section};
//! use ranktune_tune::*;
//!
//! // The inputs of one call: their shapes, and how to make synthetic ones.
//! struct Rows { shape: [usize; 1] }
//! impl TuneInputs for Rows {
//!     fn num_inputs(&self) -> usize { 1 }
//!     fn shape(&self, _i: usize) -> &[usize] { &self.shape }
//!     fn synthetic(s: &[Vec<u64>]) -> Result<Self, RunError> { Ok(Rows { shape: [s[0][0] as usize] }) }
//! }
//! // A tiny runner with two tactics.
//! struct Noop;
//! impl Runner<Rows> for Noop {
//!     fn name(&self) -> &str { "noop" }
//!     fn fingerprint(&self) -> String { fingerprint_of("noop v1") }
//!     fn tactics(&self) -> Vec<serde_json::Value> { vec![0.into(), 1.into()] }
//!     fn valid(&self, _t: usize, _s: &[Vec<u64>]) -> bool { true }
//!     fn run(&self, _t: usize, _io: &mut Rows) -> Result<(), RunError> { Ok(()) }
//! }
//! let op = Op::new("noop", vec![Box::new(Noop)], TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)])).unwrap();
//! let id = Identity { lib_version: "0".into(), device_kind: "cpu".into(), device_name: "x".into(), capability: "".into(), cores: 1 };
//! let tuner = Tuner::new(TunerOptions::new(Section::Rank(0), id, "digest"));
//! assert_eq!(tuner.choose_one(&op, &Rows { shape: [100] }).source, ChoiceSource::Fallback);
//! tuner.set_tuning(true);
//! assert_eq!(tuner.choose_one(&op, &Rows { shape: [100] }).source, ChoiceSource::Tuned);
//! tuner.set_tuning(false);
//! assert_eq!(tuner.choose_one(&op, &Rows { shape: [120] }).source, ChoiceSource::Cache); // same bucket 64
//! ```
//!
//! What is where (every item is used from the crate root; the multi-rank
//! strategies from [`strategy`]):
//!
//! - [`Runner`], [`TuneInputs`], [`fingerprint_of`]: what is tuned.
//! - [`TuningConfig`], [`DynamicDim`], [`BucketGen`], [`BucketMap`],
//!   [`Constraint`]: dynamic dims, bucket generators and mappers,
//!   constraints, the token clamp; [`BucketKey`]: the allocation-free
//!   hot-path key.
//! - [`Op`]: an op bundled with its runners (fingerprints and checksum
//!   computed once).
//! - [`measure_all`], [`measure_timed`], [`Timer`], [`Sampling`]: timers,
//!   statistics, fixed and adaptive sampling; [`decide()`]: median + near-tie rule.
//! - [`Tuner`]: [`Tuner::choose_one`] and statistics; [`Session`]: the
//!   load/save guard, whose [`Session::checkpoint`] saves progress as it
//!   goes when its [`SaveEvery`] policy says so (durable progress); known-bad tactics (the cache's blocklist) are skipped
//!   unless [`TunerOptions::retry_failed`], and cached tactics of an op
//!   [`Op::with_validation`] are checked on first use.
//! - [`FailureKind`], [`CandidateFailure`]: how a candidate failed.
//! - [`strategy`]: how the ranks of a job share tuning.
//! - [`isolation`] ([`Isolation`](isolation::Isolation),
//!   [`Limits`](isolation::Limits), [`WorkerCommand`](isolation::WorkerCommand),
//!   [`protocol`](isolation::protocol)): measuring in a worker process, so a candidate that crashes, hangs or
//!   runs out of memory fails alone; [`FailureKind`], [`CandidateFailure`]:
//!   how a candidate failed.
//!
//! Starting the ranks of a local job is not tuning: that is the
//! `ranktune-launch` crate.

mod autosave;
mod bucket;
mod choice;
mod config;
mod decide;
mod failure;
pub mod isolation;
mod key;
mod measure;
mod op;
mod runner;
mod session;
pub mod strategy;
mod tuner;

pub use autosave::{
    Autosave, SaveEvery, SaveEveryError, AUTO_SAVE_MAX_WAIT, AUTO_SAVE_RATIO, FAILED_RETRY_MIN,
    SAVE_EVERY_ENV,
};
pub use bucket::{last_power_of_two, BucketGen, BucketMap, Constraint, Derive, DynamicDim};
pub use choice::{Choice, ChoiceSource};
pub use config::{TuningConfig, DEFAULT_MAX_TOKENS};
pub use decide::{decide, DEFAULT_TIE_TOLERANCE, NOISE_BAND_CAP};
pub use failure::{CandidateFailure, FailureKind};
pub use key::{BucketKey, MAX_DIMS, MAX_INPUTS};
pub use measure::{measure_all, measure_timed, stats_of, CpuTimer, Sampling, Timer, MIN_SAMPLE_US};
pub use op::{candidate_checksum, Op, OpError, Reference};
pub use runner::{fingerprint_of, RunError, Runner, StableHasher, TuneInputs};
pub use session::{Checkpoint, Session, SessionLoad};
pub use tuner::{
    miss_action, retry_failed_from_env, Found, MissAction, OpStats, SkippedTactic, StaleReason,
    TuneRecord, Tuner, TunerOptions, TunerStats, RETRY_FAILED_ENV,
};
