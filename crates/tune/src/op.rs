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
        Ok(Op { id: idh.finish(), name, runners, config, names, fingerprints, tactics, checksum })
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
