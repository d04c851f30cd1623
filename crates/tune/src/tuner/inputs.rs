//! Running candidates on synthetic inputs: the inputs of a bucket's shapes
//! are built once, shared by the candidates, and rebuilt after a failed run
//! (which may have left them half-written).
//!
//! Owns the inputs and the run loop of one bucket, in this process or — with
//! isolation on — in the bucket's worker process
//! ([`Pool`](crate::isolation::pool::Pool)), which a forked worker serves
//! with this same run loop on its inherited copy of the inputs. Runs are
//! isolated: an error or a panic fails that candidate only, and with a
//! worker a crash, a time-out or an exhausted memory too (those are kept in
//! [`Bench::hard_failures`]). It never decides.

use super::isolate::isolate;
use crate::failure::{CandidateFailure, FailureKind};
use crate::isolation::pool::Pool;
use crate::isolation::protocol::{self, ErrorKind, Init, InitCandidate};
use crate::isolation::Isolation;
use crate::measure::Timer;
use crate::op::Op;
use crate::runner::TuneInputs;

/// The runs of one bucket's candidates on shared synthetic inputs.
pub(super) struct Bench<'a, I> {
    op: &'a Op<I>,
    shapes: &'a [Vec<u64>],
    cands: &'a [(usize, usize)],
    io: Option<I>,
    /// The first failure to build the inputs, for the all-failed warning.
    pub(super) first_error: Option<String>,
    /// The bucket's workers, with isolation on.
    pool: Option<Pool>,
    /// The candidates that crashed, timed out or ran out of memory here.
    pub(super) hard_failures: Vec<CandidateFailure>,
}

impl<'a, I: TuneInputs> Bench<'a, I> {
    /// Runs of `op`'s candidates `cands` on inputs of `shapes`, measured as
    /// `isolation` says.
    pub(super) fn new(
        op: &'a Op<I>,
        shapes: &'a [Vec<u64>],
        cands: &'a [(usize, usize)],
        isolation: &Isolation,
    ) -> Self {
        Bench {
            op,
            shapes,
            cands,
            io: None,
            first_error: None,
            pool: Pool::new(isolation),
            hard_failures: Vec::new(),
        }
    }

    /// Workers started for this bucket and the seconds that took (0 and 0.0
    /// without isolation).
    pub(super) fn worker_starts(&self) -> (u32, f64) {
        self.pool.as_ref().map_or((0, 0.0), |p| (p.starts, p.start_seconds))
    }

    /// Runs candidate `position` `reps` times in a row, timed with `timer`
    /// (in this process, or the worker's copy of it); the first error,
    /// panic — or, isolated, crash, time-out or memory failure — ends it.
    /// Returns the time of all `reps` runs, µs.
    pub(super) fn run_timed(
        &mut self,
        position: Option<usize>,
        reps: u32,
        timer: &mut dyn Timer,
    ) -> Result<f64, String> {
        let Some(mut pool) = self.pool.take() else {
            timer.start();
            let r = self.run(position, reps);
            let t = timer.stop();
            return r.map(|()| t);
        };
        let r = self.run_isolated(&mut pool, position, reps, timer);
        self.pool = Some(pool);
        r
    }

    /// Runs candidate `position` `reps` times in a row in this process; the
    /// first error or panic ends it.
    pub(super) fn run(&mut self, position: Option<usize>, reps: u32) -> Result<(), String> {
        let Some(&(r, t)) = position.and_then(|p| self.cands.get(p)) else {
            return Err("no such candidate".to_string());
        };
        let op = self.op;
        let _m = tracing::info_span!("measure", runner = op.runner_names()[r].as_str(), tactic = t)
            .entered();
        let inputs = self.inputs()?;
        let res = run_reps(op, (r, t), inputs, reps);
        if res.is_err() {
            // The inputs may be half-written: rebuild them for the next one.
            self.io = None;
        }
        res.map_err(|(_, e)| e)
    }

    /// Runs candidate `position` in the bucket's worker, starting one first
    /// when none runs.
    fn run_isolated(
        &mut self,
        pool: &mut Pool,
        position: Option<usize>,
        reps: u32,
        timer: &mut dyn Timer,
    ) -> Result<f64, String> {
        let Some(p) = position.filter(|&p| p < self.cands.len()) else {
            return Err("no such candidate".to_string());
        };
        let (op, shapes, cands) = (self.op, self.shapes, self.cands);
        let _m = tracing::info_span!(
            "measure",
            runner = op.runner_names()[cands[p].0].as_str(),
            tactic = cands[p].1,
            isolated = true
        )
        .entered();
        if !pool.has_worker() {
            if pool.forks() {
                // Built once here, inherited by every worker of the bucket.
                self.inputs()?;
            }
            let io = &mut self.io;
            // What a forked worker runs for each request (in the child, on
            // its copy of the inputs and of the timer).
            let mut serve = |j: usize, reps: u32| -> Result<f64, (ErrorKind, String)> {
                let Some(&(r, t)) = cands.get(j) else {
                    return Err((ErrorKind::Error, format!("no candidate {j}")));
                };
                if io.is_none() {
                    let built = I::synthetic(shapes).map_err(|e| {
                        (ErrorKind::Error, format!("cannot build synthetic inputs: {e}"))
                    })?;
                    *io = Some(built);
                }
                let Some(inputs) = io.as_mut() else {
                    return Err((ErrorKind::Error, "no inputs".to_string()));
                };
                timer.start();
                let res = run_reps(op, (r, t), inputs, reps);
                let us = timer.stop();
                res.map(|()| us).map_err(|(kind, e)| {
                    *io = None;
                    let kind = if kind == FailureKind::Panic {
                        ErrorKind::Panic
                    } else {
                        ErrorKind::Error
                    };
                    (kind, e)
                })
            };
            pool.start(&mut serve, &|| init_of(op, shapes, cands)).map_err(|f| f.message)?;
        }
        pool.run(p, reps, cands[p] == (0, 0)).map_err(|f| {
            if f.kind.is_hard() {
                self.hard_failures.push(CandidateFailure {
                    position: p,
                    kind: f.kind,
                    message: f.message.clone(),
                });
            }
            f.message
        })
    }

    /// The synthetic inputs, built on first use.
    fn inputs(&mut self) -> Result<&mut I, String> {
        if self.io.is_none() {
            match I::synthetic(self.shapes) {
                Ok(v) => self.io = Some(v),
                Err(e) => {
                    let msg = format!("cannot build synthetic inputs: {e}");
                    self.first_error.get_or_insert_with(|| msg.clone());
                    return Err(msg);
                }
            }
        }
        self.io.as_mut().ok_or_else(|| "no inputs".to_string())
    }
}

/// Runs `(runner, tactic)` of `op` `reps` times on `inputs`; the first error
/// or panic ends it (with its kind and text).
fn run_reps<I: TuneInputs>(
    op: &Op<I>,
    (r, t): (usize, usize),
    inputs: &mut I,
    reps: u32,
) -> Result<(), (FailureKind, String)> {
    for _ in 0..reps {
        match isolate(|| op.runners()[r].run(t, inputs)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err((FailureKind::Error, e.0)),
            Err(p) => return Err((FailureKind::Panic, format!("panicked: {p}"))),
        }
    }
    Ok(())
}

/// The init message of a spawned worker for this bucket.
fn init_of<I: TuneInputs>(op: &Op<I>, shapes: &[Vec<u64>], cands: &[(usize, usize)]) -> Init {
    Init {
        protocol: protocol::PROTOCOL_VERSION,
        op: op.name().to_string(),
        bucket: shapes.to_vec(),
        candidates: cands
            .iter()
            .map(|&(r, t)| InitCandidate {
                runner: r as u32,
                runner_name: op.runner_names()[r].clone(),
                tactic: t as u32,
                value: op.tactics(r).get(t).cloned().unwrap_or(serde_json::Value::Null),
            })
            .collect(),
        spec: serde_json::Value::Null,
    }
}
