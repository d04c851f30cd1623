//! The whole cache in memory — the one document model: metadata plus
//! sections of entries, plus what a file held that this build does not
//! model (`Extras`), so that a rewrite loses nothing.
//!
//! Entries are held as `E`: parsed ([`Entry`], what every user sees, the
//! default) or, inside the file store, as their JSON text, so that a fold of
//! many saves copies entries instead of parsing and re-serializing them, and
//! passes entries of a newer version through untouched. Either way there is
//! one model, one [`apply`](CacheData::apply) (save over stored), and one
//! codec that reads and writes it (`crate::codec`).
//!
//! Sorted maps everywhere, so serializing the same content twice gives the
//! same bytes and `diff` between two files is meaningful. No I/O and no JSON
//! parsing here: text in `Extras` is opaque to this module.

use super::blocklist::Blocklist;
use super::entry::{Entry, EntryKey, Identity, Section};
use std::collections::{BTreeMap, BTreeSet};

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
///
/// `E` is how entries are held; users always use the default, [`Entry`].
/// A cache read from a file also carries, out of sight, what that file held
/// beyond this model (a newer version's fields), and writing it keeps them.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheData<E = Entry> {
    /// The `metadata` block.
    pub metadata: Metadata,
    /// Entries by section, then by key.
    pub sections: BTreeMap<Section, BTreeMap<EntryKey, E>>,
    /// Tactics known to fail, per environment (see [`Blocklist`]): always
    /// parsed, whatever `E` is (a blocklist is small).
    pub blocklist: Blocklist,
    /// What the file held beyond the model, kept for the next rewrite.
    pub(crate) extras: Extras,
}

/// The parts of a cache file this build reads but does not model, kept so
/// that a rewrite loses nothing: a file of a newer minor version keeps
/// every field it had through our rewrites, and is never written with a
/// lower version than it had.
///
/// Values are compact JSON text; this module never looks inside them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Extras {
    /// The minor format version of the file read (0 for a new document);
    /// the codec writes the higher of this and its own.
    pub minor: u32,
    /// Unknown top-level fields, by name.
    pub top: Fields,
    /// Unknown fields of the `metadata` block, by name.
    pub metadata: Fields,
    /// Unknown fields of identities in `metadata.environments`, by digest.
    pub environments: BTreeMap<String, Fields>,
    /// Entries whose key could not be read at all, kept verbatim (compact
    /// JSON) by section. Only the file store's text documents have them.
    pub unkeyed: BTreeMap<Section, BTreeSet<Box<str>>>,
}

/// Unknown fields of one JSON object: name → compact JSON value.
pub(crate) type Fields = BTreeMap<String, Box<str>>;

impl Extras {
    /// Applies `src` over `self`: the higher version, and field by field
    /// `src`'s values over ours; nothing is removed. True when anything
    /// changed.
    fn apply(&mut self, src: Extras) -> bool {
        let mut changed = false;
        if src.minor > self.minor {
            self.minor = src.minor;
            changed = true;
        }
        changed |= apply_fields(&mut self.top, src.top);
        changed |= apply_fields(&mut self.metadata, src.metadata);
        for (digest, fields) in src.environments {
            changed |= apply_fields(self.environments.entry(digest).or_default(), fields);
        }
        for (section, texts) in src.unkeyed {
            let slot = self.unkeyed.entry(section).or_default();
            for text in texts {
                changed |= slot.insert(text);
            }
        }
        changed
    }
}

fn apply_fields(dst: &mut Fields, src: Fields) -> bool {
    let mut changed = false;
    for (name, value) in src {
        if dst.get(&name) != Some(&value) {
            dst.insert(name, value);
            changed = true;
        }
    }
    changed
}

impl<E> Default for CacheData<E> {
    fn default() -> Self {
        CacheData {
            metadata: Metadata::default(),
            sections: BTreeMap::new(),
            blocklist: Blocklist::default(),
            extras: Extras::default(),
        }
    }
}

/// Prefix of the metadata fields that keep what an imported file looked
/// like (`origin.trtllm`, `origin.vllm-moe/<file name>`, …): written by
/// the importers of other tools' formats, read back by their exporters so
/// an import followed by an export reproduces the file.
pub(crate) const ORIGIN_PREFIX: &str = "origin.";

impl<E> CacheData<E> {
    /// The compact JSON text recorded under origin `name` (a metadata
    /// field `origin.<name>`: what an imported file looked like, written by
    /// a format's importer and read back by its exporter), if any.
    pub fn origin(&self, name: &str) -> Option<&str> {
        self.extras.metadata.get(&format!("{ORIGIN_PREFIX}{name}")).map(|t| &**t)
    }

    /// Records origin `name` (compact JSON text), replacing an older one.
    pub fn set_origin(&mut self, name: &str, text: String) {
        self.extras.metadata.insert(format!("{ORIGIN_PREFIX}{name}"), text.into());
    }

    /// Copies `other`'s origin records over ours (a merge keeps what the
    /// imported files looked like).
    pub(crate) fn take_origins_from<F>(&mut self, other: &CacheData<F>) {
        for (k, v) in &other.extras.metadata {
            if k.starts_with(ORIGIN_PREFIX) {
                self.extras.metadata.insert(k.clone(), v.clone());
            }
        }
    }

    /// Inserts or replaces one entry.
    pub fn insert(&mut self, section: Section, key: EntryKey, entry: E) {
        self.sections.entry(section).or_default().insert(key, entry);
    }

    /// Looks up one entry.
    pub fn get(&self, section: Section, key: &EntryKey) -> Option<&E> {
        self.sections.get(&section)?.get(key)
    }

    /// Every entry, in file order.
    pub fn iter(&self) -> impl Iterator<Item = (Section, &EntryKey, &E)> {
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

    /// Number of entries including those kept verbatim because their key
    /// could not be read.
    pub(crate) fn stored_len(&self) -> usize {
        self.len() + self.extras.unkeyed.values().map(BTreeSet::len).sum::<usize>()
    }

    /// Drops sections left without entries.
    pub(crate) fn drop_empty_sections(&mut self) {
        self.sections.retain(|_, m| !m.is_empty());
        self.extras.unkeyed.retain(|_, s| !s.is_empty());
    }
}

impl<E: PartialEq> CacheData<E> {
    /// Applies `src` over `self`, as a save applies over what is stored: its
    /// entries add to or replace ours under the same key, its identities are
    /// recorded, its blocklist merged ([`Blocklist::apply`]: newest record
    /// wins, its clears remove older records), its extras kept; nothing
    /// else of ours is dropped. The metadata's
    /// other fields stay ours (the writer stamps them). True when anything
    /// changed.
    pub fn apply(&mut self, src: CacheData<E>) -> bool {
        let mut changed = false;
        for (digest, id) in src.metadata.environments {
            if self.metadata.environments.get(&digest) != Some(&id) {
                self.metadata.environments.insert(digest, id);
                changed = true;
            }
        }
        for (section, entries) in src.sections {
            let slot = self.sections.entry(section).or_default();
            for (key, entry) in entries {
                if slot.get(&key) != Some(&entry) {
                    slot.insert(key, entry);
                    changed = true;
                }
            }
        }
        changed |= self.blocklist.apply(src.blocklist);
        changed | self.extras.apply(src.extras)
    }

    /// True when there is nothing to save: no entries, no blocklist
    /// records and no clears.
    pub fn is_unchanged_update(&self) -> bool {
        self.is_empty() && self.blocklist.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(op: &str) -> EntryKey {
        EntryKey { op: op.into(), runner: "r".into(), fingerprint: "f".into(), bucket: vec![] }
    }

    #[test]
    fn apply_adds_and_replaces_and_says_whether_anything_changed() {
        let mut dst: CacheData<u32> = CacheData::default();
        dst.insert(Section::Rank(0), key("a"), 1);
        dst.insert(Section::Rank(0), key("b"), 2);
        let mut src: CacheData<u32> = CacheData::default();
        src.insert(Section::Rank(0), key("b"), 2);
        assert!(!dst.apply(src.clone()), "the same entry changes nothing");
        src.insert(Section::Rank(0), key("b"), 3);
        src.insert(Section::Shared, key("c"), 4);
        assert!(dst.apply(src));
        assert_eq!(dst.get(Section::Rank(0), &key("a")), Some(&1));
        assert_eq!(dst.get(Section::Rank(0), &key("b")), Some(&3));
        assert_eq!(dst.get(Section::Shared, &key("c")), Some(&4));
    }

    #[test]
    fn extras_keep_the_higher_version_and_every_field() {
        let mut dst: CacheData<u32> = CacheData::default();
        dst.extras.minor = 7;
        dst.extras.top.insert("a".into(), "1".into());
        dst.extras.environments.entry("d".into()).or_default().insert("x".into(), "1".into());
        let mut src: CacheData<u32> = CacheData::default();
        src.extras.top.insert("b".into(), "2".into());
        src.extras.environments.entry("d".into()).or_default().insert("y".into(), "2".into());
        assert!(dst.apply(src));
        assert_eq!(dst.extras.minor, 7);
        assert_eq!(dst.extras.top.len(), 2);
        assert_eq!(dst.extras.environments["d"].len(), 2);
        assert!(!dst.apply(CacheData::default()), "a document of an older version changes nothing");
    }
}
