//! An in-memory [`Store`] for tests and embedding: same merging contract as
//! the file store, no I/O.

use super::document::CacheData;
use super::entry::{EntryKey, Section};
use super::store::{Loaded, SaveReport, Store};
use super::CacheError;
use std::sync::Mutex;

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
        self.data.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Number of saves so far.
    pub fn saves(&self) -> usize {
        *self.saves.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Store for MemoryStore {
    fn location(&self) -> String {
        "memory".to_string()
    }

    fn load(&self) -> Result<Loaded, CacheError> {
        Ok(Loaded { data: self.data(), ..Default::default() })
    }

    fn save(&self, update: &CacheData) -> Result<SaveReport, CacheError> {
        let mut data = self.data.lock().unwrap_or_else(|p| p.into_inner());
        data.apply(update.clone());
        if !update.metadata.lib_version.is_empty() {
            data.metadata.lib_version = update.metadata.lib_version.clone();
        }
        data.metadata.updated_unix = update.metadata.updated_unix;
        *self.saves.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Ok(SaveReport {
            written: update.len(),
            total: data.len(),
            warnings: Vec::new(),
            superseded: 0,
        })
    }

    fn remove(&self, keys: &[(Section, EntryKey)]) -> Result<SaveReport, CacheError> {
        let mut data = self.data.lock().unwrap_or_else(|p| p.into_inner());
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

    fn save_superseding(&self, update: &CacheData) -> Result<SaveReport, CacheError> {
        let superseded = {
            let mut data = self.data.lock().unwrap_or_else(|p| p.into_inner());
            let mut n = 0;
            for (section, entries) in data.sections.iter_mut() {
                entries.retain(|k, e| {
                    let drop = crate::store::superseded_by(update, *section, k, e);
                    n += usize::from(drop);
                    !drop
                });
            }
            data.sections.retain(|_, m| !m.is_empty());
            n
        };
        let mut report = self.save(update)?;
        report.superseded = superseded;
        Ok(report)
    }
}
