//! The integration tests of `ranktune-tune`, one module per topic, linked into
//! one test binary (one link instead of one per file). `tune_alloc` (a
//! counting global allocator) and `tune_key_process` (which re-runs its own
//! binary in a second process) stay binaries of their own.

mod lost_worker_rule;
mod miss_rule;
mod strategy_processes;
mod strategy_tuner;
mod tune_blocklist;
mod tune_bucket;
mod tune_durable;
mod tune_isolation;
mod tune_measure;
#[path = "../tune_support/mod.rs"]
mod tune_support;
mod tune_tuner;
mod tune_warn;
