//! The tuning cache: entries in memory and the stores that keep them.
//!
//! [`entry`] is the data model shared by everything that reads or writes
//! tuning decisions; [`document`] holds a whole cache in memory; [`store`]
//! is the interface backends implement; [`file`] is the JSON file
//! backend ([`FileStore`]); [`identity`] says which machine measured an entry
//! and when an entry is stale. The tuner never touches files itself.

mod codec;
pub mod compare;
pub mod document;
pub mod entry;
pub mod error;
pub mod file;
pub mod identity;
pub mod memory;
pub mod merge;
mod source;
pub mod store;
mod time;
pub mod trtllm;

pub use codec::{
    cache_to_bytes, parse_cache, ParseError, Parsed, FORMAT_MAJOR, FORMAT_MINOR, FORMAT_NAME,
};
pub use document::{CacheData, Metadata};
pub use entry::{Candidate, Entry, EntryKey, Identity, Section, Stats};
pub use error::CacheError;
pub use file::{
    lock_timeout_from_env, max_file_bytes, read_cache_bytes, read_cache_file, write_cache_file,
    FileStore, Resolver, DEFAULT_LOCK_TIMEOUT, DEFAULT_MAX_FILE_BYTES, LOCK_TIMEOUT_ENV,
    MAX_FILE_BYTES_ENV,
};
pub use identity::is_stale;
pub use source::{read_source, Source, SourceError, SourceFormat};
pub use store::{Loaded, RemovePredicate, SaveReport, Store};
