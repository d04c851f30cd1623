//! The recorder: per-thread event buffers with a bounded total.
//!
//! Each thread that records gets its own [`ThreadBuf`], registered once per
//! session, and writes encoded events (see `chunk`) into chunks it alone
//! owns. The hot path is a check of one global and one thread-local
//! generation, a site-id look-up in a thread-local cache (`sites`), three
//! word stores and one release store: no lock, no hash map, no `RefCell`, no
//! allocation. The thread's write position lives in a thread-local
//! [`Cursor`] of plain cells; everything else (registration, a new chunk,
//! the budget, a new session) is the cold path through [`Local`].
//!
//! Memory is bounded **in bytes**: the session's `max_events` sets a budget
//! of `max_events × 24` bytes of event storage (24 bytes is one plain
//! event), which threads draw from a chunk at a time: a chunk is charged its
//! whole capacity when it is allocated, and nothing is handed back while it
//! lives (it is freed only with the session's events). An event with args
//! or a run-time name takes 24 bytes plus its text, rounded up to 8 bytes,
//! so long span arguments fill the budget sooner instead of multiplying it.
//! When the budget is spent, further events are counted as dropped (the
//! count goes into the trace file) and not stored.
//!
//! It also keeps open `tracing` spans per thread (`open`: filled by the Layer,
//! which calls down into it) and reusable args buffers (`strings`). This
//! module never does I/O (see `export`) and never calls up into the API,
//! the Layer, the Subscriber or the session: it depends only on `clock`,
//! `window`, `sys` and `json_text`.

mod chunk;
pub(crate) mod open;
mod sites;
pub(crate) mod strings;

pub(crate) use chunk::{EventRef, Kind};
pub(crate) use open::OpenSpan;
pub(crate) use sites::all as sites;

use crate::clock;
use crate::window::IterWindow;
use chunk::{Chunk, MAX_NAME_BYTES};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Most bytes of args stored with one event, whoever produced them (longer
/// args are left out); producers keep to a smaller bound of their own
/// (`json_text::MAX_ARGS_BYTES`).
const MAX_STORED_ARGS: usize = 4 * MAX_NAME_BYTES;

/// Plain events in a thread's first chunk (the unit of allocation and of
/// budget reservation). Each next chunk of the thread is twice as big, up to
/// [`MAX_CHUNK_EVENTS`] and a sixteenth of the session's budget: fewer
/// allocations, and chunks of 2 MiB and more are backed by huge pages where
/// the OS allows, one page fault per 2 MiB instead of one per 4 KiB.
pub(crate) const CHUNK_EVENTS: usize = 1024;

/// The largest chunk, in plain events (3 MiB).
const MAX_CHUNK_EVENTS: usize = 1 << 17;

/// What kind of event, with its kind-specific value (as recorded and as
/// read back by the exporter).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload {
    /// `ph: X` with a duration in clock ticks.
    Complete { dur: u64 },
    /// `ph: i`, thread scope.
    Instant,
    /// `ph: C` with one series named `value`.
    Counter(f64),
}

/// One thread's events in one session.
pub(crate) struct ThreadBuf {
    pub tid: u64,
    pub name: Mutex<String>,
    chunks: Mutex<Vec<Arc<Chunk>>>,
    dropped: AtomicU64,
    /// `tracing` spans opened on this thread and not closed yet. Only this
    /// thread touches it, except when a span closes on another thread.
    open: open::TableLock,
}

impl ThreadBuf {
    /// Calls `f` on every event recorded so far, oldest first.
    pub(crate) fn for_each(&self, f: &mut dyn FnMut(&EventRef<'_>)) {
        let chunks = self.chunks.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for chunk in &chunks {
            chunk.for_each(f);
        }
    }

    pub(crate) fn thread_name(&self) -> String {
        self.name.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Step bookkeeping (not on the hot path).
struct Steps {
    iter: u64,
    start: u64,
}

/// All threads' buffers of one session, its budget and its window state.
pub(crate) struct Recorder {
    gen: u64,
    /// Words (8 bytes) of event storage left to allocate.
    budget: AtomicUsize,
    max_events: usize,
    threads: Mutex<Vec<Arc<ThreadBuf>>>,
    recording: AtomicBool,
    window: Option<IterWindow>,
    steps: Mutex<Steps>,
}

/// Generation of the active recorder; 0 when no session is recording.
static GEN: AtomicU64 = AtomicU64::new(0);
static NEXT_GEN: AtomicU64 = AtomicU64::new(1);
static CURRENT: Mutex<Option<Arc<Recorder>>> = Mutex::new(None);
/// Whether the active recorder keeps events now (its `recording` flag,
/// mirrored here so that the check at a span's start is one global load,
/// without the thread-local look-up). Written only under `CURRENT`'s lock.
static RECORDING: AtomicBool = AtomicBool::new(false);

/// A thread's session state for the cold path; owns the chunk the
/// [`Cursor`] points into.
struct Local {
    gen: u64,
    rec: Arc<Recorder>,
    buf: Arc<ThreadBuf>,
    chunk: Option<Arc<Chunk>>,
    /// Events to reserve for this thread's next chunk.
    next_chunk: usize,
}

impl Drop for Local {
    fn drop(&mut self) {
        // The cursor points into `self.chunk`, which may be freed now.
        let _ = CURSOR.try_with(Cursor::reset);
    }
}

/// Where this thread writes its next event. Plain cells without a
/// destructor, so the hot path reads them directly; valid only while `gen`
/// equals [`GEN`], and kept so by [`Local`] (which owns the chunk and resets
/// the cursor when it goes away).
struct Cursor {
    gen: Cell<u64>,
    base: Cell<*mut u64>,
    at: Cell<usize>,
    cap: Cell<usize>,
    len: Cell<*const AtomicUsize>,
}

impl Cursor {
    fn reset(&self) {
        self.gen.set(0);
        self.cap.set(0);
        self.at.set(0);
        self.base.set(std::ptr::null_mut());
        self.len.set(std::ptr::null());
    }

    /// Points the cursor at the start of fresh `chunk` of session `gen`.
    fn aim(&self, gen: u64, chunk: &Chunk) {
        self.gen.set(gen);
        self.base.set(chunk.base());
        self.at.set(chunk.len_cell().load(Ordering::Relaxed));
        self.cap.set(chunk.capacity());
        self.len.set(chunk.len_cell());
    }

    /// Writes the event here if the cursor is current and has room.
    #[inline]
    fn try_write(&self, ts: u64, val: u64, head: u64, name: &str, args: &[u8]) -> bool {
        let at = self.at.get();
        let need = chunk::words_for(name.len() + args.len());
        if self.gen.get() != GEN.load(Ordering::Relaxed) || at + need > self.cap.get() {
            return false;
        }
        // SAFETY: the cursor is current (its generation is the active one,
        // so `Local` holds the chunk it points into and has not reset it),
        // `at` is the chunk's unpublished length, the room was checked
        // above, and only this thread writes this chunk.
        unsafe {
            let end = chunk::write(self.base.get(), at, ts, val, head, name, args);
            (*self.len.get()).store(end, Ordering::Release);
            self.at.set(end);
        }
        true
    }
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
    static CURSOR: Cursor = const {
        Cursor {
            gen: Cell::new(0),
            base: Cell::new(std::ptr::null_mut()),
            at: Cell::new(0),
            cap: Cell::new(0),
            len: Cell::new(std::ptr::null()),
        }
    };
}

impl Recorder {
    /// A new recorder; it records nothing until [`Recorder::activate`].
    pub(crate) fn new(max_events: usize, window: Option<IterWindow>) -> Arc<Recorder> {
        clock::init();
        let recording = window.as_ref().is_none_or(|w| w.contains(0));
        Arc::new(Recorder {
            gen: NEXT_GEN.fetch_add(1, Ordering::Relaxed),
            budget: AtomicUsize::new(max_events.saturating_mul(chunk::PLAIN_WORDS)),
            max_events,
            threads: Mutex::new(Vec::new()),
            recording: AtomicBool::new(recording),
            window,
            steps: Mutex::new(Steps { iter: 0, start: clock::now() }),
        })
    }

    /// Makes this the recorder every thread records into.
    pub(crate) fn activate(self: &Arc<Self>) {
        let mut cur = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
        *cur = Some(Arc::clone(self));
        GEN.store(self.gen, Ordering::Release);
        RECORDING.store(self.recording.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Stops recording into this recorder (if it is the active one).
    pub(crate) fn deactivate(&self) {
        let mut cur = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
        if cur.as_ref().is_some_and(|r| r.gen == self.gen) {
            GEN.store(0, Ordering::Release);
            RECORDING.store(false, Ordering::Relaxed);
            *cur = None;
        }
    }

    /// Frees the recorded events (after the final export). A thread's
    /// current chunk lives on until the thread records again or exits.
    pub(crate) fn clear(&self) {
        for buf in self.threads.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            buf.chunks.lock().unwrap_or_else(PoisonError::into_inner).clear();
            buf.open.lock().clear();
        }
    }

    /// The registered threads, in registration order.
    pub(crate) fn threads(&self) -> Vec<Arc<ThreadBuf>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Events not stored because the budget was spent.
    pub(crate) fn dropped(&self) -> u64 {
        self.threads().iter().map(|t| t.dropped.load(Ordering::Relaxed)).sum()
    }

    pub(crate) fn max_events(&self) -> usize {
        self.max_events
    }

    pub(crate) fn window(&self) -> Option<&IterWindow> {
        self.window.as_ref()
    }

    /// The current iteration.
    pub(crate) fn iteration(&self) -> u64 {
        self.steps.lock().unwrap_or_else(PoisonError::into_inner).iter
    }

    /// Ends the current iteration (recording it as `ProfilerStep#<N>` when
    /// inside the window) and starts the next.
    pub(crate) fn step(&self) {
        let now = clock::now();
        let mut steps = self.steps.lock().unwrap_or_else(PoisonError::into_inner);
        let iter = steps.iter;
        if self.window.as_ref().is_none_or(|w| w.contains(iter)) {
            let dur = now.saturating_sub(steps.start);
            let name = format!("ProfilerStep#{iter}");
            record("", "user_annotation", Kind::Complete, steps.start, dur, &name, b"");
        }
        steps.iter = iter.saturating_add(1);
        steps.start = now;
        let next = self.window.as_ref().is_none_or(|w| w.contains(steps.iter));
        let cur = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
        self.recording.store(next, Ordering::Relaxed);
        if cur.as_ref().is_some_and(|r| r.gen == self.gen) {
            RECORDING.store(next, Ordering::Relaxed);
        }
    }

    fn register(self: &Arc<Self>) -> Arc<ThreadBuf> {
        let current = std::thread::current();
        let tid = crate::sys::thread_id();
        let name = current.name().map_or_else(|| format!("thread {tid}"), str::to_string);
        let buf = Arc::new(ThreadBuf {
            tid,
            name: Mutex::new(name),
            chunks: Mutex::new(Vec::new()),
            dropped: AtomicU64::new(0),
            open: open::TableLock::new(),
        });
        self.threads.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::clone(&buf));
        buf
    }

    /// Reserves up to `want` words of budget; 0 when it is spent.
    fn reserve(&self, want: usize) -> usize {
        let mut got = 0;
        let _ = self.budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            got = left.min(want);
            (got > 0).then_some(left - got)
        });
        got
    }

    /// Hands back reserved words that were never allocated.
    fn unreserve(&self, words: usize) {
        if words > 0 {
            self.budget.fetch_add(words, Ordering::Relaxed);
        }
    }
}

/// Runs `f` with this thread's state for the active session, registering the
/// thread on first use. Returns `None` when no session is active (or the
/// state is in use further up this thread's stack).
fn with_local<R>(f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    let gen = GEN.load(Ordering::Acquire);
    if gen == 0 {
        return None;
    }
    LOCAL
        .try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            if slot.as_ref().is_none_or(|l| l.gen != gen) {
                // Dropping the old state resets the cursor first.
                *slot = None;
                *slot = Some(refresh()?);
            }
            slot.as_mut().map(f)
        })
        .ok()
        .flatten()
}

#[cold]
fn refresh() -> Option<Local> {
    let rec = CURRENT.lock().unwrap_or_else(PoisonError::into_inner).clone()?;
    let buf = rec.register();
    Some(Local { gen: rec.gen, rec, buf, chunk: None, next_chunk: CHUNK_EVENTS })
}

/// Whether events are being kept right now (a session is active and the
/// current iteration is inside its window).
#[inline]
pub(crate) fn is_recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// Stores one event in this thread's buffer of the active session.
///
/// `name` and `cat` are the event's site; a non-empty `dyn_name` replaces
/// the name (cut to [`MAX_NAME_BYTES`]); `args` is a JSON object's text
/// (UTF-8) or empty; `val` is the duration in ticks (`Complete`), the counter value's
/// bits (`Counter`) or 0.
#[inline(always)]
pub(crate) fn record(
    name: &'static str,
    cat: &'static str,
    kind: Kind,
    ts: u64,
    val: u64,
    dyn_name: &str,
    args: &[u8],
) {
    record_at(sites::id(name, cat), kind, ts, val, dyn_name, args);
}

/// The interned id of site `(name, cat)` (for [`record_at`]).
#[inline]
pub(crate) fn site_id(name: &'static str, cat: &'static str) -> u32 {
    sites::id(name, cat)
}

/// [`record`] with the site already interned.
#[inline(always)]
pub(crate) fn record_at(site: u32, kind: Kind, ts: u64, val: u64, dyn_name: &str, args: &[u8]) {
    let head = chunk::head(site, kind);
    let dyn_name = cut(dyn_name);
    // Producers bound args (`json_text::MAX_ARGS_BYTES`); this bounds an
    // event's memory whatever they pass.
    let args = if args.len() > MAX_STORED_ARGS { &[] } else { args };
    let written = CURSOR.try_with(|c| c.try_write(ts, val, head, dyn_name, args)).unwrap_or(false);
    if !written {
        record_slow(ts, val, head, dyn_name, args);
    }
}

/// `name` cut to at most [`MAX_NAME_BYTES`] at a character boundary.
#[inline]
fn cut(name: &str) -> &str {
    if name.len() <= MAX_NAME_BYTES {
        return name;
    }
    let mut end = MAX_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// A new session, a full chunk or no chunk yet: finds room (or counts the
/// event as dropped) and writes there.
#[cold]
#[inline(never)]
fn record_slow(ts: u64, val: u64, head: u64, name: &str, args: &[u8]) {
    with_local(|l| {
        // The fast path found no room: a new session (the old state was
        // just replaced), no chunk yet, or a full one.
        new_chunk(l, ts, val, head, name, args);
    });
}

fn new_chunk(l: &mut Local, ts: u64, val: u64, head: u64, name: &str, args: &[u8]) {
    // Retire the current chunk. Its memory stays allocated (and charged)
    // until the session's events are freed, so nothing is handed back.
    if l.chunk.is_some() {
        l.chunk = None;
        let _ = CURSOR.try_with(Cursor::reset);
    }
    let want = l.next_chunk;
    let limit = (l.rec.max_events / 16).clamp(CHUNK_EVENTS, MAX_CHUNK_EVENTS);
    l.next_chunk = want.saturating_mul(2).min(limit);
    let need = chunk::words_for(name.len() + args.len());
    let words = l.rec.reserve(want.saturating_mul(chunk::PLAIN_WORDS).max(need));
    if words < need {
        // Not even this event fits: what was reserved serves smaller ones.
        l.rec.unreserve(words);
        l.buf.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let chunk = Arc::new(Chunk::new(words));
    l.buf.chunks.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::clone(&chunk));
    let _ = CURSOR.try_with(|c| {
        c.aim(l.gen, &chunk);
        // A fresh chunk has room for `need` words.
        c.try_write(ts, val, head, name, args)
    });
    l.chunk = Some(chunk);
}

/// Renames the calling thread in the active session's trace.
pub(crate) fn set_thread_name(name: &str) {
    with_local(|l| *l.buf.name.lock().unwrap_or_else(PoisonError::into_inner) = name.to_string());
}

/// The active recorder, if any (for `step()` without a session handle).
pub(crate) fn current() -> Option<Arc<Recorder>> {
    CURRENT.lock().unwrap_or_else(PoisonError::into_inner).clone()
}
