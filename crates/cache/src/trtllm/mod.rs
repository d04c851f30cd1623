//! Interoperability with TensorRT-LLM's autotuner cache files (the
//! reference): read them into [`CacheData`](crate::CacheData) and write
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
//! - `convert`: whole documents in both directions: [`import`],
//!   [`import_bytes`], [`export`].
//!
//! This module does no file I/O and never touches a store.

mod convert;
mod key;
mod pyliteral;
mod tactic;

pub use convert::{
    export, import, import_bytes, looks_like_trtllm, parse_document, to_json_text, ConvertError,
    Exported, Imported, IMPORTED_CHECKSUM, LIB_VERSION_PREFIX,
};
pub(crate) use convert::{ms_to_us, us_to_ms};
pub use key::{format_key, parse_key, KeyError};
pub use pyliteral::{parse_literal, repr_float, repr_str, LiteralError, PyValue};
pub use tactic::{json_to_py, py_to_json, TacticError};
