//! The integration tests of `ranktune-cache`, one module per topic, linked into one test
//! binary: one link instead of one per file (a fresh `cargo test` spends most
//! of its time linking test binaries).

mod cache_blocklist;
mod cache_corpus;
mod cache_dims;
mod cache_file;
mod cache_format_props;
mod cache_processes;
mod cache_redis;
mod cache_sections;
mod cache_spool_trust;
mod redis_bounds;
