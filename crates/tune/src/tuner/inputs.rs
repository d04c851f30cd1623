//! Running candidates on synthetic inputs: the inputs of a bucket's shapes
//! are built once, shared by the candidates, and rebuilt after a failed run
//! (which may have left them half-written).
//!
//! Owns the inputs and the run loop of one bucket. Runs are isolated: an
//! error or a panic fails that candidate only. It never times anything (the
//! sampler does) and never decides.

use super::isolate::isolate;
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
}

impl<'a, I: TuneInputs> Bench<'a, I> {
    /// Runs of `op`'s candidates `cands` on inputs of `shapes`.
    pub(super) fn new(op: &'a Op<I>, shapes: &'a [Vec<u64>], cands: &'a [(usize, usize)]) -> Self {
        Bench { op, shapes, cands, io: None, first_error: None }
    }

    /// Runs candidate `position` (into the candidates) `reps` times in a
    /// row; the first error or panic ends it.
    pub(super) fn run(&mut self, position: Option<usize>, reps: u32) -> Result<(), String> {
        let Some(&(r, t)) = position.and_then(|p| self.cands.get(p)) else {
            return Err("no such candidate".to_string());
        };
        let op = self.op;
        let _m = tracing::info_span!("measure", runner = op.runner_names()[r].as_str(), tactic = t)
            .entered();
        let inputs = self.inputs()?;
        for _ in 0..reps {
            let err = match isolate(|| op.runners()[r].run(t, inputs)) {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e.0,
                Err(p) => format!("panicked: {p}"),
            };
            // The inputs may be half-written: rebuild them for the next one.
            self.io = None;
            return Err(err);
        }
        Ok(())
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
