//! Recording what tuning a bucket found: the entry for the next save, the
//! [`TuneRecord`] for reports, the op's statistics; and handing the pending
//! entries to the session.
//!
//! Owns the pending entries and the records. It never measures, decides or
//! publishes, and never does I/O (the session saves).

use super::blocked::{self, SkippedTactic};
use super::hot::SlotKind;
use super::resolve::Outcome;
use super::{Inner, Tuner};
use crate::choice::{Choice, ChoiceSource};
use crate::failure::CandidateFailure;
use crate::op::Op;
use crate::runner::TuneInputs;
use crate::strategy::Strategy;
use ranktune_cache::{CacheData, Candidate, Entry, EntryKey, Section, Stats};
use std::time::Instant;

/// One tuned bucket, for reports.
#[derive(Clone, Debug)]
pub struct TuneRecord {
    /// Op name.
    pub op: String,
    /// The bucket.
    pub bucket: Vec<Vec<u64>>,
    /// Chosen runner name (the fallback's when all failed).
    pub runner: String,
    /// Chosen tactic.
    pub tactic: serde_json::Value,
    /// Chosen candidate's median, µs (`None` when all failed).
    pub best_us: Option<f64>,
    /// The fallback's median, µs, when it was measured.
    pub fallback_us: Option<f64>,
    /// How many samples that median is of (the adaptive sampler stops
    /// measuring a clearly slower candidate after one or two).
    pub fallback_samples: Option<u32>,
    /// Candidates measured (including failures).
    pub measured: usize,
    /// Candidates that failed, with their messages.
    pub failures: Vec<(String, serde_json::Value, String)>,
    /// Time spent measuring this bucket.
    pub seconds: f64,
    /// The strategy the op was tuned with.
    pub strategy: Strategy,
    /// Where the entry went: `Shared` when tuned together with the other
    /// ranks, this rank's section otherwise.
    pub section: Section,
    /// Candidates this rank measured itself (fewer than `measured` under the
    /// broadcast and parallel strategies).
    pub measured_here: usize,
    /// Why a collective strategy fell back to independent tuning for this
    /// bucket (a rank did not arrive, ranks disagreed, …).
    pub fallback: Option<String>,
    /// Known-bad tactics (the cache's blocklist) not measured.
    pub skipped: Vec<SkippedTactic>,
    /// Candidates that failed hard here (crash, timeout, memory) and went
    /// on the blocklist: (runner, tactic, kind).
    pub blocked: Vec<(String, serde_json::Value, String)>,
    /// Retried known-bad tactics that worked and left the blocklist.
    pub unblocked: usize,
    /// The candidates that crashed, timed out or ran out of memory on this
    /// rank (isolated measuring only; positions into the bucket's valid
    /// candidates).
    pub hard_failures: Vec<CandidateFailure>,
    /// Isolated worker processes started for this bucket on this rank.
    pub worker_starts: u32,
    /// The time they took to start (until ready), seconds.
    pub worker_start_seconds: f64,
}

/// A measured bucket, to be recorded.
pub(super) struct Measured<'a, I> {
    pub(super) op: &'a Op<I>,
    pub(super) op_slot: u32,
    pub(super) shapes: Vec<Vec<u64>>,
    pub(super) cands: &'a [(usize, usize)],
    pub(super) strategy: Strategy,
    pub(super) outcome: Outcome,
    /// When measuring started.
    pub(super) t0: Instant,
    /// The first failure to build synthetic inputs, if any.
    pub(super) first_error: Option<String>,
    /// This rank's hard failures (crash, timeout, memory: isolated
    /// measuring), by position in `cands`: recorded on the blocklist.
    pub(super) hard: Vec<CandidateFailure>,
    /// Known-bad tactics left out of `cands`.
    pub(super) skipped: Vec<SkippedTactic>,
    /// Isolated workers started for the bucket, and their start-up seconds.
    pub(super) workers: (u32, f64),
}

impl Tuner {
    /// Records a measured bucket: its entry (when a candidate won), the
    /// op's statistics and a [`TuneRecord`]. Returns the choice and the kind
    /// of slot to publish for it.
    pub(super) fn record<I: TuneInputs>(
        &self,
        inner: &mut Inner,
        m: Measured<'_, I>,
    ) -> (Choice, SlotKind) {
        let Measured {
            op,
            op_slot,
            shapes,
            cands,
            strategy,
            outcome,
            t0,
            first_error,
            hard,
            skipped,
            workers,
        } = m;
        let Outcome { results, winner, section, created_unix, measured_here, fallback } = outcome;
        let noted = blocked::note(
            inner,
            op,
            &shapes,
            cands,
            &hard,
            &|p| results.get(p).is_some_and(Result::is_ok),
            &self.opts.env_digest,
            self.opts.rank,
        );
        let stats: Vec<Option<&Stats>> = results.iter().map(|r| r.as_ref().ok()).collect();
        let candidates = candidates_of(op, cands, &results);
        let failures: Vec<(String, serde_json::Value, String)> = candidates
            .iter()
            .filter_map(|c| c.error.clone().map(|e| (c.runner.clone(), c.tactic.clone(), e)))
            .collect();
        let fallback_stats =
            cands.iter().position(|&rt| rt == (0, 0)).and_then(|i| results[i].as_ref().ok());
        let fallback_us = fallback_stats.map(|s| s.median_us);
        let fallback_samples = fallback_stats.map(|s| s.samples);
        let seconds = t0.elapsed().as_secs_f64();
        let (choice, slot_kind) = match winner.filter(|&w| w < cands.len()) {
            Some(w) => {
                let (r, t) = cands[w];
                let time_us = stats[w].map_or(0.0, |s| s.median_us);
                let (ekey, entry) =
                    self.entry_for(op, &shapes, (r, t), time_us, candidates, created_unix);
                inner.pending.insert(section, ekey, entry);
                (
                    Choice {
                        runner_index: r as u32,
                        tactic_index: t as u32,
                        source: ChoiceSource::Tuned,
                    },
                    SlotKind::Hit,
                )
            }
            None => {
                tracing::warn!(
                    op = op.name(),
                    bucket = ?shapes,
                    "every candidate failed ({}); using the fallback",
                    failures.first().map_or_else(
                        || first_error.clone().unwrap_or_else(|| "no valid candidates".into()),
                        |f| f.2.clone()
                    )
                );
                (Choice::FALLBACK, SlotKind::Failed)
            }
        };
        let st = &mut inner.ops[op_slot as usize].stats;
        st.tuned += 1;
        st.failed_tactics += failures.len() as u64;
        st.tuning_seconds += seconds;
        st.worker_starts += u64::from(workers.0);
        st.worker_start_seconds += workers.1;
        if workers.0 > 0 {
            tracing::info!(
                op = op.name(),
                bucket = ?shapes,
                "isolated measuring: {} worker start(s), {:.1} ms starting, {} hard failure(s)",
                workers.0,
                workers.1 * 1e3,
                hard.len()
            );
        }
        inner.records.push(TuneRecord {
            op: op.name().to_string(),
            bucket: shapes,
            runner: op.runner_names()[choice.runner_index as usize].clone(),
            tactic: op.tactics(choice.runner_index as usize)[choice.tactic_index as usize].clone(),
            best_us: winner.and_then(|w| stats.get(w).copied().flatten()).map(|s| s.median_us),
            fallback_us,
            fallback_samples,
            measured: cands.len(),
            failures,
            seconds,
            strategy,
            section,
            measured_here,
            fallback,
            skipped,
            blocked: noted.blocked,
            unblocked: noted.cleared,
            hard_failures: hard,
            worker_starts: workers.0,
            worker_start_seconds: workers.1,
        });
        (choice, slot_kind)
    }

    /// The entry (and its key) of a bucket's winner `(r, t)`.
    fn entry_for<I: TuneInputs>(
        &self,
        op: &Op<I>,
        shapes: &[Vec<u64>],
        (r, t): (usize, usize),
        time_us: f64,
        candidates: Vec<Candidate>,
        created_unix: u64,
    ) -> (EntryKey, Entry) {
        let ekey = EntryKey {
            op: op.name().to_string(),
            runner: op.runner_names()[r].clone(),
            fingerprint: op.fingerprint(r).to_string(),
            bucket: ranktune_cache::sizes_bucket(shapes),
        };
        let entry = Entry {
            runner_index: r as u32,
            tactic: op.tactics(r)[t].clone(),
            time_us,
            candidates,
            checksum: op.checksum().to_string(),
            env: self.opts.env_digest.clone(),
            created_unix,
        };
        (ekey, entry)
    }

    /// Takes the decisions tuned since the last call, ready for a merging
    /// save (with this tuner's identity in `metadata.environments`).
    pub fn take_pending(&self) -> CacheData {
        let mut inner = self.lock();
        let mut data = std::mem::take(&mut inner.pending);
        if !data.is_unchanged_update() {
            data.metadata.lib_version = self.opts.identity.lib_version.clone();
            data.metadata.updated_unix = ranktune_core::clock::unix_now();
            data.metadata.created_unix = data.metadata.updated_unix;
            data.metadata
                .environments
                .insert(self.opts.env_digest.clone(), self.opts.identity.clone());
        }
        data
    }

    /// Whether anything waits to be saved (decisions, blocklist records or
    /// clears): what a checkpoint asks before it takes anything.
    pub fn has_pending(&self) -> bool {
        !self.lock().pending.is_unchanged_update()
    }

    /// Puts decisions back after a failed save, so a later save retries them.
    pub fn restore_pending(&self, data: CacheData) {
        let mut inner = self.lock();
        let newer = std::mem::take(&mut inner.pending.blocklist);
        inner.pending.blocklist = data.blocklist.clone();
        inner.pending.blocklist.extend(newer);
        for (section, key, entry) in data.iter() {
            if inner.pending.get(section, key).is_none() {
                inner.pending.insert(section, key.clone(), entry.clone());
            }
        }
    }

    /// Buckets tuned so far, in order.
    pub fn records(&self) -> Vec<TuneRecord> {
        self.lock().records.clone()
    }
}

/// Every candidate with its result, for the entry.
fn candidates_of<I: TuneInputs>(
    op: &Op<I>,
    cands: &[(usize, usize)],
    results: &[Result<Stats, String>],
) -> Vec<Candidate> {
    cands
        .iter()
        .zip(results)
        .map(|(&(r, t), res)| Candidate {
            runner: op.runner_names()[r].clone(),
            runner_index: r as u32,
            tactic: op.tactics(r)[t].clone(),
            stats: res.as_ref().ok().cloned(),
            error: res.as_ref().err().cloned(),
        })
        .collect()
}
