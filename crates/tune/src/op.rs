//! An op bundled for tuning: its name, runners and config, with the
//! fingerprints, tactic lists and candidate-set checksum computed once.
//!
//! Owns the op's identity. Building an [`Op`] calls every runner's
//! `fingerprint` and `tactics` once, so `choose_one` never has to.

use super::choice::Choice;
use super::config::TuningConfig;
use super::key::BucketKey;
use super::runner::{RunError, Runner, StableHasher, TuneInputs};
use std::fmt;

/// Why an [`Op`] cannot be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// No runners.
    #[error("op {0:?} has no runners; give it at least one (runner 0 tactic 0 is the fallback)")]
    NoRunners(String),
    /// Runner 0 has no tactic to fall back on.
    #[error("op {op:?}: runner {runner:?} (the first) has no tactics, so there is no fallback")]
    NoFallback {
        /// Op name.
        op: String,
        /// Runner name.
        runner: String,
    },
    /// Two runners share a name.
    #[error("op {op:?}: two runners are named {runner:?}; runner names must be unique")]
    DuplicateRunner {
        /// Op name.
        op: String,
        /// Runner name.
        runner: String,
    },
}

/// The checksum of an op's candidate set: a stable hash of the op's name
/// and, per runner in canonical order, its name, fingerprint and tactics.
/// An entry stored under another checksum is stale
/// ([`StaleReason::Checksum`](crate::StaleReason::Checksum)).
///
/// [`Op::new`] computes it for Rust runners; `ranktune.autotune` asks for it
/// for Python candidates, so both sides name a candidate set alike.
pub fn candidate_checksum<'a>(
    op: &str,
    runners: impl IntoIterator<Item = (&'a str, &'a str, &'a [serde_json::Value])>,
) -> String {
    let mut h = StableHasher::default();
    h.write_str(op);
    for (name, fingerprint, tactics) in runners {
        h.write_str(name);
        h.write_str(fingerprint);
        for t in tactics {
            h.write_str(&t.to_string());
        }
        h.write(&[0xfe]);
    }
    h.hex()
}

/// Reads an op's output values from its inputs (see [`Reference`]).
type OutputOf<I> = dyn Fn(&I) -> Vec<f64> + Send + Sync;

/// The reference check of a cached tactic (see [`Op::with_reference`]):
/// the op's output values, compared with the fallback's on the same
/// synthetic inputs within a tolerance.
pub struct Reference<I> {
    output: Box<OutputOf<I>>,
    rtol: f64,
    atol: f64,
}

impl<I> Reference<I> {
    /// A reference check reading the output values with `output`; a value
    /// passes when `|got - want| <= atol + rtol * |want|`.
    pub fn new(
        output: impl Fn(&I) -> Vec<f64> + Send + Sync + 'static,
        rtol: f64,
        atol: f64,
    ) -> Self {
        Reference { output: Box::new(output), rtol, atol }
    }

    /// Compares `got`'s output with `want`'s: `Err` says how many values
    /// are off, and the first.
    pub fn compare(&self, want: &I, got: &I) -> Result<(), String> {
        let (w, g) = ((self.output)(want), (self.output)(got));
        if w.len() != g.len() {
            return Err(format!("its output has {} values, the fallback's {}", g.len(), w.len()));
        }
        let bad: Vec<usize> = (0..w.len())
            .filter(|&i| {
                let (a, b) = (w[i], g[i]);
                !(a == b || (a - b).abs() <= self.atol + self.rtol * a.abs())
            })
            .collect();
        match bad.first() {
            None => Ok(()),
            Some(&i) => Err(format!(
                "{} of {} output values differ from the fallback's beyond rtol {} / atol {} \
                 (first: [{i}] is {}, the fallback's {})",
                bad.len(),
                w.len(),
                self.rtol,
                self.atol,
                g[i],
                w[i]
            )),
        }
    }
}

/// An op ready for [`Tuner::choose_one`](crate::Tuner::choose_one).
pub struct Op<I> {
    name: String,
    runners: Vec<Box<dyn Runner<I>>>,
    config: TuningConfig,
    names: Vec<String>,
    fingerprints: Vec<String>,
    tactics: Vec<Vec<serde_json::Value>>,
    checksum: String,
    id: u64,
    /// Whether cached tactics are checked on first use, and against what.
    validation: Option<Option<Reference<I>>>,
}

impl<I> fmt::Debug for Op<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Op")
            .field("name", &self.name)
            .field("runners", &self.names)
            .field("checksum", &self.checksum)
            .finish()
    }
}

impl<I: TuneInputs> Op<I> {
    /// Bundles an op. Runner 0's tactic 0 is the fallback.
    pub fn new(
        name: impl Into<String>,
        runners: Vec<Box<dyn Runner<I>>>,
        config: TuningConfig,
    ) -> Result<Self, OpError> {
        let name = name.into();
        if runners.is_empty() {
            return Err(OpError::NoRunners(name));
        }
        let names: Vec<String> = runners.iter().map(|r| r.name().to_string()).collect();
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(OpError::DuplicateRunner { op: name, runner: n.clone() });
            }
        }
        let fingerprints: Vec<String> = runners.iter().map(|r| r.fingerprint()).collect();
        let tactics: Vec<Vec<serde_json::Value>> = runners.iter().map(|r| r.tactics()).collect();
        if tactics[0].is_empty() {
            return Err(OpError::NoFallback { op: name, runner: names[0].clone() });
        }
        let checksum = candidate_checksum(
            &name,
            names
                .iter()
                .zip(&fingerprints)
                .zip(&tactics)
                .map(|((n, fp), ts)| (n.as_str(), fp.as_str(), ts.as_slice())),
        );
        let mut idh = StableHasher::default();
        idh.write_str(&name);
        idh.write_str(&checksum);
        Ok(Op {
            id: idh.finish(),
            name,
            runners,
            config,
            names,
            fingerprints,
            tactics,
            checksum,
            validation: None,
        })
    }

    /// Checks each cached tactic on its first use in this process, before
    /// it is returned: it runs once on synthetic inputs of its bucket's
    /// shape (an error or a panic fails it) and its runner's
    /// [`Runner::validate`] accepts what it left. A tactic that fails is
    /// replaced by the fallback for this process (one warning), put on the
    /// cache's blocklist (kind `validation`) by the next save, and tuned
    /// again by the next tuning run. Later uses cost what a hit always does.
    pub fn with_validation(mut self) -> Self {
        if self.validation.is_none() {
            self.validation = Some(None);
        }
        self
    }

    /// [`with_validation`](Self::with_validation), and the check compares
    /// the tactic's output with the fallback's (runner 0 tactic 0) on the
    /// same synthetic inputs ([`Reference`]); [`TuneInputs::synthetic`]
    /// must then build the same values every time.
    pub fn with_reference(mut self, reference: Reference<I>) -> Self {
        self.validation = Some(Some(reference));
        self
    }

    /// Whether cached tactics are checked on first use.
    pub fn validates(&self) -> bool {
        self.validation.is_some()
    }

    /// The reference check, if the op has one.
    pub fn reference(&self) -> Option<&Reference<I>> {
        self.validation.as_ref().and_then(Option::as_ref)
    }

    /// The op's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The runners, in canonical order.
    pub fn runners(&self) -> &[Box<dyn Runner<I>>] {
        &self.runners
    }

    /// Runner names, in canonical order.
    pub fn runner_names(&self) -> &[String] {
        &self.names
    }

    /// Runner `r`'s fingerprint.
    pub fn fingerprint(&self, r: usize) -> &str {
        self.fingerprints.get(r).map_or("", String::as_str)
    }

    /// Runner `r`'s tactics.
    pub fn tactics(&self, r: usize) -> &[serde_json::Value] {
        self.tactics.get(r).map_or(&[], Vec::as_slice)
    }

    /// The bucketing config.
    #[inline]
    pub fn config(&self) -> &TuningConfig {
        &self.config
    }

    /// Checksum of the candidate set (op, runner names, fingerprints, tactics).
    pub fn checksum(&self) -> &str {
        &self.checksum
    }

    /// In-memory id (hash of name and checksum).
    #[inline]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The bucket key of a call (see [`TuningConfig::key_of`]).
    #[inline]
    pub fn key_of(&self, inputs: &I) -> Option<BucketKey> {
        self.config.key_of(inputs)
    }

    /// The tactic value of a choice.
    pub fn tactic(&self, choice: Choice) -> Option<&serde_json::Value> {
        self.tactics.get(choice.runner_index as usize)?.get(choice.tactic_index as usize)
    }

    /// Runs a choice on `io`.
    pub fn run(&self, choice: Choice, io: &mut I) -> Result<(), RunError> {
        match self.runners.get(choice.runner_index as usize) {
            Some(r) => r.run(choice.tactic_index as usize, io),
            None => Err(RunError(format!("op {}: no runner {}", self.name, choice.runner_index))),
        }
    }
}
