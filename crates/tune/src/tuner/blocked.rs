//! The tuner's side of the blocklist: skipping known-bad tactics when a
//! bucket is tuned, remembering the candidates that failed hard, and
//! forgetting a retried tactic that now works.
//!
//! Which records apply (see `ranktune_cache::Blocklist` for the bucket
//! rule): for an op tuned alone, the records of this tuner's environment;
//! for an op tuned together with the other ranks (a collective strategy),
//! the records of **every** environment in the loaded cache — the ranks of
//! one job load the same file, so each computes the same list and the
//! candidate lists they agree on are identical, and the one choice they
//! make runs on every rank, so a tactic known to fail on any of their
//! environments must not win. The records used are the ones loaded (taken
//! in by [`Tuner::load`](super::Tuner::load)); failures found while tuning
//! go to the next save, not into this run's lists, so the ranks' lists
//! cannot drift apart during a run. Should they differ anyway (a rank that
//! loaded the cache after another rank saved into it), the ranks' agreement
//! on the candidate set sees it and the bucket is tuned independently, with
//! a warning; nothing hangs.
//!
//! What is recorded: crashes, timeouts and memory failures (only isolated
//! measuring sees them) and failed validations of cached tactics. A plain
//! `Err` or a panic of a runner is not: those are often the runner saying
//! "not for this shape", and they cost the tuner nothing but that candidate.
//! The fallback (runner 0, tactic 0) is never skipped: it answers every miss,
//! and the report compares the winner with it.
//!
//! Owns those rules; never measures, never does I/O.

use super::Inner;
use crate::failure::{CandidateFailure, FailureKind};
use crate::op::Op;
use crate::runner::TuneInputs;
use ranktune_cache::{sizes_bucket, BlockKey, BlockKind, Blocked, Blocklist};
use serde::{Deserialize, Serialize};

/// Environment variable: any of `1`, `true`, `yes`, `on` makes tunes try
/// known-bad tactics again (`0`, `false`, `no`, `off` or empty: skip them).
pub const RETRY_FAILED_ENV: &str = "RANKTUNE_RETRY_FAILED";

/// `RANKTUNE_RETRY_FAILED` as a flag; a value that is not one of the words
/// above is an error naming it.
pub fn retry_failed_from_env() -> Result<bool, String> {
    match std::env::var(RETRY_FAILED_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(false),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(format!("{RETRY_FAILED_ENV} is not valid UTF-8; set it to 1 or 0"))
        }
        Ok(v) => parse_flag(&v).ok_or_else(|| {
            format!(
                "{RETRY_FAILED_ENV}={v:?} is not a yes/no value; set it to 1 (try known-bad \
                 tactics again) or 0 (skip them)"
            )
        }),
    }
}

fn parse_flag(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "" | "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// A known-bad tactic a tune skipped, for reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkippedTactic {
    /// Runner name.
    pub runner: String,
    /// The tactic.
    pub tactic: serde_json::Value,
    /// Why it is on the blocklist (`crash`, `timeout`, `memory`, `validation`).
    pub kind: String,
    /// The recorded failure's message.
    pub message: String,
}

/// The blocklist key of candidate `(r, t)` of `op` at `shapes` in `env`.
pub(super) fn key_of<I: TuneInputs>(
    op: &Op<I>,
    (r, t): (usize, usize),
    shapes: &[Vec<u64>],
    env: &str,
) -> BlockKey {
    BlockKey::new(
        op.name(),
        op.runner_names()[r].as_str(),
        op.fingerprint(r),
        &op.tactics(r)[t],
        env,
        sizes_bucket(shapes),
    )
}

/// The first record of `list` that blocks candidate `(r, t)` of `op` at
/// `shapes` in `env` (any environment when `None`).
pub(super) fn blocking<'a, I: TuneInputs>(
    list: &'a Blocklist,
    op: &'a Op<I>,
    (r, t): (usize, usize),
    shapes: &'a [Vec<u64>],
    env: Option<&'a str>,
) -> Option<(&'a BlockKey, &'a Blocked)> {
    let runner = op.runner_names()[r].as_str();
    let fingerprint = op.fingerprint(r);
    let text = ranktune_cache::tactic_text(&op.tactics(r)[t]);
    list.blocking(op.name(), env, shapes).find(|(k, _)| {
        k.runner == runner && k.fingerprint == fingerprint && k.tactic_text() == text
    })
}

/// True when a record of `list` blocks some tactic of one of `op`'s
/// runners (same name and fingerprint) at `shapes` in `env`.
pub(super) fn any_blocked<I: TuneInputs>(
    list: &Blocklist,
    op: &Op<I>,
    shapes: &[Vec<u64>],
    env: Option<&str>,
) -> bool {
    list.blocking(op.name(), env, shapes).any(|(k, _)| {
        op.runner_names()
            .iter()
            .enumerate()
            .any(|(r, name)| *name == k.runner && op.fingerprint(r) == k.fingerprint)
    })
}

/// The candidates to measure and the known-bad ones skipped, from `cands`
/// (canonical order kept). With `retry` nothing is skipped. `env` is the
/// environment whose records apply (`None`: every one, for collective
/// strategies).
pub(super) fn split<I: TuneInputs>(
    list: &Blocklist,
    op: &Op<I>,
    shapes: &[Vec<u64>],
    cands: Vec<(usize, usize)>,
    env: Option<&str>,
    retry: bool,
) -> (Vec<(usize, usize)>, Vec<SkippedTactic>) {
    if retry || list.is_empty() {
        return (cands, Vec::new());
    }
    let mut kept = Vec::with_capacity(cands.len());
    let mut skipped = Vec::new();
    for c in cands {
        match blocking(list, op, c, shapes, env).filter(|_| c != (0, 0)) {
            Some((_, rec)) => skipped.push(SkippedTactic {
                runner: op.runner_names()[c.0].clone(),
                tactic: op.tactics(c.0)[c.1].clone(),
                kind: rec.kind.to_string(),
                message: rec.message.clone(),
            }),
            None => kept.push(c),
        }
    }
    (kept, skipped)
}

/// The blocklist kind of a failure kind, for the kinds that are recorded
/// (see the module docs); `None` for errors and panics.
pub(super) fn recorded_kind(kind: FailureKind) -> Option<BlockKind> {
    match kind {
        FailureKind::Crash => Some(BlockKind::Crash),
        FailureKind::Timeout => Some(BlockKind::Timeout),
        FailureKind::Memory => Some(BlockKind::Memory),
        FailureKind::Validation => Some(BlockKind::Validation),
        FailureKind::Error | FailureKind::Panic => None,
    }
}

/// What recording a bucket's failures did to the pending blocklist.
pub(super) struct Noted {
    /// Records added, as (runner, tactic, kind).
    pub(super) blocked: Vec<(String, serde_json::Value, String)>,
    /// Retried known-bad candidates that worked and were cleared.
    pub(super) cleared: usize,
}

/// Records `failures` (positions into `cands`) of a bucket at `shapes` in
/// the pending blocklist, as seen now by `rank` in environment `env`; and,
/// for the candidates of `cands` that `loaded` blocks (they were retried)
/// and that now `worked`, clears the records that block them.
#[allow(clippy::too_many_arguments)]
pub(super) fn note<I: TuneInputs>(
    inner: &mut Inner,
    op: &Op<I>,
    shapes: &[Vec<u64>],
    cands: &[(usize, usize)],
    failures: &[CandidateFailure],
    worked: &dyn Fn(usize) -> bool,
    env: &str,
    rank: Option<u32>,
) -> Noted {
    let now = ranktune_core::clock::unix_now();
    let host = ranktune_core::rank::host_name();
    let mut noted = Noted { blocked: Vec::new(), cleared: 0 };
    for f in failures {
        let (Some(kind), Some(&c)) = (recorded_kind(f.kind), cands.get(f.position)) else {
            continue;
        };
        let key = key_of(op, c, shapes, env);
        let record = Blocked::new(kind.clone(), f.message.clone(), now, rank, host.as_str());
        inner.pending.blocklist.insert(key, record);
        noted.blocked.push((
            op.runner_names()[c.0].clone(),
            op.tactics(c.0)[c.1].clone(),
            kind.to_string(),
        ));
    }
    for (p, &c) in cands.iter().enumerate() {
        if !worked(p) {
            continue;
        }
        let stale: Vec<BlockKey> = inner
            .blocklist
            .blocking(op.name(), Some(env), shapes)
            .filter(|(k, _)| {
                k.runner == op.runner_names()[c.0]
                    && k.fingerprint == op.fingerprint(c.0)
                    && k.tactic_text() == ranktune_cache::tactic_text(&op.tactics(c.0)[c.1])
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            inner.blocklist.clear(k.clone(), now);
            inner.pending.blocklist.clear(k, now);
            noted.cleared += 1;
        }
    }
    noted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{RunError, Runner};
    use crate::{DynamicDim, Tuner, TunerOptions, TuningConfig};
    use ranktune_cache::{Identity, Section};

    struct One([usize; 1]);
    impl TuneInputs for One {
        fn num_inputs(&self) -> usize {
            1
        }
        fn shape(&self, _: usize) -> &[usize] {
            &self.0
        }
        fn synthetic(s: &[Vec<u64>]) -> Result<Self, RunError> {
            Ok(One([s[0][0] as usize]))
        }
    }
    struct R;
    impl Runner<One> for R {
        fn name(&self) -> &str {
            "r"
        }
        fn fingerprint(&self) -> String {
            "fp".into()
        }
        fn tactics(&self) -> Vec<serde_json::Value> {
            vec![0.into(), 1.into(), 2.into(), 3.into()]
        }
        fn valid(&self, _: usize, _: &[Vec<u64>]) -> bool {
            true
        }
        fn run(&self, _: usize, _: &mut One) -> Result<(), RunError> {
            Ok(())
        }
    }

    #[test]
    fn hard_failures_and_failed_validations_go_on_the_blocklist_errors_do_not() {
        let op = Op::new(
            "op",
            vec![Box::new(R) as Box<dyn Runner<One>>],
            TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)]),
        )
        .unwrap();
        let id = Identity {
            lib_version: "0".into(),
            device_kind: "cpu".into(),
            device_name: "x".into(),
            capability: String::new(),
            cores: 1,
        };
        let tuner = Tuner::new(TunerOptions::new(Section::Rank(3), id, "env"));
        let mut inner = tuner.lock();
        let cands = [(0, 1), (0, 2), (0, 3)];
        let fail = |position, kind| CandidateFailure { position, kind, message: format!("{kind}") };
        let failures = [
            fail(0, FailureKind::Crash),
            fail(1, FailureKind::Error),
            fail(2, FailureKind::Timeout),
            fail(9, FailureKind::Memory),
        ];
        let shapes = [vec![64]];
        let noted = note(&mut inner, &op, &shapes, &cands, &failures, &|_| false, "env", Some(3));
        let kinds: Vec<&str> = noted.blocked.iter().map(|b| b.2.as_str()).collect();
        assert_eq!(kinds, ["crash", "timeout"], "an error is not recorded, nor a bad position");
        let list = &inner.pending.blocklist;
        assert_eq!(list.len(), 2);
        let (k, r) = list.iter().next().unwrap();
        assert_eq!((k.tactic(), k.env.as_str(), r.rank), (1.into(), "env", Some(3)));
        assert!(list.blocks("op", "r", "fp", &3.into(), Some("env"), &[vec![128]]));
        assert!(!list.blocks("op", "r", "fp", &3.into(), Some("env"), &[vec![32]]));
    }

    #[test]
    fn flags_read_the_usual_words() {
        for v in ["1", "true", "YES", " on "] {
            assert_eq!(parse_flag(v), Some(true), "{v}");
        }
        for v in ["", "0", "False", "no", "off"] {
            assert_eq!(parse_flag(v), Some(false), "{v}");
        }
        assert_eq!(parse_flag("maybe"), None);
    }
}
