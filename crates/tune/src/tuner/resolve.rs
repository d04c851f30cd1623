//! Measuring and deciding one bucket: alone (measure every candidate, apply
//! the near-tie rule) or together with the other ranks through the
//! coordinator, which may also confirm a cached hit instead.
//!
//! Owns the choice between the two ways and their common outcome. It never
//! stores anything: the recording step does.

use super::inputs::Bench;
use crate::decide::decide;
use crate::measure::{measure_timed, Sampling, Timer};
use crate::op::Op;
use crate::runner::TuneInputs;
use crate::strategy::{BucketCtx, Coordinator, Measured, Resolved, Strategy};
use ranktune_cache::{Section, Stats};

/// What the measuring of a bucket found.
pub(super) struct Outcome {
    /// Per candidate (positions of the candidate list): statistics or error.
    pub(super) results: Vec<Measured>,
    /// The winning position; `None` when every candidate failed.
    pub(super) winner: Option<usize>,
    /// Where the entry goes.
    pub(super) section: Section,
    /// The entry's timestamp.
    pub(super) created_unix: u64,
    /// Candidates this rank measured itself.
    pub(super) measured_here: usize,
    /// Why a collective strategy fell back to independent tuning.
    pub(super) fallback: Option<String>,
}

/// How a bucket was settled.
pub(super) enum Settled {
    /// Every rank has the same cached choice `(runner, tactic)`: confirmed,
    /// nothing measured.
    Confirmed(u32, u32),
    /// Measured (alone or together).
    Measured(Outcome),
}

/// The bucket being settled and how to measure it.
pub(super) struct Ask<'a, 'b, I> {
    pub(super) op: &'a Op<I>,
    pub(super) shapes: &'a [Vec<u64>],
    pub(super) cands: &'a [(usize, usize)],
    pub(super) strategy: Strategy,
    /// This rank's cached choice, when the ranks must agree on it.
    pub(super) local_hit: Option<(u32, u32)>,
    pub(super) sampling: Sampling,
    pub(super) tie_tolerance: f64,
    /// This rank's section (entries tuned alone go there).
    pub(super) section: Section,
    pub(super) bench: &'b mut Bench<'a, I>,
}

/// Settles a bucket: through `coordinator` when the strategy is collective
/// and there is one, alone otherwise.
pub(super) fn settle<I: TuneInputs>(
    ask: Ask<'_, '_, I>,
    timer: &mut dyn Timer,
    coordinator: Option<&mut Coordinator>,
) -> Settled {
    let Ask { op, shapes, cands, strategy, local_hit, sampling, tie_tolerance, section, bench } =
        ask;
    // Measures the candidates at `positions` (into `cands`) on this rank,
    // in this process or in the bucket's worker (the bench knows which).
    let mut measure = |positions: &[usize]| -> Vec<Result<Stats, String>> {
        measure_timed(sampling, positions.len(), &mut |j, reps| {
            bench.run_timed(positions.get(j).copied(), reps, timer)
        })
    };
    match coordinator.filter(|_| strategy.is_collective()) {
        Some(coord) => {
            let ids: Vec<(u32, u32)> = cands.iter().map(|&(r, t)| (r as u32, t as u32)).collect();
            let ctx = BucketCtx {
                op: op.name(),
                bucket: shapes,
                checksum: op.checksum(),
                candidates: &ids,
                local_hit,
                tie_tolerance,
            };
            let res = coord.resolve(strategy, &ctx, &mut measure);
            if let (Resolved::Hit, Some((runner, tactic))) = (res.kind, local_hit) {
                return Settled::Confirmed(runner, tactic);
            }
            Settled::Measured(Outcome {
                section: res.section(coord.rank()).unwrap_or(section),
                fallback: res.fallback.map(|f| f.reason),
                results: res.results,
                winner: res.winner,
                created_unix: res.created_unix,
                measured_here: res.measured_here,
            })
        }
        None => {
            let all: Vec<usize> = (0..cands.len()).collect();
            let results = measure(&all);
            let stats: Vec<Option<&Stats>> = results.iter().map(|r| r.as_ref().ok()).collect();
            let winner = decide(&stats, tie_tolerance);
            Settled::Measured(Outcome {
                results,
                winner,
                section,
                created_unix: ranktune_core::clock::unix_now(),
                measured_here: cands.len(),
                fallback: None,
            })
        }
    }
}
