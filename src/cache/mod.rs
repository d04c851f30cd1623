//! The tuning cache: entries in memory and the stores that keep them.
//!
//! [`entry`] is the data model shared by everything that reads or writes
//! tuning decisions. Stores (the embedded JSON file, later Redis) load and save
//! whole sets of entries; the tuner never touches files itself.

pub mod entry;

pub use entry::{Candidate, Entry, EntryKey, Identity, Section, Stats};
