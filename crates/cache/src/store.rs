//! The storage interface: how the tuner and the CLI load and save caches.
//!
//! Backends implement [`Store`]: [`FileStore`](crate::FileStore) (the JSON
//! file), [`RedisStore`](crate::RedisStore) and
//! [`MemoryStore`](crate::MemoryStore). The contract every backend keeps:
//! `save` *merges* — it adds or replaces the given entries and never drops
//! anything else that is stored, even when many processes save at once;
//! `load` never fails on bad content (bad parts are skipped or set aside
//! and reported), only on I/O it cannot get past; and every operation that
//! decides on what is stored decides on it as it is stored at that moment
//! (under the backend's lock, in one compare-and-set, or under its mutex),
//! never on a copy read earlier.
//!
//! Every operation is required: a backend says how it keeps the contract
//! for each one, and none inherits an answer that is right only for a
//! store nobody else writes. What every backend shares lives here, once:
//! `prepare` (which part of an update is written) and `superseded_by` (the
//! superseding rule, from [`crate::supersedes`]).
//!
//! This module owns the interface and those two rules; it does no I/O.

use super::codec;
use super::document::CacheData;
use super::entry::{Entry, EntryKey, Identity, Section};
use std::borrow::Cow;
use std::path::PathBuf;

/// Decides a merge conflict against the stored entry: `(section, key,
/// stored, new)`, true to store `new` (see [`Store::save_resolving`]).
pub type Resolver<'a> = dyn Fn(Section, &EntryKey, &Entry, &Entry) -> bool + 'a;

/// Decides, per stored entry, whether [`Store::remove_where`] removes it.
pub type RemovePredicate<'a> = dyn Fn(Section, &EntryKey, &Entry) -> bool + 'a;

/// What a load found. Backends return problems here and do not log them:
/// the caller logs (or prints) each warning once.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// Everything that loaded.
    pub data: CacheData,
    /// One line per problem (bad entry skipped, file set aside, …).
    pub warnings: Vec<String>,
    /// Entries that were skipped because they were malformed.
    pub bad_entries: usize,
    /// Where an unparseable file was moved, if one was.
    pub moved_aside: Option<PathBuf>,
}

/// What a save did.
#[derive(Clone, Debug, Default)]
pub struct SaveReport {
    /// Entries written by this save.
    pub written: usize,
    /// Entries in the store afterwards.
    pub total: usize,
    /// Warnings (e.g. locking unsupported on this filesystem, bad entries
    /// kept as they are). Not logged by the store: the caller logs them.
    pub warnings: Vec<String>,
    /// Rank entries removed because a `shared` entry of the save superseded
    /// them ([`Store::save_superseding`]; 0 for other saves).
    pub superseded: usize,
}

/// A place where caches live. Reading: [`load`](Store::load),
/// [`load_sections`](Store::load_sections), [`inspect`](Store::inspect);
/// writing: [`save`](Store::save), [`save_resolving`](Store::save_resolving),
/// [`save_superseding`](Store::save_superseding); removing:
/// [`remove`](Store::remove), [`remove_where`](Store::remove_where); and
/// [`location`](Store::location) for messages.
pub trait Store {
    /// Where the cache lives, for messages: a path, or a URL with its
    /// password redacted.
    fn location(&self) -> String;

    /// Loads the whole cache.
    fn load(&self) -> Result<Loaded, super::CacheError>;

    /// Loads only the given sections (e.g. `shared` and this rank's): a
    /// rank of a big job needs its own sections, not every rank's. The
    /// file store skips the others without parsing them, the Redis store
    /// never reads them.
    fn load_sections(&self, sections: &[Section]) -> Result<Loaded, super::CacheError>;

    /// Reads the whole cache without changing anything (nothing set aside,
    /// nothing locked): what `cache show` and `cache check` use. A file
    /// that does not parse is an error here, where [`Store::load`] sets it
    /// aside.
    fn inspect(&self) -> Result<Loaded, super::CacheError>;

    /// Merges `update`'s entries into the stored cache.
    fn save(&self, update: &CacheData) -> Result<SaveReport, super::CacheError>;

    /// Like [`Store::save`], but where the store already holds an entry
    /// under the same key, `take_new(section, key, stored, new)` decides,
    /// against the entry as stored at the moment of the save (`cache merge
    /// -o` passes [`new_wins`](crate::new_wins)). `written` in the report
    /// is the number of `update`'s entries that were stored.
    fn save_resolving(
        &self,
        update: &CacheData,
        take_new: &Resolver<'_>,
    ) -> Result<SaveReport, super::CacheError>;

    /// Like [`Store::save`], and also removes every stored rank entry that
    /// one of `update`'s `shared` entries supersedes (same op and bucket,
    /// not newer: [`supersedes`](crate::supersedes)): a decision the ranks
    /// agreed on replaces what each rank had chosen alone, so the cache no
    /// longer holds both. Nothing else is removed, and both happen at once.
    /// `written` in the report is the number of `update`'s entries;
    /// `superseded` the number removed.
    fn save_superseding(&self, update: &CacheData) -> Result<SaveReport, super::CacheError>;

    /// Removes the given entries (e.g. `cache prune`), keeping everything else.
    fn remove(&self, keys: &[(Section, EntryKey)]) -> Result<SaveReport, super::CacheError>;

    /// Removes every stored entry for which `pred` is true, deciding on the
    /// entry as it is stored at the moment of removal: an entry that a save
    /// replaced after the caller last looked is judged afresh, so a fresh
    /// save is never removed for being what an older entry was. `written`
    /// in the report is the number removed.
    fn remove_where(&self, pred: &RemovePredicate<'_>) -> Result<SaveReport, super::CacheError>;
}

/// True when a `shared` entry of `update` supersedes the stored entry
/// `section`/`key`/`entry` (see [`crate::supersedes`]).
pub(crate) fn superseded_by(
    update: &CacheData,
    section: Section,
    key: &EntryKey,
    entry: &Entry,
) -> bool {
    update.sections.get(&Section::Shared).is_some_and(|shared| {
        shared.iter().any(|(sk, se)| crate::check::supersedes(sk, se, section, key, entry))
    })
}

/// The part of `update` a backend writes: valid entries (an entry the
/// codec refuses is left out, with a warning), plus the identities they
/// refer to. Borrows `update` when it is all valid and complete (the usual
/// case: no copy of the entries).
pub(crate) fn prepare(update: &CacheData) -> (Cow<'_, CacheData>, Vec<String>) {
    static CURRENT: std::sync::OnceLock<(Identity, String)> = std::sync::OnceLock::new();
    let (current, current_digest) = CURRENT.get_or_init(|| {
        let id = Identity::current();
        let digest = id.digest();
        (id, digest)
    });
    let mut warnings = Vec::new();
    let mut invalid = std::collections::BTreeSet::new();
    let mut needs_current = false;
    for (section, key, entry) in update.iter() {
        if let Err(why) = codec::validate_entry(key, entry) {
            warnings.push(format!("not saving entry {section} {key}: {why}"));
            invalid.insert((section, key.clone()));
        } else if entry.env == *current_digest {
            needs_current = true;
        }
    }
    needs_current &= !update.metadata.environments.contains_key(current_digest);
    if invalid.is_empty() && !needs_current {
        return (Cow::Borrowed(update), warnings);
    }
    let mut out = CacheData {
        blocklist: update.blocklist.clone(),
        extras: update.extras.clone(),
        ..CacheData::default()
    };
    out.metadata.environments = update.metadata.environments.clone();
    if needs_current {
        out.metadata.environments.insert(current_digest.clone(), current.clone());
    }
    for (section, key, entry) in update.iter() {
        if !invalid.contains(&(section, key.clone())) {
            out.insert(section, key.clone(), entry.clone());
        }
    }
    (Cow::Owned(out), warnings)
}
