//! The integration tests of `ranktune-trace-analyze`, one module per topic, linked into one test
//! binary: one link instead of one per file (a fresh `cargo test` spends most
//! of its time linking test binaries).

mod collectives;
mod pftrace;
