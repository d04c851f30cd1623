//! The storage interface: how the tuner and the CLI load and save caches.
//!
//! Backends (the JSON file, later Redis) implement [`Store`]. The contract
//! every backend keeps: `save` *merges* — it adds or replaces the given
//! entries and never drops anything else that is stored, even when many
//! processes save at once; `load` never fails on bad content (bad parts are
//! skipped or set aside and reported), only on I/O it cannot get past.

use super::document::CacheData;
use super::entry::{Entry, EntryKey, Section};
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

/// A place where caches live.
pub trait Store {
    /// Loads the whole cache.
    fn load(&self) -> Result<Loaded, super::CacheError>;
    /// Loads only the given sections (e.g. `shared` and this rank's): a
    /// rank of a big job needs its own sections, not every rank's. The
    /// default loads everything and keeps those sections; the file store
    /// skips the others without parsing them, the Redis store never reads them.
    fn load_sections(&self, sections: &[Section]) -> Result<Loaded, super::CacheError> {
        let mut loaded = self.load()?;
        loaded.data.sections.retain(|s, _| sections.contains(s));
        Ok(loaded)
    }
    /// Merges `update`'s entries into the stored cache.
    fn save(&self, update: &CacheData) -> Result<SaveReport, super::CacheError>;
    /// Removes the given entries (e.g. `cache prune`), keeping everything else.
    fn remove(&self, keys: &[(Section, EntryKey)]) -> Result<SaveReport, super::CacheError>;

    /// Reads the whole cache without changing anything (nothing set aside,
    /// nothing locked): what `cache show` and `cache check` use. The
    /// default is [`Store::load`], right for stores whose load changes
    /// nothing.
    fn inspect(&self) -> Result<Loaded, super::CacheError> {
        self.load()
    }

    /// Where the cache lives, for messages: a path, or a URL with its
    /// password redacted.
    fn location(&self) -> String;

    /// Like [`Store::save`], but where the store already holds an entry
    /// under the same key, `take_new(section, key, stored, new)` decides,
    /// against the entry as stored at the moment of the save (`cache merge
    /// -o` passes [`new_wins`](crate::new_wins)). `written` in the report
    /// is the number of `update`'s entries that were stored.
    ///
    /// The default loads, decides and saves; that is only right for stores
    /// nobody else writes at the same time, so shared backends override it.
    fn save_resolving(
        &self,
        update: &CacheData,
        take_new: &Resolver<'_>,
    ) -> Result<SaveReport, super::CacheError> {
        let loaded = self.load()?;
        let mut winners = CacheData::default();
        winners.metadata.environments = update.metadata.environments.clone();
        for (section, key, entry) in update.iter() {
            if loaded.data.get(section, key).is_none_or(|old| take_new(section, key, old, entry)) {
                winners.insert(section, key.clone(), entry.clone());
            }
        }
        let mut report = self.save(&winners)?;
        report.written = winners.len();
        Ok(report)
    }

    /// Removes every stored entry for which `pred` is true, deciding on the
    /// entry as it is stored at the moment of removal: an entry that a save
    /// replaced after the caller last looked is judged afresh, so a fresh
    /// save is never removed for being what an older entry was. `written`
    /// in the report is the number removed.
    ///
    /// The default loads, picks, and calls [`Store::remove`]; that is only
    /// right for stores nobody else writes at the same time, so shared
    /// backends override it to decide under their lock.
    fn remove_where(&self, pred: &RemovePredicate<'_>) -> Result<SaveReport, super::CacheError> {
        let loaded = self.load()?;
        let keys: Vec<_> = loaded
            .data
            .iter()
            .filter(|(s, k, e)| pred(*s, k, e))
            .map(|(s, k, _)| (s, k.clone()))
            .collect();
        self.remove(&keys)
    }

    /// Like [`Store::save`], and also removes every stored rank entry that
    /// one of `update`'s `shared` entries supersedes (same op and bucket,
    /// not newer: [`supersedes`](crate::supersedes)): a decision the ranks
    /// agreed on replaces what each rank had chosen alone, so the cache no
    /// longer holds both. Nothing else is removed. `written` in the report
    /// is the number of `update`'s entries; `superseded` the number removed.
    ///
    /// The default saves, then removes (each step merges, but another
    /// writer may come between them); shared backends override it to do
    /// both under their lock.
    fn save_superseding(&self, update: &CacheData) -> Result<SaveReport, super::CacheError> {
        let mut report = self.save(update)?;
        if update.sections.contains_key(&Section::Shared) {
            let removed = self.remove_where(&|s, k, e| superseded_by(update, s, k, e))?;
            report.superseded = removed.written;
            report.total = removed.total;
            report.warnings.extend(removed.warnings);
        }
        Ok(report)
    }
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
