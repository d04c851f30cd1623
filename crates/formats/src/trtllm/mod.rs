//! Interoperability with TensorRT-LLM's autotuner cache files (format name
//! `trtllm`; the reference): read them into
//! [`CacheData`](ranktune_cache::CacheData) and write
//! caches back in their format, so people can inspect, check and convert
//! caches made by that system.
//!
//! Its parts (private; what users need is re-exported here):
//!
//! - `pyliteral`: the Python literal subset their keys and tactics use
//!   (parsed, never evaluated): [`parse_literal`], [`PyValue`];
//! - `tactic`: tactics between Python literals and JSON, losslessly:
//!   [`py_to_json`], [`json_to_py`];
//! - `key`: their entry key, the `str()` of a 4-tuple: [`parse_key`],
//!   [`format_key`];
//! - `native`: the file as TensorRT-LLM's own code writes it, read and
//!   spliced in place for the drop-in: [`read_native`], [`splice_native`];
//! - `drop_in`: that file as the cache store's spool folds it
//!   ([`NativeFormat`], a `ranktune_cache::ForeignFormat`), so the drop-in
//!   saves through the store's locks, trust checks and spool: [`spool_bytes`];
//! - `convert`: whole documents in both directions: [`import`],
//!   [`import_bytes`], [`export`];
//! - here: [`Trtllm`], the format in the registry.
//!
//! This module does no file I/O and never touches a store.

mod convert;
mod drop_in;
mod key;
mod native;
mod pyliteral;
mod tactic;

pub use convert::{
    export, export_document, import, import_bytes, looks_like_trtllm, to_json_text,
    IMPORTED_CHECKSUM, LIB_VERSION_PREFIX,
};
pub(crate) use convert::{ms_to_us, us_to_ms};
pub use drop_in::{spool_bytes, NativeFormat};
pub use key::{format_key, parse_key, KeyError};
pub use native::{
    native_entries, py_json_float, py_json_str, py_json_value, read_native, splice_native,
    NativeEntry, NativeError, NativeLoaded, NativeUpdate, Spliced, EXTRAS,
};
pub use pyliteral::{parse_literal, repr_float, repr_str, LiteralError, PyValue};
pub use tactic::{json_to_py, py_to_json, TacticError};

use crate::{Format, Imported, Input, SourceError, Writer};
use serde_json::Value;

/// TensorRT-LLM's autotuner cache file.
pub struct Trtllm;

impl Format for Trtllm {
    fn name(&self) -> &'static str {
        "trtllm"
    }

    fn about(&self) -> &'static str {
        "A TensorRT-LLM autotuner cache file"
    }

    fn noun(&self) -> &'static str {
        "a TensorRT-LLM cache"
    }

    fn sign(&self) -> &'static str {
        "\"metadata\" with creation_timestamp or device_capability, or \
         rank_<N> sections keyed by tuples"
    }

    fn detect(&self, doc: &Value) -> bool {
        looks_like_trtllm(doc)
    }

    fn read(&self, file: &Input<'_>) -> Result<Imported, SourceError> {
        convert::import_parsed(file.document()?, file.bytes())
            .map_err(|source| SourceError::import(file, &Trtllm, source))
    }

    fn writer(&self) -> Option<Writer> {
        Some(Writer {
            about: "TensorRT-LLM's autotuner cache (one JSON document)",
            lacks: "holds nothing to export",
            export,
        })
    }
}
