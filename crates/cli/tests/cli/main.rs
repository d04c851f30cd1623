//! The integration tests of `ranktune`, one module per topic, linked into one test
//! binary: one link instead of one per file (a fresh `cargo test` spends most
//! of its time linking test binaries).

mod blocklist_cli;
mod cache_cli;
mod cache_formats_cli;
mod cache_interop_cli;
mod cache_outputs;
mod cache_races;
mod cache_redis_cli;
mod cache_special_files;
mod cache_without_locks;
mod check_measured_elsewhere;
mod doc_examples;
mod e2e_trace;
mod environment_rules;
mod failed_save;
mod help_and_thresholds;
mod hostile_text;
mod isolate_cli;
mod quick_start_tree;
mod strategy_cli;
mod trace_analyze_badinput;
mod trace_analyze_merge;
mod trace_analyze_summary;
mod trace_runs;
mod trtllm_dims_cli;
mod tune_cli;
mod tune_durable;
mod tune_signals;
mod two_users;
mod unreadable;
