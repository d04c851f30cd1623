//! The answer of `choose_one`: which runner and tactic, and where it came from.
//!
//! Owns the [`Choice`] and [`ChoiceSource`] value types only. It depends on nothing
//! else in the crate, so both the op (which runs a choice) and the tuner
//! (which makes one) can use it without depending on each other.

/// Where a [`Choice`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChoiceSource {
    /// A stored decision (loaded or tuned earlier).
    Cache,
    /// Measured by this call.
    Tuned,
    /// The fallback: no decision stored (or every candidate failed).
    Fallback,
}

/// The answer of `choose_one`: runner and tactic by canonical index.
///
/// Words: a *tactic* is a runner's configuration as a value (what the cache
/// stores, e.g. `{"naive":{"order":"ikj"}}`); a *tactic index* is its
/// position in the runner's list, which is what a `Choice` carries
/// ([`crate::Op::tactic`] turns it back into the value). Likewise the runner
/// index is a position in the op's runner list; a runner's *name* is what
/// the cache stores next to its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Index into the op's runners.
    pub runner_index: u32,
    /// Index into that runner's tactics.
    pub tactic_index: u32,
    /// Where it came from.
    pub source: ChoiceSource,
}

impl Choice {
    /// Runner 0, tactic 0.
    pub const FALLBACK: Choice =
        Choice { runner_index: 0, tactic_index: 0, source: ChoiceSource::Fallback };
}
