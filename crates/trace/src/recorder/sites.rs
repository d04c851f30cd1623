//! Interned `(name, category)` pairs: the site id stored in every event.
//!
//! Names and categories of native spans and `tracing` metadata are
//! `&'static str`, so the process's set of sites is bounded by its own call
//! sites. The global table is locked only on a thread's first use of a
//! site; after that a per-thread direct-mapped cache, keyed by the strings'
//! addresses and lengths, answers without a lock or a hash map. This module
//! never stores run-time strings.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

type Site = (&'static str, &'static str);

struct Sites {
    list: Vec<Site>,
    index: HashMap<Site, u32>,
}

static SITES: Mutex<Option<Sites>> = Mutex::new(None);

#[cold]
fn intern_global(name: &'static str, cat: &'static str) -> u32 {
    let mut guard = SITES.lock().unwrap_or_else(PoisonError::into_inner);
    let sites = guard.get_or_insert_with(|| Sites { list: Vec::new(), index: HashMap::new() });
    if let Some(&id) = sites.index.get(&(name, cat)) {
        return id;
    }
    let id = u32::try_from(sites.list.len()).unwrap_or(u32::MAX);
    sites.list.push((name, cat));
    sites.index.insert((name, cat), id);
    id
}

/// All interned sites, indexed by id (for export).
pub(crate) fn all() -> Vec<Site> {
    SITES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map_or_else(Vec::new, |s| s.list.clone())
}

const SLOTS: usize = 64;

/// `(name address, name length, category address, category length, id)`.
type Slot = (usize, usize, usize, usize, u32);

thread_local! {
    /// This thread's cache of site ids (no destructor: usable to the end).
    static CACHE: [Cell<Slot>; SLOTS] = const { [const { Cell::new((0, 0, 0, 0, 0)) }; SLOTS] };
}

/// The id of site `(name, cat)`.
#[inline]
pub(crate) fn id(name: &'static str, cat: &'static str) -> u32 {
    let key = (name.as_ptr() as usize, name.len(), cat.as_ptr() as usize, cat.len());
    let h = (key.0 >> 3) ^ (key.0 >> 11) ^ (key.2 >> 5) ^ key.1;
    CACHE
        .try_with(|cache| {
            let slot = &cache[h % SLOTS];
            let s = slot.get();
            if (s.0, s.1, s.2, s.3) == key {
                return s.4;
            }
            let id = intern_global(name, cat);
            slot.set((key.0, key.1, key.2, key.3, id));
            id
        })
        .unwrap_or_else(|_| intern_global(name, cat))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sites_are_interned_once_and_listed_by_id() {
        let a = super::id("sites-test-a", "cat");
        let b = super::id("sites-test-b", "cat");
        assert_ne!(a, b);
        assert_eq!(super::id("sites-test-a", "cat"), a);
        let other = std::thread::spawn(|| super::id("sites-test-a", "cat")).join().unwrap();
        assert_eq!(other, a);
        let all = super::all();
        assert_eq!(all[a as usize], ("sites-test-a", "cat"));
        assert_eq!(all[b as usize], ("sites-test-b", "cat"));
    }
}
