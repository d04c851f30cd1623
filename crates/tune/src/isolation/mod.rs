//! Isolated measuring: candidates measured in a worker process, so that a
//! candidate that crashes (SIGSEGV, abort), never returns or runs out of
//! memory fails that candidate only, and the tune goes on with a fresh
//! worker.
//!
//! - [`Isolation`], [`Limits`], [`WorkerCommand`]: the settings (this file);
//! - [`protocol`]: the messages between the tuner and a worker;
//! - [`reasons`]: why a lost worker was lost, judged and worded;
//! - [`adopted`]: a worker another program started (the Python package's),
//!   supervised by the same `worker` handle and `pool`; [`setup`]: such a
//!   worker's own set-up (signals, parent death, memory limit);
//! - [`settings`]: the settings read from text (flags, variables, Python's
//!   arguments), one wording for the command and Python;
//! - `pool`: the workers of one bucket (start, reuse, limits, counts);
//! - `worker`: the parent's side of one worker (requests, deadlines, reaping,
//!   failure reasons); `fork`: a forked worker's serve loop; `spawn`: a
//!   worker started as a program; `sys`: the libc calls.
//!
//! Where it is used: the tuner's bench (`tuner/inputs.rs`) sends each timed
//! run of an isolated op to the bucket's pool; the candidates that crash,
//! time out or run out of memory are the bucket's hard failures
//! ([`CandidateFailure`](crate::CandidateFailure)), reported in
//! [`TuneRecord::hard_failures`](crate::TuneRecord::hard_failures).
//!
//! This module owns worker processes and the classification of their
//! deaths. It never decides, never touches the cache, and never runs on the
//! hot path (only while a bucket is tuned).

pub mod adopted;
mod fork;
pub(crate) mod pool;
pub mod protocol;
pub mod reasons;
pub mod serve;
pub mod settings;
pub mod setup;
mod spawn;
mod sys;
mod worker;

use std::ffi::OsString;
use std::time::Duration;

/// How an op's candidates are measured.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum Isolation {
    /// In the tuning process (the default): an error or a panic fails the
    /// candidate; a crash, a hang or an exhausted memory takes the job.
    #[default]
    Off,
    /// In a worker forked from the tuning process after the bucket's inputs
    /// are built, reused across the bucket's candidates while it stays
    /// healthy. Cheap (no start-up beyond `fork`), but the worker inherits
    /// the process: a CUDA context does not survive a fork (use
    /// [`Spawn`](Self::Spawn) there).
    Fork(Limits),
    /// In a fresh program that speaks the [`protocol`] (e.g. a Python worker
    /// that rebuilds the inputs from their shapes), started for each bucket
    /// and after each hard failure.
    Spawn(WorkerCommand),
}

impl Isolation {
    /// Whether candidates run in a worker process.
    pub fn is_on(&self) -> bool {
        !matches!(self, Isolation::Off)
    }

    /// The limits of an isolated mode.
    pub fn limits(&self) -> Option<&Limits> {
        match self {
            Isolation::Off => None,
            Isolation::Fork(l) => Some(l),
            Isolation::Spawn(c) => Some(&c.limits),
        }
    }
}

/// The program of a [`Isolation::Spawn`] worker.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerCommand {
    /// The program (looked up in `PATH` when it has no slash).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Environment variables set for it (on top of the tuner's environment).
    pub env: Vec<(OsString, OsString)>,
    /// Opaque data sent in the init message ([`protocol::Init::spec`]).
    pub spec: serde_json::Value,
    /// Its limits.
    pub limits: Limits,
}

/// The floor of the derived per-candidate time limit.
pub const DEFAULT_TIMEOUT_FLOOR: Duration = Duration::from_secs(5);
/// The derived per-candidate time limit is this many times the reference
/// request's time.
pub const DEFAULT_TIMEOUT_FACTOR: f64 = 50.0;
/// The time limit of a candidate measured before anything of its bucket
/// (normally the fallback, measured first) has been timed.
pub const DEFAULT_UNREFERENCED_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a worker may take to start (fork or spawn, until `ready`).
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(120);

/// The limits a worker runs a candidate under.
///
/// Time: a candidate's requests together may take `timeout` when it is
/// set; otherwise `max(timeout_floor, timeout_factor × reference)`, where
/// the reference is the slowest request of the bucket's fallback (runner 0,
/// tactic 0) measured so far, or — before the fallback is measured — the
/// slowest successful request of the bucket, and `unreferenced_timeout` for
/// a candidate measured before any request of its bucket succeeded.
///
/// Memory: the worker's address space may grow by `memory` bytes over the
/// tuning process's size when the worker started (`RLIMIT_AS`); `None`: no
/// limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// A fixed per-candidate time limit (overrides the derived one).
    pub timeout: Option<Duration>,
    /// The derived limit's floor.
    pub timeout_floor: Duration,
    /// The derived limit's factor.
    pub timeout_factor: f64,
    /// The limit before anything of the bucket has been timed.
    pub unreferenced_timeout: Duration,
    /// How long a worker may take to start.
    pub start_timeout: Duration,
    /// Bytes of address space a worker may add, `None` for no limit.
    pub memory: Option<u64>,
}

impl Default for Limits {
    /// The derived time limit and no memory limit (see
    /// [`Limits::for_local_ranks`] for the memory default).
    fn default() -> Self {
        Limits {
            timeout: None,
            timeout_floor: DEFAULT_TIMEOUT_FLOOR,
            timeout_factor: DEFAULT_TIMEOUT_FACTOR,
            unreferenced_timeout: DEFAULT_UNREFERENCED_TIMEOUT,
            start_timeout: DEFAULT_START_TIMEOUT,
            memory: None,
        }
    }
}

impl Limits {
    /// The defaults for one of `local_ranks` tuning processes on this
    /// machine: the derived time limit, and a memory limit of half the
    /// memory available now (`MemAvailable`) divided by `local_ranks`
    /// (no memory limit where that cannot be read).
    pub fn for_local_ranks(local_ranks: u32) -> Limits {
        let memory = sys::mem_available().map(|b| b / 2 / u64::from(local_ranks.max(1)));
        Limits { memory, ..Limits::default() }
    }

    /// The time limit of a candidate, given the bucket's reference request
    /// time (µs), if any.
    pub fn timeout_for(&self, reference_us: Option<f64>) -> Duration {
        if let Some(t) = self.timeout {
            return t;
        }
        match reference_us.filter(|r| r.is_finite() && *r >= 0.0) {
            Some(r) => {
                let derived = Duration::try_from_secs_f64(r * 1e-6 * self.timeout_factor)
                    .unwrap_or(Duration::MAX);
                derived.max(self.timeout_floor)
            }
            None => self.unreferenced_timeout.max(self.timeout_floor),
        }
    }
}
