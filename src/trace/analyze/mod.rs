//! Trace analysis: merge and summary.
