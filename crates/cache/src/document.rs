//! The whole cache in memory: metadata plus sections of entries.
//!
//! Sorted maps everywhere, so serializing the same content twice gives the
//! same bytes and `diff` between two files is meaningful. No I/O here.

use super::entry::{Entry, EntryKey, Identity, Section};
use std::collections::BTreeMap;

/// The cache file's `metadata` block.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    /// Version of ranktune that last wrote the file.
    pub lib_version: String,
    /// Host that last wrote the file (informational only).
    pub host: String,
    /// When the file was first created, seconds since the Unix epoch.
    pub created_unix: u64,
    /// When the file was last written, seconds since the Unix epoch.
    pub updated_unix: u64,
    /// Identities that measured entries, by digest (entries refer to them).
    pub environments: BTreeMap<String, Identity>,
}

/// The cache: metadata and every section's entries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CacheData {
    /// The `metadata` block.
    pub metadata: Metadata,
    /// Entries by section, then by key.
    pub sections: BTreeMap<Section, BTreeMap<EntryKey, Entry>>,
}

impl CacheData {
    /// Inserts or replaces one entry.
    pub fn insert(&mut self, section: Section, key: EntryKey, entry: Entry) {
        self.sections.entry(section).or_default().insert(key, entry);
    }

    /// Looks up one entry.
    pub fn get(&self, section: Section, key: &EntryKey) -> Option<&Entry> {
        self.sections.get(&section)?.get(key)
    }

    /// Every entry, in file order.
    pub fn iter(&self) -> impl Iterator<Item = (Section, &EntryKey, &Entry)> {
        self.sections.iter().flat_map(|(s, m)| m.iter().map(move |(k, e)| (*s, k, e)))
    }

    /// Number of entries over all sections.
    pub fn len(&self) -> usize {
        self.sections.values().map(BTreeMap::len).sum()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
