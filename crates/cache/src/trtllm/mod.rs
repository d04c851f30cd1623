//! Interoperability with TensorRT-LLM's autotuner cache files (the
//! reference): read them into [`CacheData`](crate::CacheData) and write
//! caches back in their format, so people can inspect, check and convert
//! caches made by that system.
//!
//! - [`pyliteral`]: the Python literal subset their keys and tactics use
//!   (parsed, never evaluated).
//! - [`tactic`]: tactics between Python literals and JSON, losslessly.
//! - [`key`]: their entry key, the `str()` of a 4-tuple.
//! - [`convert`]: whole documents in both directions.
//!
//! This module does no file I/O and never touches a store.

pub mod convert;
pub mod key;
pub mod pyliteral;
pub mod tactic;

pub use convert::{
    export, import, import_bytes, looks_like_trtllm, ConvertError, Exported, Imported,
};
