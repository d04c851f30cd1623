//! The workers of one bucket: starts a worker on the first request (and
//! again after a worker is lost), applies the time limits, counts the
//! starts and their cost, and turns answers into timings or failures.
//!
//! Owns the policy around workers: one worker at a time, reused while it
//! stays healthy; the time reference (the fallback's slowest request, per
//! run); a start that failed is not retried within the bucket. It never
//! chooses candidates and never builds inputs (the bench does).

use super::fork::{self, Serve};
use super::protocol::{ErrorKind, FromWorker, Init, ToWorker};
use super::spawn;
use super::worker::Worker;
use super::{Isolation, Limits};
use crate::failure::FailureKind;
use std::time::Instant;

/// A failed request: the candidate's failure.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Failed {
    /// What kind of failure.
    pub(crate) kind: FailureKind,
    /// Its reason.
    pub(crate) message: String,
}

/// The workers of one bucket.
pub(crate) struct Pool {
    mode: Isolation,
    limits: Limits,
    worker: Option<Worker>,
    /// Why starting a worker failed, once it did (the bucket's later
    /// candidates fail with the same reason without trying again).
    broken: Option<String>,
    /// Workers started.
    pub(crate) starts: u32,
    /// Time spent starting them (until each was ready), seconds.
    pub(crate) start_seconds: f64,
    /// The fallback's slowest request so far, µs per run.
    ref_fallback: Option<f64>,
    /// Any candidate's slowest successful request so far, µs per run.
    ref_any: Option<f64>,
}

impl Pool {
    /// The pool for `mode`; `None` when isolation is off.
    pub(crate) fn new(mode: &Isolation) -> Option<Pool> {
        let mut pool = Pool::with_limits(mode.limits()?.clone());
        pool.mode = mode.clone();
        Some(pool)
    }

    /// Whether workers are forked (they inherit the inputs: build them first).
    pub(crate) fn forks(&self) -> bool {
        matches!(self.mode, Isolation::Fork(_))
    }

    /// Whether a worker is running.
    pub(crate) fn has_worker(&self) -> bool {
        self.worker.is_some()
    }

    /// A pool whose workers someone else starts ([`Pool::start_with`]):
    /// the Python package's (see `adopted`).
    pub(crate) fn with_limits(limits: Limits) -> Pool {
        Pool {
            mode: Isolation::Off,
            limits,
            worker: None,
            broken: None,
            starts: 0,
            start_seconds: 0.0,
            ref_fallback: None,
            ref_any: None,
        }
    }

    /// A new bucket for a pool kept across buckets: no start has failed
    /// for it yet, and its time reference is its own.
    pub(crate) fn new_bucket(&mut self) {
        self.broken = None;
        self.ref_fallback = None;
        self.ref_any = None;
    }

    /// The running worker's process id.
    pub(crate) fn worker_pid(&self) -> Option<i32> {
        self.worker.as_ref().map(Worker::pid)
    }

    /// Takes the worker out (to end it, or to keep it for later).
    pub(crate) fn take_worker(&mut self) -> Option<Worker> {
        self.worker.take()
    }

    /// Starts a worker and waits until it is ready: forked with `serve`, or
    /// spawned and sent `init()`. The error fails the candidate that needed it.
    pub(crate) fn start(
        &mut self,
        serve: &mut Serve<'_>,
        init: &dyn Fn() -> Init,
    ) -> Result<(), Failed> {
        let mode = self.mode.clone();
        self.start_with(|| match &mode {
            Isolation::Fork(limits) => fork::start(limits, serve).map(|w| (w, None)),
            Isolation::Spawn(cmd) => spawn::start(cmd).map(|w| {
                let mut init = init();
                init.spec = cmd.spec.clone();
                (w, Some(ToWorker::Init { init }))
            }),
            Isolation::Off => Err(std::io::Error::other("isolation is off")),
        })
    }

    /// Starts a worker with `start` (the worker, and the message it must
    /// answer `ready` to; `None`: its first answer, unasked) and waits until
    /// it is ready. A start that fails breaks the pool for the bucket: its
    /// later candidates fail with the same reason without trying again.
    pub(crate) fn start_with(
        &mut self,
        start: impl FnOnce() -> std::io::Result<(Worker, Option<ToWorker>)>,
    ) -> Result<(), Failed> {
        if let Some(why) = &self.broken {
            return Err(Failed { kind: FailureKind::Error, message: why.clone() });
        }
        let t0 = Instant::now();
        let outcome = match start() {
            Err(e) => Err(e.to_string()),
            Ok((worker, hello)) => {
                self.starts += 1;
                self.greet(worker, hello.as_ref())
            }
        };
        self.start_seconds += t0.elapsed().as_secs_f64();
        outcome.map_err(|e| self.break_with(&e))
    }

    /// Sends a kept worker the next bucket's `init`. `Ok(false)`: it was
    /// lost meanwhile (start a fresh one); an answer other than `ready`
    /// breaks the pool for the bucket.
    pub(crate) fn reinit(&mut self, init: &ToWorker) -> Result<bool, Failed> {
        let Some(mut worker) = self.worker.take() else { return Ok(false) };
        match worker.request(Some(init), self.limits.start_timeout) {
            Err(_) => Ok(false),
            Ok(FromWorker::Ready { .. }) => {
                self.worker = Some(worker);
                Ok(true)
            }
            Ok(answer) => {
                worker.kill();
                Err(self.break_with(&refusal(answer)))
            }
        }
    }

    /// Keeps `worker` once it answered `ready` to `hello`; else why not.
    fn greet(&mut self, mut worker: Worker, hello: Option<&ToWorker>) -> Result<(), String> {
        match worker.request(hello, self.limits.start_timeout) {
            Ok(FromWorker::Ready { .. }) => {
                self.worker = Some(worker);
                Ok(())
            }
            Ok(answer) => {
                worker.kill();
                Err(refusal(answer))
            }
            Err(lost) => Err(lost.message),
        }
    }

    /// Breaks the pool for the bucket: `e` is why no worker could start.
    fn break_with(&mut self, e: &str) -> Failed {
        let why = format!("the isolated worker could not start: {e}");
        tracing::warn!("{why}; this bucket's remaining candidates fail with it");
        self.broken = Some(why.clone());
        Failed { kind: FailureKind::Error, message: why }
    }

    /// Runs candidate `position` `reps` times in the worker (started by
    /// [`start`](Self::start)); `fallback`: it is the op's fallback.
    /// Returns the time of the runs (µs, the worker's timer).
    pub(crate) fn run(
        &mut self,
        position: usize,
        reps: u32,
        fallback: bool,
    ) -> Result<f64, Failed> {
        let Some(worker) = self.worker.as_mut() else {
            return Err(Failed {
                kind: FailureKind::Error,
                message: "no isolated worker is running".to_string(),
            });
        };
        let reps = reps.max(1);
        let reference = self.ref_fallback.or(self.ref_any).map(|r| r * f64::from(reps));
        let limit = self.limits.timeout_for(reference);
        let t0 = Instant::now();
        let answer = worker.request(Some(&ToWorker::Run { run: position, reps }), limit);
        let per_run = t0.elapsed().as_secs_f64() * 1e6 / f64::from(reps);
        match answer {
            Ok(FromWorker::Us { us }) if us.is_finite() && us >= 0.0 => {
                let slowest =
                    |r: &mut Option<f64>| *r = Some(r.map_or(per_run, |v| v.max(per_run)));
                if fallback {
                    slowest(&mut self.ref_fallback);
                }
                slowest(&mut self.ref_any);
                Ok(us)
            }
            Ok(FromWorker::Us { us }) => Err(Failed {
                kind: FailureKind::Error,
                message: format!("the isolated worker sent a time that is not one: {us}"),
            }),
            Ok(FromWorker::Error { error, kind }) => Err(match kind {
                ErrorKind::Error => Failed { kind: FailureKind::Error, message: error },
                ErrorKind::Panic => Failed { kind: FailureKind::Panic, message: error },
                ErrorKind::Memory => Failed {
                    kind: FailureKind::Memory,
                    message: format!("ran out of memory: {error}"),
                },
            }),
            Ok(FromWorker::Ready { .. }) => {
                self.worker = None;
                Err(Failed {
                    kind: FailureKind::Error,
                    message: "the isolated worker answered ready to a run request".to_string(),
                })
            }
            Err(lost) => {
                self.worker = None;
                Err(Failed { kind: lost.kind, message: lost.message })
            }
        }
    }
}

/// Why a starting worker's answer was not `ready`.
fn refusal(answer: FromWorker) -> String {
    match answer {
        FromWorker::Error { error, .. } => error,
        other => format!("it answered {other:?} instead of ready"),
    }
}
