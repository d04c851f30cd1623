//! An in-memory [`Store`] for tests and embedding: same merging contract as
//! the file store, no I/O. Every operation runs under one mutex, so one
//! that decides on what is stored (a resolving save, a removal by
//! predicate, a superseding save) decides on it as it is at that moment.

use super::document::CacheData;
use super::entry::{EntryKey, Section};
use super::store::{self, Loaded, RemovePredicate, Resolver, SaveReport, Store};
use super::CacheError;
use std::sync::{Mutex, MutexGuard};

/// A [`Store`] that keeps the cache in memory. `save` merges.
#[derive(Debug, Default)]
pub struct MemoryStore {
    data: Mutex<CacheData>,
    saves: Mutex<usize>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store holding `data`.
    pub fn with_data(data: CacheData) -> Self {
        MemoryStore { data: Mutex::new(data), saves: Mutex::new(0) }
    }

    /// A copy of what is stored.
    pub fn data(&self) -> CacheData {
        self.stored().clone()
    }

    /// Number of saves so far.
    pub fn saves(&self) -> usize {
        *self.saves.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The stored cache, locked (a panic of another holder leaves it as
    /// that holder left it: every change below is one `apply` or `retain`).
    fn stored(&self) -> MutexGuard<'_, CacheData> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Merges `update` into `data` (held locked by the caller) and counts
    /// the save.
    fn merge_locked(&self, data: &mut CacheData, update: &CacheData) -> SaveReport {
        data.apply(update.clone());
        if !update.metadata.lib_version.is_empty() {
            data.metadata.lib_version = update.metadata.lib_version.clone();
        }
        data.metadata.updated_unix = update.metadata.updated_unix;
        *self.saves.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        SaveReport { written: update.len(), total: data.len(), warnings: Vec::new(), superseded: 0 }
    }

    /// Removes from `data` (held locked by the caller) every entry `pred`
    /// picks; returns how many. A section left empty stays (as after
    /// [`Store::remove`]).
    fn remove_locked(data: &mut CacheData, pred: &RemovePredicate<'_>) -> usize {
        let mut n = 0;
        for (section, entries) in data.sections.iter_mut() {
            entries.retain(|k, e| {
                let drop = pred(*section, k, e);
                n += usize::from(drop);
                !drop
            });
        }
        n
    }
}

impl Store for MemoryStore {
    fn location(&self) -> String {
        "memory".to_string()
    }

    fn load(&self) -> Result<Loaded, CacheError> {
        Ok(Loaded { data: self.data(), ..Default::default() })
    }

    /// Copies only `sections` (and what lies outside the sections).
    fn load_sections(&self, sections: &[Section]) -> Result<Loaded, CacheError> {
        let data = self.stored();
        let mut copy = CacheData {
            metadata: data.metadata.clone(),
            blocklist: data.blocklist.clone(),
            extras: data.extras.clone(),
            ..CacheData::default()
        };
        for (section, entries) in data.sections.iter().filter(|(s, _)| sections.contains(s)) {
            copy.sections.insert(*section, entries.clone());
        }
        Ok(Loaded { data: copy, ..Default::default() })
    }

    /// The same as [`Store::load`]: loading changes nothing here.
    fn inspect(&self) -> Result<Loaded, CacheError> {
        self.load()
    }

    fn save(&self, update: &CacheData) -> Result<SaveReport, CacheError> {
        let mut data = self.stored();
        Ok(self.merge_locked(&mut data, update))
    }

    /// Decided and merged under the mutex.
    fn save_resolving(
        &self,
        update: &CacheData,
        take_new: &Resolver<'_>,
    ) -> Result<SaveReport, CacheError> {
        let mut data = self.stored();
        let mut winners = CacheData::default();
        winners.metadata.environments = update.metadata.environments.clone();
        for (section, key, entry) in update.iter() {
            if data.get(section, key).is_none_or(|old| take_new(section, key, old, entry)) {
                winners.insert(section, key.clone(), entry.clone());
            }
        }
        Ok(self.merge_locked(&mut data, &winners))
    }

    /// Removes the superseded rank entries and merges `update` under the
    /// mutex, at once.
    fn save_superseding(&self, update: &CacheData) -> Result<SaveReport, CacheError> {
        let mut data = self.stored();
        let superseded =
            Self::remove_locked(&mut data, &|s, k, e| store::superseded_by(update, s, k, e));
        data.sections.retain(|_, m| !m.is_empty());
        let mut report = self.merge_locked(&mut data, update);
        report.superseded = superseded;
        Ok(report)
    }

    fn remove(&self, keys: &[(Section, EntryKey)]) -> Result<SaveReport, CacheError> {
        let mut data = self.stored();
        let mut n = 0;
        for (s, k) in keys {
            if let Some(m) = data.sections.get_mut(s) {
                if m.remove(k).is_some() {
                    n += 1;
                }
            }
        }
        Ok(SaveReport { written: n, total: data.len(), warnings: Vec::new(), superseded: 0 })
    }

    /// Decided and removed under the mutex.
    fn remove_where(&self, pred: &RemovePredicate<'_>) -> Result<SaveReport, CacheError> {
        let mut data = self.stored();
        let n = Self::remove_locked(&mut data, pred);
        Ok(SaveReport { written: n, total: data.len(), warnings: Vec::new(), superseded: 0 })
    }
}
