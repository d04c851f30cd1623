//! The integration tests of `ranktune-formats`, one module per topic, linked into one test
//! binary: one link instead of one per file (a fresh `cargo test` spends most
//! of its time linking test binaries).

mod cache_interop_flashinfer;
mod cache_interop_peers;
mod cache_interop_peers_flashinfer;
mod cache_interop_peers_moe;
mod cache_interop_pyliteral;
mod cache_interop_triton;
mod cache_interop_trtllm;
mod cache_interop_vllm_moe;
