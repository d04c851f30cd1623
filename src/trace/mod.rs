//! Per-rank profiling traces.
