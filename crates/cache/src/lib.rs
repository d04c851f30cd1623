//! The tuning cache: tuning decisions in memory and the stores that keep
//! them, shared by every rank of a job.
//!
//! ```
//! use ranktune_cache::{CacheData, Entry, EntryKey, FileStore, Section, Store};
//!
//! let dir = tempfile::tempdir()?;
//! let store = FileStore::new(dir.path().join("tune.json"));
//! let key = EntryKey {
//!     op: "gemm".into(),
//!     runner: "blocked".into(),
//!     fingerprint: "f0".into(),
//!     bucket: ranktune_cache::sizes_bucket(&[vec![64, 64]]),
//! };
//! let entry = Entry {
//!     runner_index: 0,
//!     tactic: serde_json::json!({"tile": 64}),
//!     time_us: 12.5,
//!     candidates: vec![],
//!     checksum: "c".into(),
//!     env: "e".into(),
//!     created_unix: 0,
//! };
//! let mut update = CacheData::default();
//! update.insert(Section::Rank(0), key.clone(), entry.clone());
//! store.save(&update)?; // merges into whatever the file holds
//!
//! let loaded = store.load()?;
//! assert_eq!(loaded.data.get(Section::Rank(0), &key), Some(&entry));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What is here:
//!
//! - the data model: [`Entry`] (a decision and its evidence) under an
//!   [`EntryKey`] in a [`Section`] (`shared` or one rank's), measured under
//!   an [`Identity`]; a key's bucket holds [`Dim`]s (sizes, negative
//!   integers such as TensorRT-LLM's `-1`, bit-exact floats);
//!   [`CacheData`] is a whole cache (the one document
//!   model), [`is_stale`] the staleness rule; its [`Blocklist`] holds the
//!   tactics known to fail per environment ([`BlockKey`] → [`Blocked`]);
//! - [`Store`], the interface backends implement (`save` merges, `load`
//!   never fails on bad content), with [`FileStore`] (the crash-safe JSON
//!   file that many processes save into at once) and [`MemoryStore`];
//! - the file format: [`parse_cache`] and [`cache_to_bytes`] (one canonical
//!   byte form), [`read_cache_file`], [`write_cache_file`];
//! - tools over caches: [`merge()`] (the documented conflict rule),
//!   [`place_in_rank`], [`diff`], [`check`] (stale entries and ranks that
//!   would run different code);
//! - labels for people: [`bucket_label`] and [`tactic_label`], the one way
//!   every table and message writes a bucket and a tactic;
//! - [`json_text`]: where a character of JSON text stands (inside a
//!   string or not), for the codec and the format importers alike.
//!
//! Other tuners' files (TensorRT-LLM, FlashInfer, Triton, vLLM/SGLang
//! MoE configs), and reading a cache of any format, are the
//! `ranktune-formats` crate's; this crate never depends on it. The tuner
//! never touches files itself; everything that reads or writes a ranktune
//! cache file goes through this crate.

mod blocklist;
mod check;
mod codec;
mod compare;
mod dim;
mod document;
mod entry;
mod error;
mod file;
mod identity;
pub mod json_text;
mod label;
mod limit;
mod listing;
mod location;
mod memory;
mod merge;
mod redis_store;
mod store;
mod time;

pub use blocklist::{covers, tactic_text, BlockKey, BlockKind, Blocked, Blocklist};
pub use check::{check, supersedes, Problem, RankChoice};
pub use codec::{
    cache_to_bytes, parse_cache, ParseError, Parsed, BLOCKLIST_MINOR, FORMAT_MAJOR, FORMAT_MINOR,
    FORMAT_NAME,
};
pub use compare::{diff, CacheDiff, Change, ChangeKind, DiffOptions, OneSided};
pub use dim::{bucket_sizes, sizes_bucket, Dim};
pub use document::{CacheData, Metadata};
pub use entry::{Candidate, Entry, EntryKey, Identity, Section, Stats};
pub use error::CacheError;
pub use file::{
    check_parent_dir, lock_timeout_from_env, read_cache_bytes, read_cache_file, write_cache_file,
    FileStore, ForeignFile, ForeignFormat, ForeignLoaded, ForeignLock, DEFAULT_LOCK_TIMEOUT,
    LOCK_TIMEOUT_ENV, MAX_UNLOCKED_SPOOLS,
};
pub use identity::{foreign_library, is_stale, TEST_MACHINE_ENV};
pub use label::{bucket_label, bucket_size, escape_control, tactic_label};
pub use limit::{
    max_file_bytes, max_section_entries, DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_SECTION_ENTRIES,
    ENTRY_OVERHEAD_BYTES, MAX_FILE_BYTES_ENV, MAX_SECTIONS, MAX_SECTION_ENTRIES_ENV,
};
pub use listing::{block_listing, entry_listing};
pub use location::{redact_text, CacheLocation, RedisUrl, CACHE_ENV, TRTLLM_CACHE_ENV};
pub use memory::MemoryStore;
pub use merge::{merge, new_wins, place_in_rank, Conflict, Merged, PlaceError, WonBy};
pub use redis_store::{RedisConfig, RedisStore, MAX_ENTRY_BYTES};
pub use store::{Loaded, RemovePredicate, Resolver, SaveReport, Store};
pub use time::unix_label;
