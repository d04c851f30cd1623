//! The tuning session of `ranktune.tuning()`: the choices and blocklist
//! records `ranktune.autotune` makes, kept pending and saved as the Rust
//! tuner's policy says ([`RustAutosave`], `crates/tune/src/autosave.rs`),
//! between measurements, and whatever is left when the outermost block
//! exits — normally, by an exception, or on SIGTERM (Python's handler calls
//! [`session_sigterm_save`]). As the Rust [`Session`](ranktune_tune::Session)
//! saves, each save is one locked, merging save per cache that supersedes
//! the rank entries of a bucket the ranks tuned together.
//!
//! How the saves are made safe:
//!
//! - A record leaves the pending set only once a save wrote it: a save
//!   that fails leaves everything pending, and what a save is writing stays
//!   visible to any other save (the SIGTERM handler's), which writes it
//!   again (a merge: written once).
//! - The pending set's lock ([`STATE`]) is held for a few list operations
//!   only, never while Python code runs or a store is touched; Python code
//!   never runs while any lock of this module is held.
//! - The save turn ([`save_lock`]) makes the policy's saves one at a time (the tuned
//!   call's thread, the deferred save's thread, `session.save()`, the end),
//!   waited for with the GIL released. The SIGTERM save never takes it.
//! - The deferred save (a thread, for a choice no other bucket follows)
//!   runs only while no bucket is measured: a measure starting stops it,
//!   waiting for a save it has begun, so none skews samples or runs while
//!   a forked worker copies the process; the measure's end arms it again.
//!
//! Owns the pending set, the sessions and the saves; never measures or
//! decides (`tuned.rs`).

use crate::cache::warn_all;
use crate::errors;
use pyo3::prelude::*;
use ranktune_cache::{BlockKey, Blocked, CacheData, CacheLocation, Entry, EntryKey, Identity};
use ranktune_cache::{SaveReport, Section};
use ranktune_tune::{Autosave as RustAutosave, SaveEvery};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TuningSession>()?;
    m.add_function(wrap_pyfunction!(session_begin, m)?)?;
    m.add_function(wrap_pyfunction!(session_end, m)?)?;
    m.add_function(wrap_pyfunction!(session_sigterm_save, m)?)?;
    Ok(())
}

/// What one pending record saves.
enum What {
    Choice(Section, EntryKey, Box<Entry>),
    Block(BlockKey, Blocked),
}

/// A choice or blocklist record not saved yet.
struct Pending {
    /// Its number: a save removes exactly what it wrote.
    seq: u64,
    location: CacheLocation,
    what: What,
}

/// The pending set, the measures running, the session and its deferred save.
#[derive(Default)]
struct State {
    next_seq: u64,
    pending: Vec<Pending>,
    measuring: u32,
    current: Option<Arc<Shared>>,
    deferred: Option<JoinHandle<()>>,
    /// Tells the deferred save's thread to stop.
    stop: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    next_seq: 0,
    pending: Vec::new(),
    measuring: 0,
    current: None,
    deferred: None,
    stop: false,
});
/// Wakes the deferred save's thread (a stop).
static WAKE: Condvar = Condvar::new();
/// The policy's saves, one at a time: whether one is running, and its
/// end's signal (a flag, not a guard, so it can be waited for with the
/// GIL released).
static SAVING: Mutex<bool> = Mutex::new(false);
static SAVED: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    // Poisoned: a panic while held, which these list operations cannot
    // have; the state is whole.
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A session's policy and counters.
struct Shared {
    autosave: Mutex<RustAutosave>,
    counts: Mutex<Counts>,
    active: std::sync::atomic::AtomicBool,
}

#[derive(Default, Clone, Copy)]
struct Counts {
    saved: usize,
    saves: u32,
    failed_saves: u32,
    save_seconds: f64,
}

impl Shared {
    fn autosave(&self) -> MutexGuard<'_, RustAutosave> {
        self.autosave.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn active(&self) -> bool {
        self.active.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// What `with ranktune.tuning() as session:` gives: the save policy and
/// what was saved so far (for progress reports and tests).
///
/// - `policy`: `"auto"`, `"end"` or `"every"` (`interval` s);
/// - `saved`: new choices saved (durable: in the cache) so far;
/// - `pending`: choices made and not saved yet;
/// - `saves`, `save_seconds`: how many saves wrote something, and what
///   they cost; `failed_saves`: how many failed (each warned);
/// - `save()`: saves the pending choices now, whatever the policy.
#[pyclass(module = "ranktune._ranktune", frozen, name = "TuningSession")]
pub(crate) struct TuningSession {
    shared: Arc<Shared>,
}

#[pymethods]
impl TuningSession {
    /// `"auto"`, `"end"` or `"every"`.
    #[getter]
    fn policy(&self) -> &'static str {
        match self.shared.autosave().policy() {
            SaveEvery::Auto => "auto",
            SaveEvery::End => "end",
            SaveEvery::Every(_) => "every",
        }
    }

    /// The seconds between saves of `"every"`; `0.0` for the others.
    #[getter]
    fn interval(&self) -> f64 {
        match self.shared.autosave().policy() {
            SaveEvery::Every(d) => d.as_secs_f64(),
            SaveEvery::Auto | SaveEvery::End => 0.0,
        }
    }

    /// New choices saved so far.
    #[getter]
    fn saved(&self) -> usize {
        self.shared.counts().saved
    }

    /// Saves that wrote something.
    #[getter]
    fn saves(&self) -> u32 {
        self.shared.counts().saves
    }

    /// Saves that failed (each warned).
    #[getter]
    fn failed_saves(&self) -> u32 {
        self.shared.counts().failed_saves
    }

    /// What the saves cost, in seconds.
    #[getter]
    fn save_seconds(&self) -> f64 {
        self.shared.counts().save_seconds
    }

    /// Choices made and not saved yet.
    #[getter]
    fn pending(&self) -> usize {
        state().pending.iter().filter(|p| matches!(p.what, What::Choice(..))).count()
    }

    /// Saves the pending choices now; how many were saved. A failed save
    /// raises (its choices stay pending).
    fn save(&self, py: Python<'_>) -> PyResult<usize> {
        let _one = save_lock(py);
        save(py, false)
    }

    fn __repr__(&self) -> String {
        let c = *self.shared.counts();
        format!("TuningSession(policy={:?}, saved={}, saves={})", self.policy(), c.saved, c.saves)
    }
}

/// The policy's turn to save, taken by [`save_lock`], given back on drop.
struct SaveTurn;

impl Drop for SaveTurn {
    fn drop(&mut self) {
        *SAVING.lock().unwrap_or_else(|p| p.into_inner()) = false;
        SAVED.notify_one();
    }
}

/// Takes the policy's turn to save, waiting with the GIL released.
fn save_lock(py: Python<'_>) -> SaveTurn {
    py.allow_threads(|| {
        let mut busy = SAVING.lock().unwrap_or_else(|p| p.into_inner());
        while *busy {
            busy = SAVED.wait(busy).unwrap_or_else(|p| p.into_inner());
        }
        *busy = true;
    });
    SaveTurn
}

/// `session_begin(save_every)`: a new session, the current one from now
/// on, with the policy of `save_every` (parsed by `_ranktune.Autosave`'s
/// rule: a bad value raises `ValueError` naming the argument or
/// `RANKTUNE_SAVE_EVERY`).
#[pyfunction]
#[pyo3(signature = (save_every=None))]
fn session_begin(save_every: Option<&Bound<'_, PyAny>>) -> PyResult<TuningSession> {
    let policy = crate::autosave::parse(save_every)?;
    let shared = Arc::new(Shared {
        autosave: Mutex::new(RustAutosave::new(policy)),
        counts: Mutex::new(Counts::default()),
        active: std::sync::atomic::AtomicBool::new(true),
    });
    state().current = Some(Arc::clone(&shared));
    Ok(TuningSession { shared })
}

/// `session_end(session)`: the outermost block ends: no more deferred
/// saves; what is pending is saved (a failed save raises; its records stay
/// pending for the next session's saves).
#[pyfunction]
fn session_end(py: Python<'_>, session: &TuningSession) -> PyResult<()> {
    session.shared.active.store(false, std::sync::atomic::Ordering::SeqCst);
    stop_deferred(py);
    let result = {
        let _one = save_lock(py);
        save(py, false)
    };
    let mut st = state();
    if st.current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &session.shared)) {
        st.current = None;
    }
    result.map(|_| ())
}

/// `session_sigterm_save()`: the SIGTERM handler's save: everything
/// pending, at once, without the save lock (see the module docs); a
/// failure warns.
#[pyfunction]
fn session_sigterm_save(py: Python<'_>) -> PyResult<()> {
    save(py, true).map(|_| ())
}

/// A choice of `location`'s cache, pending until a save writes it; it
/// replaces a pending choice of the same section and key.
pub(crate) fn record_choice(
    location: &CacheLocation,
    section: Section,
    key: EntryKey,
    entry: Entry,
) {
    let mut st = state();
    st.pending.retain(|p| {
        !(p.location == *location
            && matches!(&p.what, What::Choice(s, k, _) if *s == section && *k == key))
    });
    push(&mut st, location, What::Choice(section, key, Box::new(entry)));
}

/// A blocklist record of `location`'s cache, saved with the next save.
pub(crate) fn record_block(location: &CacheLocation, key: BlockKey, record: Blocked) {
    push(&mut state(), location, What::Block(key, record));
}

fn push(st: &mut State, location: &CacheLocation, what: What) {
    st.next_seq += 1;
    let seq = st.next_seq;
    st.pending.push(Pending { seq, location: location.clone(), what });
}

/// A choice was made: saves the pending ones when the policy says a save
/// is due; then (or else) arms the deferred save for when one falls due,
/// so a choice is never kept unsaved longer than the policy allows, even
/// when no other bucket follows.
pub(crate) fn decided(py: Python<'_>) -> PyResult<()> {
    let Some(current) = state().current.clone() else { return Ok(()) };
    save_if_due(py, &current)?;
    arm();
    Ok(())
}

/// Runs `f` as a measurement: no deferred save runs meanwhile (one in
/// progress is waited for), and the deferred save is armed again after.
pub(crate) fn measuring<T>(py: Python<'_>, f: impl FnOnce() -> T) -> T {
    state().measuring += 1;
    stop_deferred(py);
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            state().measuring -= 1;
            arm();
        }
    }
    let _end = End;
    f()
}

fn has_pending(st: &State) -> bool {
    !st.pending.is_empty()
}

fn save_if_due(py: Python<'_>, current: &Arc<Shared>) -> PyResult<()> {
    let _one = save_lock(py);
    let due = current.active() && current.autosave().due(Instant::now()) && has_pending(&state());
    if due {
        save(py, true)?;
    }
    Ok(())
}

/// The wait until the current session's next save is due, when a deferred
/// save should wait for it now.
fn deferred_wait(st: &State) -> Option<(Arc<Shared>, Duration)> {
    let current = st.current.as_ref()?;
    if !current.active() || st.measuring > 0 || !has_pending(st) {
        return None;
    }
    let now = Instant::now();
    let wait = current.autosave().next_due(now)?.saturating_duration_since(now);
    // A policy of more seconds than a century saves only at the end.
    (wait <= Duration::from_secs(100 * 365 * 24 * 3600)).then(|| (Arc::clone(current), wait))
}

/// Starts the deferred save's thread, unless one runs or none is wanted.
fn arm() {
    let mut st = state();
    if st.deferred.as_ref().is_some_and(|h| !h.is_finished()) || deferred_wait(&st).is_none() {
        return;
    }
    st.stop = false;
    let spawned = std::thread::Builder::new().name("ranktune-save".into()).spawn(deferred);
    match spawned {
        Ok(h) => st.deferred = Some(h),
        Err(e) => {
            tracing::warn!("cannot start the deferred save ({e}); it waits for the next bucket")
        }
    }
}

/// The deferred save's thread: waits until a save is due, saves (between
/// measurements), and goes on while something is pending.
fn deferred() {
    loop {
        let mut st = state();
        let Some((current, wait)) = deferred_wait(&st) else { return };
        if !wait.is_zero() {
            st = WAKE.wait_timeout(st, wait).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0);
            if st.stop {
                return;
            }
            continue; // what is wanted may have changed meanwhile
        }
        drop(st);
        Python::with_gil(|py| {
            if state().stop || state().measuring > 0 {
                return; // a measure began: it arms the save again when it ends
            }
            if let Err(e) = save_if_due(py, &current) {
                e.print(py); // a warning filter that raises: said, not lost
            }
        });
        if state().stop {
            return;
        }
    }
}

/// Stops the deferred save, waiting (GIL released) for a save it has begun.
fn stop_deferred(py: Python<'_>) {
    let handle = {
        let mut st = state();
        st.stop = true;
        WAKE.notify_all();
        st.deferred.take()
    };
    if let Some(h) = handle {
        if h.thread().id() != std::thread::current().id() {
            py.allow_threads(|| {
                let _ = h.join();
            });
        }
    }
}

/// Saves everything pending, each cache's records in one locked, merging
/// save; how many choices were saved. What a save wrote leaves the pending
/// set afterwards (a choice made again meanwhile stays); what it did not
/// write stays. `quiet` (a save while tuning goes on, the SIGTERM
/// handler's): a failure warns instead of raising.
fn save(py: Python<'_>, quiet: bool) -> PyResult<usize> {
    // Grouped by cache, in the order first recorded.
    let mut groups: Vec<(CacheLocation, CacheData, Vec<u64>)> = Vec::new();
    let current = {
        let st = state();
        for p in &st.pending {
            let i = match groups.iter().position(|(l, _, _)| *l == p.location) {
                Some(i) => i,
                None => {
                    groups.push((p.location.clone(), CacheData::default(), Vec::new()));
                    groups.len() - 1
                }
            };
            let (_, data, seqs) = &mut groups[i];
            match &p.what {
                What::Choice(s, k, e) => data.insert(*s, k.clone(), (**e).clone()),
                What::Block(k, r) => {
                    data.blocklist.insert(k.clone(), r.clone());
                }
            }
            seqs.push(p.seq);
        }
        st.current.clone()
    };
    if groups.is_empty() {
        return Ok(0);
    }
    crate::logs::ensure();
    let identity = Identity::current();
    let digest = identity.digest();
    let started = Instant::now();
    let mut written: Vec<u64> = Vec::new();
    let mut reports: Vec<SaveReport> = Vec::new();
    let mut failure: Option<PyErr> = None;
    for (location, mut data, seqs) in groups {
        if data.iter().any(|(_, _, e)| e.env == digest) {
            data.metadata.environments.insert(digest.clone(), identity.clone());
        }
        let result = py.allow_threads(|| location.open()?.save_superseding(&data));
        match result {
            Ok(r) => {
                reports.push(r);
                written.extend(seqs);
            }
            Err(e) => {
                failure = Some(errors::cache(&format!("saving into {location}"), e));
                break;
            }
        }
    }
    let ended = Instant::now();
    let saved = {
        let mut st = state();
        let before = st.pending.len();
        let mut choices = 0;
        st.pending.retain(|p| {
            let gone = written.contains(&p.seq);
            if gone && matches!(p.what, What::Choice(..)) {
                choices += 1;
            }
            !gone
        });
        debug_assert!(st.pending.len() <= before);
        choices
    };
    if let Some(c) = &current {
        let mut n = c.counts();
        n.saved += saved;
        if !written.is_empty() {
            n.saves += 1;
            n.save_seconds += ended.saturating_duration_since(started).as_secs_f64();
        }
        if failure.is_some() {
            n.failed_saves += 1;
        }
        drop(n);
        c.autosave().saved(started, ended, failure.is_none());
    }
    for r in &reports {
        warn_all(py, &r.warnings)?;
    }
    match failure {
        None => Ok(saved),
        Some(e) if !quiet => Err(e),
        Some(e) => {
            let text = format!(
                "ranktune: saving tuned choices failed ({}); they are kept and saved again with \
                 the next ones (no sooner than the policy's back-off) or when tuning ends",
                e.value(py)
            );
            warn_all(py, &[text])?;
            Ok(saved)
        }
    }
}
