//! Errors of the tuning strategies.

use super::kind::Strategy;
use ranktune_collective::CollectiveError;

/// Why a strategy could not be set up or could not tune a bucket together.
///
/// The tuner never fails a job on the last two: it tunes the bucket
/// independently instead and reports the error (see [`super::Coordinator`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StrategyError {
    /// A strategy name that is not one of the four.
    #[error("unknown strategy {value:?}; use independent, broadcast, merge or parallel")]
    Parse {
        /// The text given.
        value: String,
    },
    /// A setting that does not parse (the one setting rule's sentence).
    #[error(transparent)]
    Setting(#[from] ranktune_core::setting::SettingError),
    /// A bad environment variable.
    #[error("{var}={value:?}: {reason}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong and what to write instead.
        reason: String,
    },
    /// A collective call of the strategy failed (a rank did not arrive in
    /// time, ranks diverged, a peer's data did not decode, I/O).
    #[error("{op} {bucket}: {strategy} tuning failed: {error}")]
    Collective {
        /// The op.
        op: String,
        /// The bucket, as compact JSON.
        bucket: String,
        /// The strategy that was running.
        strategy: Strategy,
        /// The collective's error (names the call and the ranks involved).
        error: Box<CollectiveError>,
    },
    /// The ranks reached the bucket but cannot tune it together (different
    /// strategies, different candidate sets, malformed results). Every rank
    /// sees the same data, so every rank reaches this same error.
    #[error("{op} {bucket}: ranks disagree: {what}")]
    Disagree {
        /// The op.
        op: String,
        /// The bucket, as compact JSON.
        bucket: String,
        /// What differs, naming the ranks.
        what: String,
        /// The ranks that differ from rank 0.
        ranks: Vec<u32>,
    },
}

impl StrategyError {
    /// The ranks this error blames (missing, diverging or disagreeing ranks).
    pub fn ranks(&self) -> Vec<u32> {
        match self {
            StrategyError::Collective { error, .. } => error.ranks(),
            StrategyError::Disagree { ranks, .. } => ranks.clone(),
            _ => Vec::new(),
        }
    }

    /// True when the ranks' collective calls may no longer line up or a rank
    /// is gone (a collective failed), as opposed to a clean disagreement.
    pub fn is_collective_failure(&self) -> bool {
        matches!(self, StrategyError::Collective { .. })
    }
}
