//! ranktune's cache file formats: its own and other tuners' — TensorRT-LLM,
//! FlashInfer, Triton, vLLM/SGLang fused-MoE configs — read into the
//! cache's data model ([`CacheData`](ranktune_cache::CacheData)) and
//! written back, so people can inspect, check, merge and convert caches
//! made by those systems.
//!
//! ```
//! use ranktune_formats::{by_name, export, read_source};
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("ref.json");
//! std::fs::write(&path, r#"{"metadata": {"creation_timestamp": 0}}"#)?;
//! let source = read_source(&path, None)?; // detected
//! assert_eq!(source.format.map(|f| f.name()), Some("trtllm"));
//! let out = export(&source.data, by_name("flashinfer").unwrap())?;
//! assert_eq!(out.files.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What is here:
//!
//! - [`Format`], the one trait every format implements (name, detection,
//!   reading, layout, writing), and [`FORMATS`], the one registry: the
//!   detection order of `--format auto`, the names `cache
//!   import/export/merge/diff --format` and Python's `format=` take, and
//!   the help text listing them all come from it. Adding a format is one
//!   module and one line in [`FORMATS`];
//! - what every format gives back: [`Imported`], [`Exported`], and
//!   [`FormatError`] when a document does not import at all;
//! - [`read_source`]: a cache file or folder of any format, detected when
//!   not given; [`export`] and [`write()`]: a cache in a format, published;
//! - the formats: [`ranktune`] (its own file), [`triton`], [`vllm_moe`],
//!   [`trtllm`], [`flashinfer`].
//!
//! The cache crate knows nothing of this one (it never depends on it).
//! Nothing here logs; warnings are returned.

mod error;
mod format;
mod json;
mod ordered;
mod read;
mod write;

pub mod flashinfer;
pub mod ranktune;
pub mod triton;
pub mod trtllm;
pub mod vllm_moe;

pub use error::FormatError;
pub use format::{Exported, Format, Imported, Input, Layout, Writer};
pub use json::parse_document;
pub use read::{read_source, Source, SourceError};
pub use write::{export, write, ExportError};

/// Every format, in the order detection tries them (by path first, then
/// by the document).
pub static FORMATS: &[&dyn Format] = &[
    &triton::Triton,
    &vllm_moe::VllmMoe,
    &ranktune::Ranktune,
    &trtllm::Trtllm,
    &flashinfer::Flashinfer,
];

/// The format called `name`, if any.
pub fn by_name(name: &str) -> Option<&'static dyn Format> {
    FORMATS.iter().copied().find(|f| f.name() == name)
}

/// The formats ranktune writes, in registry order.
pub fn writable() -> impl Iterator<Item = &'static dyn Format> {
    FORMATS.iter().copied().filter(|f| f.writer().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for f in FORMATS {
            assert_eq!(by_name(f.name()).map(|g| g.name()), Some(f.name()));
            assert_eq!(FORMATS.iter().filter(|g| g.name() == f.name()).count(), 1);
        }
        assert!(by_name("auto").is_none());
        let w: Vec<&str> = writable().map(|f| f.name()).collect();
        assert_eq!(w, ["triton", "vllm-moe", "trtllm", "flashinfer"]);
    }

    /// Every importer's identities say which library measured the entries
    /// (`Identity::describe`), not a ranktune version.
    #[test]
    fn every_imported_identity_names_its_library() {
        for (lib_version, name) in [
            (format!("{}1.2.0rc1", trtllm::LIB_VERSION_PREFIX), "TensorRT-LLM"),
            (format!("{}0.7.4", flashinfer::LIB_VERSION_PREFIX), "FlashInfer"),
            (format!("{}3.9.0", vllm_moe::LIB_VERSION_PREFIX), "vLLM/SGLang"),
            (triton::LIB_VERSION.to_string(), "Triton"),
        ] {
            let found = ranktune_cache::foreign_library(&lib_version);
            assert!(found.is_some_and(|(lib, _)| lib.contains(name)), "{lib_version}: {found:?}");
        }
    }
}
