//! Per-rank profiling traces: recording (one Chrome trace per rank) and
//! analysis (merging ranks onto one timeline, finding the slow rank).

pub mod analyze;
