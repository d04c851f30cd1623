//! The tuning session: a guard that loads the cache into a [`Tuner`] when it
//! starts and saves what was tuned when it ends — on `finish`, on early
//! return, on `?` errors and on panics (the save runs in `Drop`) — and, at
//! each [`Session::checkpoint`] the caller makes between buckets, whenever
//! its save policy ([`SaveEvery`]) says a save is due: durable progress, so
//! a job killed outright loses at most the buckets it was measuring.
//!
//! Owns the load/save lifecycle only; it goes through a [`Store`], whose
//! saves merge, so concurrent ranks never lose each other's entries. It
//! saves with [`Store::save_superseding`]: a bucket the ranks tuned together
//! (a `shared` entry) replaces the entries each rank had stored alone for
//! that op and bucket, so a collective run leaves no stale disagreement
//! behind. A checkpoint is the same save, local to this process: it never
//! talks to the other ranks, so it cannot break their lockstep. When a save
//! is due is the `autosave` module's to say.

use super::autosave::{Autosave, SaveEvery};
use super::tuner::Tuner;
use ranktune_cache::{CacheError, EntryKey, SaveReport, Section, Store};
use ranktune_core::error_chain::Chain;
use std::time::{Duration, Instant};

/// What the session found when it loaded the cache.
#[derive(Clone, Debug, Default)]
pub struct SessionLoad {
    /// Entries taken in (this rank's section and the shared one).
    pub entries: usize,
    /// The store's warnings (bad entries skipped, file set aside, …).
    pub warnings: Vec<String>,
}

/// What a [`Session::checkpoint`] saved.
#[derive(Clone, Debug, Default)]
pub struct Checkpoint {
    /// The store's report of the save.
    pub report: SaveReport,
    /// The entries it made durable, by section and key, in save order.
    pub saved: Vec<(Section, EntryKey)>,
    /// What the save cost (wall time, lock waits included).
    pub took: Duration,
}

/// Loads on start, saves on exit, and at checkpoints when its policy says
/// so. See the module docs.
///
/// ```no_run
/// # fn demo(tuner: &ranktune_tune::Tuner, store: &dyn ranktune_cache::Store) -> Result<(), ranktune_cache::CacheError> {
/// let session = ranktune_tune::Session::start(tuner, store)?;
/// tuner.set_tuning(true);
/// // … choose_one calls measure and store …
/// session.finish()?; // or just let it drop
/// # Ok(()) }
/// ```
///
/// Durable progress: call [`checkpoint`](Session::checkpoint) after each
/// bucket (it saves only when the policy says so, [`SaveEvery::Auto`] by
/// default).
///
/// ```no_run
/// # fn demo(tuner: &ranktune_tune::Tuner, store: &dyn ranktune_cache::Store) -> Result<(), ranktune_cache::CacheError> {
/// use ranktune_tune::{SaveEvery, Session};
/// let mut session = Session::start(tuner, store)?.save_every(SaveEvery::Auto);
/// tuner.set_tuning(true);
/// for _bucket in 0..8 {
///     // … tuner.choose_one(…) measures one bucket …
///     if let Some(c) = session.checkpoint()? {
///         println!("{} buckets durable after {:?}", c.saved.len(), c.took);
///     }
/// }
/// session.finish()?;
/// # Ok(()) }
/// ```
pub struct Session<'a> {
    tuner: &'a Tuner,
    store: &'a dyn Store,
    /// Where checkpoints save, when not `store` (see
    /// [`checkpoint_store`](Session::checkpoint_store)).
    checkpoints: Option<&'a dyn Store>,
    loaded: SessionLoad,
    finished: bool,
    autosave: Autosave,
    /// Entries written by this session's saves so far.
    written: usize,
    /// Saves that wrote something, and what they took.
    saves: u32,
    save_time: Duration,
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
            checkpoints: None,
            loaded: SessionLoad { entries, warnings: loaded.warnings },
            finished: false,
            autosave: Autosave::new(SaveEvery::default()),
            written: 0,
            saves: 0,
            save_time: Duration::ZERO,
        })
    }

    /// The same session with save policy `policy` for its checkpoints.
    pub fn save_every(mut self, policy: SaveEvery) -> Self {
        self.autosave = Autosave::new(policy);
        self
    }

    /// The same session with its checkpoints saved through `store`: the
    /// same cache opened with a shorter wait for its lock, typically. A
    /// checkpoint runs between buckets, while the other ranks of a
    /// collective strategy may already wait for this one at the next
    /// exchange: a checkpoint that cannot get the lock soon should fail
    /// (its decisions stay pending for a later save) rather than hold
    /// everyone up for the cache's full lock timeout. The final save
    /// ([`finish`](Session::finish), drop) uses the session's own store.
    pub fn checkpoint_store(mut self, store: &'a dyn Store) -> Self {
        self.checkpoints = Some(store);
        self
    }

    /// The save policy of the checkpoints.
    pub fn policy(&self) -> SaveEvery {
        self.autosave.policy()
    }

    /// Entries written by this session's saves so far (checkpoints and
    /// [`save`](Session::save)s; the final save's report has its own).
    pub fn written(&self) -> usize {
        self.written
    }

    /// How many saves this session made so far (checkpoints and
    /// [`save`](Session::save)s that had something to write), and what they
    /// took in all: the cost of durable progress, for reports.
    pub fn saves(&self) -> (u32, Duration) {
        (self.saves, self.save_time)
    }

    /// Saves the decisions made since the last save when the policy says a
    /// save is due (see [`SaveEvery`]); `Ok(None)` when it is not, or when
    /// nothing is pending, without touching the store. Call it between
    /// buckets: it takes the tuner's lock only to see whether anything is
    /// pending, and never touches the hit path.
    ///
    /// On error the decisions stay pending for the next save (a later
    /// checkpoint, no sooner than the policy allows after a failure, or the
    /// final save): nothing is lost.
    pub fn checkpoint(&mut self) -> Result<Option<Checkpoint>, CacheError> {
        if !self.autosave.due(Instant::now()) || !self.tuner.has_pending() {
            return Ok(None);
        }
        self.flush_to(self.checkpoints.unwrap_or(self.store))
    }

    /// What was loaded.
    pub fn loaded(&self) -> &SessionLoad {
        &self.loaded
    }

    /// Saves what was tuned since the last save (a merging save that also
    /// removes the rank entries its `shared` entries supersede). Nothing to
    /// save → no write. On error the decisions are kept for the next save.
    pub fn save(&mut self) -> Result<SaveReport, CacheError> {
        Ok(self.flush()?.map(|c| c.report).unwrap_or_default())
    }

    /// Like [`save`](Session::save), whatever the policy, but says what it
    /// made durable, as a checkpoint does (`None`: nothing was pending).
    pub fn flush(&mut self) -> Result<Option<Checkpoint>, CacheError> {
        self.flush_to(self.store)
    }

    /// [`flush`](Session::flush) through `store`.
    fn flush_to(&mut self, store: &dyn Store) -> Result<Option<Checkpoint>, CacheError> {
        let update = self.tuner.take_pending();
        if update.is_unchanged_update() {
            return Ok(None);
        }
        let started = Instant::now();
        let result = store.save_superseding(&update);
        let ended = Instant::now();
        self.autosave.saved(started, ended, result.is_ok());
        match result {
            Ok(report) => {
                for w in &report.warnings {
                    tracing::warn!("{w}");
                }
                let took = ended.saturating_duration_since(started);
                self.written += report.written;
                self.saves += 1;
                self.save_time += took;
                let saved = update.iter().map(|(s, k, _)| (s, k.clone())).collect();
                Ok(Some(Checkpoint { report, saved, took }))
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
