//! The tuner: `choose_one`, shape buckets, measuring, deciding, and the
//! tuning session that loads and saves the cache.
//!
//! - [`runner`]: the [`Runner`] trait, [`TuneInputs`], stable fingerprints.
//! - [`bucket`] and [`config`]: dynamic dims, bucket generators and mappers,
//!   constraints, the token clamp; [`key`]: the allocation-free hot-path key.
//! - [`op`]: an op bundled with its runners (fingerprints and checksum computed once).
//! - [`measure`]: timers, statistics, fixed and adaptive sampling; [`decide`]:
//!   median + near-tie rule.
//! - [`tuner`]: [`Tuner::choose_one`] and statistics; [`session`]: the
//!   load/save guard.
//!
//! ```
//! use ranktune_tune::*;
//! use ranktune_cache::{Identity, Section};
//!
//! struct Rows { shape: [usize; 1] }
//! impl TuneInputs for Rows {
//!     fn num_inputs(&self) -> usize { 1 }
//!     fn shape(&self, _i: usize) -> &[usize] { &self.shape }
//!     fn synthetic(s: &[Vec<u64>]) -> Result<Self, RunError> { Ok(Rows { shape: [s[0][0] as usize] }) }
//! }
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
//! assert_eq!(tuner.choose_one(&op, &Rows { shape: [100] }).source, Source::Fallback);
//! tuner.set_tuning(true);
//! assert_eq!(tuner.choose_one(&op, &Rows { shape: [100] }).source, Source::Tuned);
//! tuner.set_tuning(false);
//! assert_eq!(tuner.choose_one(&op, &Rows { shape: [120] }).source, Source::Cache); // same bucket 64
//! ```

pub mod bucket;
pub mod config;
pub mod decide;
pub mod key;
mod launch;
pub mod measure;
pub mod op;
pub mod runner;
pub mod session;
pub mod strategy;
pub mod tuner;

pub use bucket::{last_power_of_two, BucketGen, BucketMap, Constraint, Derive, DynamicDim};
pub use config::{TuningConfig, DEFAULT_MAX_TOKENS};
pub use decide::{decide, DEFAULT_TIE_TOLERANCE, NOISE_BAND_CAP};
pub use key::BucketKey;
pub use launch::{
    describe_status, parse_stderr_line, progress_line, read_result, write_result, JobProgress,
    LaunchError, LaunchObserver, Launcher, ProgressWriter, RankFailure, RankFailureKind,
    ResultError, StderrLine, LAUNCHER_VARS, PROGRESS_PREFIX, STDERR_TAIL_LINES,
};
pub use measure::{measure_all, stats_of, CpuTimer, Sampling, Timer};
pub use op::{Op, OpError};
pub use runner::{fingerprint_of, RunError, Runner, StableHasher, TuneInputs};
pub use session::{Session, SessionLoad};
pub use tuner::{
    Choice, OpStats, Source, StaleReason, TuneRecord, Tuner, TunerOptions, TunerStats,
};
