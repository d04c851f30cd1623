//! The tuning cache: entries in memory and the stores that keep them.
//!
//! [`entry`] is the data model shared by everything that reads or writes
//! tuning decisions; [`document`] holds a whole cache in memory; [`store`]
//! is the interface backends implement. The tuner never touches files itself.

pub mod document;
pub mod entry;
pub mod error;
pub mod memory;
pub mod store;

pub use document::{CacheData, Metadata};
pub use entry::{Candidate, Entry, EntryKey, Identity, Section, Stats};
pub use error::CacheError;
pub use store::{Loaded, SaveReport, Store};
