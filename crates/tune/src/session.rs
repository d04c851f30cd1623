//! The tuning session: a guard that loads the cache into a [`Tuner`] when it
//! starts and saves what was tuned when it ends — on `finish`, on early
//! return, on `?` errors and on panics (the save runs in `Drop`).
//!
//! Owns the load/save lifecycle only; it goes through a [`Store`], whose
//! saves merge, so concurrent ranks never lose each other's entries. It
//! saves with [`Store::save_superseding`]: a bucket the ranks tuned together
//! (a `shared` entry) replaces the entries each rank had stored alone for
//! that op and bucket, so a collective run leaves no stale disagreement
//! behind.

use super::tuner::Tuner;
use ranktune_cache::{CacheError, SaveReport, Store};
use ranktune_core::error_chain::Chain;

/// What the session found when it loaded the cache.
#[derive(Clone, Debug, Default)]
pub struct SessionLoad {
    /// Entries taken in (this rank's section and the shared one).
    pub entries: usize,
    /// The store's warnings (bad entries skipped, file set aside, …).
    pub warnings: Vec<String>,
}

/// Loads on start, saves on exit. See the module docs.
///
/// ```no_run
/// # fn demo(tuner: &ranktune_tune::Tuner, store: &dyn ranktune_cache::Store) -> Result<(), ranktune_cache::CacheError> {
/// let session = ranktune_tune::Session::start(tuner, store)?;
/// tuner.set_tuning(true);
/// // … choose_one calls measure and store …
/// session.finish()?; // or just let it drop
/// # Ok(()) }
/// ```
pub struct Session<'a> {
    tuner: &'a Tuner,
    store: &'a dyn Store,
    loaded: SessionLoad,
    finished: bool,
}

impl<'a> Session<'a> {
    /// Loads the store into the tuner: only the sections it uses (`shared`
    /// and its own), so a rank of a big job never builds the others (and
    /// on a remote store reads only a fraction of the cache).
    pub fn start(tuner: &'a Tuner, store: &'a dyn Store) -> Result<Self, CacheError> {
        let loaded = store.load_sections(&tuner.sections())?;
        for w in &loaded.warnings {
            tracing::warn!("{w}");
        }
        let entries = tuner.load(&loaded.data);
        let _span = tracing::info_span!("session_load", entries).entered();
        Ok(Session {
            tuner,
            store,
            loaded: SessionLoad { entries, warnings: loaded.warnings },
            finished: false,
        })
    }

    /// What was loaded.
    pub fn loaded(&self) -> &SessionLoad {
        &self.loaded
    }

    /// Saves what was tuned since the last save (a merging save that also
    /// removes the rank entries its `shared` entries supersede). Nothing to
    /// save → no write. On error the decisions are kept for the next save.
    pub fn save(&mut self) -> Result<SaveReport, CacheError> {
        let update = self.tuner.take_pending();
        if update.is_unchanged_update() {
            return Ok(SaveReport::default());
        }
        match self.store.save_superseding(&update) {
            Ok(r) => {
                for w in &r.warnings {
                    tracing::warn!("{w}");
                }
                Ok(r)
            }
            Err(e) => {
                self.tuner.restore_pending(update);
                Err(e)
            }
        }
    }

    /// Saves and ends the session.
    pub fn finish(mut self) -> Result<SaveReport, CacheError> {
        self.finished = true;
        self.save()
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if let Err(e) = self.save() {
            tracing::warn!("could not save the tuning cache on exit: {}", Chain(&e));
        }
    }
}
