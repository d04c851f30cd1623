//! The recorder: per-thread event buffers with a bounded total.
//!
//! Each thread that records gets its own [`ThreadBuf`], registered once per
//! session. Events go into fixed-size chunks owned by that thread: the hot
//! path is a thread-local lookup, one slot write and one release store. No
//! global lock is taken and nothing is allocated per event (a thread's first
//! chunk has [`CHUNK_EVENTS`] slots and each next one twice as many, up to
//! a bound; only events that carry dynamic args or names allocate those). Stored events
//! are 48 bytes: `(name, category)` pairs are `&'static str` and interned
//! once per call site (a thread-local cache in front of a global table that
//! is locked only on a cache miss).
//!
//! It also keeps the `tracing` Layer's open spans: one table per thread,
//! locked only by its own thread except when a span closes elsewhere.
//!
//! Memory is bounded: the session's `max_events` is a budget that threads
//! draw from a chunk at a time; when it is spent, further events are counted
//! as dropped (the count goes into the trace file) and not stored.
//!
//! The exporter reads the chunks while threads keep recording: a writer only
//! ever writes the slot past the chunk's published length and then publishes
//! it (release); a reader only reads slots below the length it loaded
//! (acquire). So a snapshot is always a consistent prefix of every thread's
//! events. This module never does I/O; see `export` for that.

use super::clock;
use super::window::IterWindow;
use std::cell::{RefCell, UnsafeCell};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Events in a thread's first chunk (the unit of allocation and of budget
/// reservation). Each next chunk of the thread is twice as big, up to
/// [`MAX_CHUNK_EVENTS`] and a sixteenth of the session's budget: fewer
/// allocations, and chunks of 2 MiB and more are backed by huge pages where
/// the OS allows, one page fault per 2 MiB instead of one per 4 KiB.
pub(crate) const CHUNK_EVENTS: usize = 1024;

/// The largest chunk, in events (6 MiB of 48-byte events).
const MAX_CHUNK_EVENTS: usize = 1 << 17;

/// An event's name.
#[derive(Clone, Debug)]
pub(crate) enum Name {
    /// A name known at compile time (native spans, `tracing` metadata).
    Static(&'static str),
    /// A name made at run time (e.g. a `tracing` event's message).
    Owned(Box<str>),
    /// `ProfilerStep#<N>`, rendered at export.
    Step(u64),
}

/// What kind of event, with its kind-specific value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload {
    /// `ph: X` with a duration in clock ticks.
    Complete { dur: u64 },
    /// `ph: i`, thread scope.
    Instant,
    /// `ph: C` with one series named `value`.
    Counter(f64),
}

/// One event as the recording code describes it (built on the stack and
/// compacted by [`push`]).
#[derive(Clone, Debug)]
pub(crate) struct Event {
    pub name: Name,
    pub cat: &'static str,
    /// Clock ticks since the base (see `clock`).
    pub ts: u64,
    pub payload: Payload,
    /// A JSON object's text, or `None` for no args.
    pub args: Option<String>,
}

/// One event as stored: 48 bytes, so that fresh memory (page faults) costs
/// little per event. `(name, cat)` is interned to `site`; a run-time name
/// and the args share one string (`text`, name first, `name_len` bytes), so
/// an event allocates at most once.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    pub ts: u64,
    /// Duration in ticks (`X`) or the counter value's bits (`C`).
    pub val: u64,
    pub text: Option<String>,
    pub site: u32,
    /// Length of the run-time name at the start of `text` (0: use the site's).
    pub name_len: u16,
    pub kind: Kind,
}

/// The phase of a stored event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Complete,
    Instant,
    Counter,
}

impl Stored {
    /// The run-time name, if the event has one.
    pub(crate) fn name(&self) -> Option<&str> {
        let text = self.text.as_deref()?;
        (self.name_len > 0).then(|| text.get(..usize::from(self.name_len)).unwrap_or(text))
    }

    /// The args object's text, if any.
    pub(crate) fn args(&self) -> Option<&str> {
        let text = self.text.as_deref()?;
        text.get(usize::from(self.name_len)..).filter(|a| !a.is_empty())
    }

    /// The event's payload, as it was recorded.
    pub(crate) fn payload(&self) -> Payload {
        match self.kind {
            Kind::Complete => Payload::Complete { dur: self.val },
            Kind::Instant => Payload::Instant,
            Kind::Counter => Payload::Counter(f64::from_bits(self.val)),
        }
    }
}

/// Interned `(name, cat)` pairs of this process (static strings, so the
/// table is bounded by the program's own call sites).
struct Sites {
    list: Vec<(&'static str, &'static str)>,
    index: std::collections::HashMap<(&'static str, &'static str), u32>,
}

static SITES: Mutex<Option<Sites>> = Mutex::new(None);

fn intern_global(name: &'static str, cat: &'static str) -> u32 {
    let mut guard = SITES.lock().unwrap_or_else(PoisonError::into_inner);
    let sites = guard
        .get_or_insert_with(|| Sites { list: Vec::new(), index: std::collections::HashMap::new() });
    if let Some(&id) = sites.index.get(&(name, cat)) {
        return id;
    }
    let id = u32::try_from(sites.list.len()).unwrap_or(u32::MAX);
    sites.list.push((name, cat));
    sites.index.insert((name, cat), id);
    id
}

/// All interned sites, indexed by id (for export).
pub(crate) fn sites() -> Vec<(&'static str, &'static str)> {
    SITES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map_or_else(Vec::new, |s| s.list.clone())
}

const SITE_CACHE: usize = 64;

/// A thread's direct-mapped cache of site ids, keyed by string identity.
struct SiteCache {
    slots: [(usize, usize, usize, usize, u32); SITE_CACHE],
}

impl SiteCache {
    fn new() -> SiteCache {
        SiteCache { slots: [(0, 0, 0, 0, 0); SITE_CACHE] }
    }

    #[inline]
    fn get(&mut self, name: &'static str, cat: &'static str) -> u32 {
        let key = (name.as_ptr() as usize, name.len(), cat.as_ptr() as usize, cat.len());
        let h = (key.0 >> 3) ^ (key.0 >> 11) ^ (key.2 >> 5) ^ key.1;
        let slot = &mut self.slots[h % SITE_CACHE];
        if (slot.0, slot.1, slot.2, slot.3) == key {
            return slot.4;
        }
        let id = intern_global(name, cat);
        *slot = (key.0, key.1, key.2, key.3, id);
        id
    }
}

/// A fixed-capacity, append-only block of events with one writer.
struct Chunk {
    slots: Box<[UnsafeCell<MaybeUninit<Stored>>]>,
    len: AtomicUsize,
}

// SAFETY: only the owning thread writes, and only the slot at `len` before
// publishing it with a release store; other threads read only slots below a
// length they loaded with acquire, which are never written again.
unsafe impl Sync for Chunk {}
// SAFETY: `Stored` is `Send`; the chunk owns its events.
unsafe impl Send for Chunk {}

impl Chunk {
    fn new(capacity: usize) -> Chunk {
        let mut slots: Vec<UnsafeCell<MaybeUninit<Stored>>> = Vec::with_capacity(capacity);
        // Before anything touches the memory, so big chunks fault in whole
        // huge pages.
        super::sys::advise_huge_pages(
            slots.as_ptr().cast(),
            capacity * std::mem::size_of::<Stored>(),
        );
        // SAFETY: the capacity is allocated, and uninitialized memory is a
        // valid `MaybeUninit` (nothing is read before it is written).
        unsafe { slots.set_len(capacity) };
        Chunk { slots: slots.into_boxed_slice(), len: AtomicUsize::new(0) }
    }

    /// Appends if there is room; only the owning thread may call this.
    #[inline]
    fn push(&self, event: Stored) -> Result<(), Stored> {
        let len = self.len.load(Ordering::Relaxed);
        match self.slots.get(len) {
            Some(slot) => {
                // SAFETY: slot `len` is unpublished, so no reader looks at it,
                // and this thread is the only writer.
                unsafe { (*slot.get()).write(event) };
                self.len.store(len + 1, Ordering::Release);
                Ok(())
            }
            None => Err(event),
        }
    }

    /// Calls `f` on every published event.
    fn for_each(&self, f: &mut dyn FnMut(&Stored)) {
        let len = self.len.load(Ordering::Acquire);
        for slot in &self.slots[..len] {
            // SAFETY: slots below a published length are initialized and
            // never written again.
            f(unsafe { (*slot.get()).assume_init_ref() });
        }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        let len = *self.len.get_mut();
        for slot in &mut self.slots[..len] {
            // SAFETY: initialized (published) and dropped exactly once here.
            unsafe { slot.get_mut().assume_init_drop() };
        }
    }
}

/// A `tracing` span that is open (created, not yet closed).
pub(crate) struct OpenSpan {
    pub start: u64,
    /// The span's metadata: name, target (the category), level.
    pub meta: &'static tracing::Metadata<'static>,
    /// Open JSON object text (`{"k":v,...` without the `}`), or empty.
    pub args: String,
    /// Handles still referring to the span (the lean Subscriber's
    /// `clone_span`/`try_close` count; the Layer leaves it at 1).
    pub refs: u32,
    /// Names of the spans this one follows from (`follows_from`).
    pub follows: Vec<&'static str>,
}

impl OpenSpan {
    /// A span opened now with `args` (an open object text, or empty).
    pub(crate) fn new(meta: &'static tracing::Metadata<'static>, args: String) -> OpenSpan {
        OpenSpan { start: clock::now(), meta, args, refs: 1, follows: Vec::new() }
    }

    /// The complete event of this span, ending now.
    pub(crate) fn into_event(self) -> Event {
        let end = clock::now();
        let mut args = self.args;
        if !self.follows.is_empty() {
            let mut more = String::from("{\"follows_from\":[");
            for (i, name) in self.follows.iter().enumerate() {
                if i > 0 {
                    more.push(',');
                }
                super::api::push_json_str(&mut more, name);
            }
            more.push(']');
            super::layer::merge_args(&mut args, &more);
        }
        Event {
            name: Name::Static(self.meta.name()),
            cat: self.meta.target(),
            ts: self.start,
            payload: Payload::Complete { dur: end.saturating_sub(self.start) },
            args: super::layer::finish(args),
        }
    }
}

/// Hashes span ids (already unique integers) with one multiply.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type OpenMap = HashMap<u64, OpenSpan, BuildHasherDefault<IdHasher>>;

/// One thread's events in one session.
pub(crate) struct ThreadBuf {
    pub tid: u64,
    pub name: Mutex<String>,
    chunks: Mutex<Vec<Arc<Chunk>>>,
    dropped: AtomicU64,
    /// `tracing` spans opened on this thread and not closed yet. Only this
    /// thread touches it, except when a span closes on another thread.
    open: Mutex<OpenMap>,
}

impl ThreadBuf {
    /// Calls `f` on every event recorded so far.
    pub(crate) fn for_each(&self, f: &mut dyn FnMut(&Stored)) {
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

struct Local {
    gen: u64,
    rec: Arc<Recorder>,
    buf: Arc<ThreadBuf>,
    chunk: Option<Arc<Chunk>>,
    /// Size of this thread's next chunk, in events.
    next_chunk: usize,
    sites: SiteCache,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

impl Recorder {
    /// A new recorder; it records nothing until [`Recorder::activate`].
    pub(crate) fn new(max_events: usize, window: Option<IterWindow>) -> Arc<Recorder> {
        clock::init();
        let recording = window.as_ref().is_none_or(|w| w.contains(0));
        Arc::new(Recorder {
            gen: NEXT_GEN.fetch_add(1, Ordering::Relaxed),
            budget: AtomicUsize::new(max_events),
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

    /// Frees the recorded events (after the final export).
    pub(crate) fn clear(&self) {
        for buf in self.threads.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            buf.chunks.lock().unwrap_or_else(PoisonError::into_inner).clear();
            buf.open.lock().unwrap_or_else(PoisonError::into_inner).clear();
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
            push(Event {
                name: Name::Step(iter),
                cat: "user_annotation",
                ts: steps.start,
                payload: Payload::Complete { dur },
                args: None,
            });
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
        let tid = super::sys::thread_id();
        let name = current.name().map_or_else(|| format!("thread {tid}"), str::to_string);
        let buf = Arc::new(ThreadBuf {
            tid,
            name: Mutex::new(name),
            chunks: Mutex::new(Vec::new()),
            dropped: AtomicU64::new(0),
            open: Mutex::new(OpenMap::default()),
        });
        self.threads.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::clone(&buf));
        buf
    }

    /// Reserves up to `want` events of budget; 0 when spent.
    fn reserve(&self, want: usize) -> usize {
        let mut got = 0;
        let _ = self.budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            got = left.min(want);
            (got > 0).then_some(left - got)
        });
        got
    }
}

/// Runs `f` with this thread's state for the active session, registering the
/// thread on first use. Returns `None` when no session is active.
#[inline]
fn with_local<R>(f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    let gen = GEN.load(Ordering::Acquire);
    if gen == 0 {
        return None;
    }
    LOCAL
        .try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            if slot.as_ref().is_none_or(|l| l.gen != gen) {
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
    Some(Local {
        gen: rec.gen,
        rec,
        buf,
        chunk: None,
        next_chunk: CHUNK_EVENTS,
        sites: SiteCache::new(),
    })
}

/// Whether events are being kept right now (a session is active and the
/// current iteration is inside its window).
#[inline]
pub(crate) fn is_recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// Stores `event` in this thread's buffer of the active session.
#[inline]
pub(crate) fn push(event: Event) {
    with_local(|l| store(l, event));
}

#[inline]
fn store(l: &mut Local, event: Event) {
    let event = compact(l, event);
    if let Some(chunk) = &l.chunk {
        match chunk.push(event) {
            Ok(()) => {}
            Err(back) => push_slow(l, back),
        }
    } else {
        push_slow(l, event);
    }
}

/// Turns an event into its stored form, interning `(name, cat)`.
#[inline]
fn compact(l: &mut Local, e: Event) -> Stored {
    let (kind, val) = match e.payload {
        Payload::Complete { dur } => (Kind::Complete, dur),
        Payload::Instant => (Kind::Instant, 0),
        Payload::Counter(v) => (Kind::Counter, v.to_bits()),
    };
    let (name, owned) = match e.name {
        Name::Static(s) => (s, None),
        Name::Owned(s) => ("", Some(s.into_string())),
        Name::Step(n) => ("", Some(format!("ProfilerStep#{n}"))),
    };
    let (text, name_len) = match (owned, e.args) {
        (None, args) => (args, 0),
        (Some(mut name), args) => {
            let mut cut = name.len().min(usize::from(u16::MAX));
            while !name.is_char_boundary(cut) {
                cut -= 1;
            }
            name.truncate(cut);
            let len = u16::try_from(cut).unwrap_or(u16::MAX);
            if let Some(args) = args {
                name.push_str(&args);
            }
            (Some(name), len)
        }
    };
    Stored { ts: e.ts, val, text, site: l.sites.get(name, e.cat), name_len, kind }
}

#[cold]
fn push_slow(l: &mut Local, event: Stored) {
    let want = l.next_chunk;
    let capacity = l.rec.reserve(want);
    let limit = (l.rec.max_events / 16).clamp(CHUNK_EVENTS, MAX_CHUNK_EVENTS);
    l.next_chunk = want.saturating_mul(2).min(limit);
    if capacity == 0 {
        l.chunk = None;
        l.buf.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let chunk = Arc::new(Chunk::new(capacity));
    // A fresh chunk with capacity >= 1 always takes the event.
    let _ = chunk.push(event);
    l.buf.chunks.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::clone(&chunk));
    l.chunk = Some(chunk);
}

/// Remembers an open `tracing` span (in this thread's table).
pub(crate) fn open_span(id: u64, span: OpenSpan) {
    with_local(|l| {
        l.buf.open.lock().unwrap_or_else(PoisonError::into_inner).insert(id, span);
    });
}

/// Runs `f` on open span `id`, looking in this thread's table first and then
/// in the other threads' (a span may be used on another thread than the
/// one that created it). Returns `None` if the span is not known.
pub(crate) fn with_open_span<R>(id: u64, f: impl FnOnce(&mut OpenMap) -> R) -> Option<R> {
    with_local(|l| {
        let mut f = Some(f);
        let mut run = |buf: &ThreadBuf| {
            let mut open = buf.open.lock().unwrap_or_else(PoisonError::into_inner);
            if open.contains_key(&id) {
                f.take().map(|f| f(&mut open))
            } else {
                None
            }
        };
        if let Some(r) = run(&l.buf) {
            return Some(r);
        }
        let others = l.rec.threads();
        others.iter().filter(|b| !Arc::ptr_eq(b, &l.buf)).find_map(|b| run(b))
    })
    .flatten()
}

/// Closes open span `id` (wherever it was opened) and records it as a
/// complete event ending at `end`, with `make` building the event.
pub(crate) fn close_span(id: u64, make: impl FnOnce(OpenSpan) -> Event) {
    with_local(|l| {
        let take =
            |buf: &ThreadBuf| buf.open.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
        let open = take(&l.buf).or_else(|| {
            l.rec.threads().iter().filter(|b| !Arc::ptr_eq(b, &l.buf)).find_map(|b| take(b))
        });
        if let Some(open) = open {
            store(l, make(open));
        }
    });
}

/// Drops one reference to open span `id` (wherever it was opened); when it
/// was the last, closes the span and records it with `make`, as
/// [`close_span`] does. Returns whether the span closed now.
pub(crate) fn release_span(id: u64, make: impl FnOnce(OpenSpan) -> Event) -> bool {
    with_local(|l| {
        let release = |buf: &ThreadBuf| {
            let mut open = buf.open.lock().unwrap_or_else(PoisonError::into_inner);
            let span = open.get_mut(&id)?;
            span.refs = span.refs.saturating_sub(1);
            Some(if span.refs == 0 { open.remove(&id) } else { None })
        };
        let found = release(&l.buf).or_else(|| {
            l.rec.threads().iter().filter(|b| !Arc::ptr_eq(b, &l.buf)).find_map(|b| release(b))
        });
        match found {
            Some(Some(open)) => {
                store(l, make(open));
                true
            }
            _ => false,
        }
    })
    .unwrap_or(false)
}

/// Renames the calling thread in the active session's trace.
pub(crate) fn set_thread_name(name: &str) {
    with_local(|l| *l.buf.name.lock().unwrap_or_else(PoisonError::into_inner) = name.to_string());
}

/// The active recorder, if any (for `step()` without a session handle).
pub(crate) fn current() -> Option<Arc<Recorder>> {
    CURRENT.lock().unwrap_or_else(PoisonError::into_inner).clone()
}
