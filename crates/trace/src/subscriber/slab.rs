//! The lean Subscriber's open spans: slots addressed by the span id itself.
//!
//! A recorded span's id is its slot's index plus the slot's generation, so
//! finding a span is an index (no hash map) from any thread (no per-thread
//! table), and the Subscriber's calls cost at most one atomic
//! read-modify-write each: opening a span is a plain release store into a
//! slot this thread took from its own free list, closing it is one
//! compare-and-swap on the slot's state. A stale or forged id fails the
//! generation check (or the bounds check) and is ignored; it can never reach
//! another span's data.
//!
//! A slot's state word holds the generation (bits 32..63), a lock bit
//! (bit 31, held while a thread reads or changes the span's fields) and the
//! number of handles (bits 0..31; 0 means the slot is free). Pages of slots
//! are allocated on first use and kept for the life of the process (their
//! slots are reused), so a slot's address never changes. Free slots are kept
//! per thread and handed back to a global list when a thread has many or
//! exits. This module owns only the slots; it never records events.

use crate::recorder::OpenSpan;
use std::cell::{RefCell, UnsafeCell};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

const GEN_SHIFT: u32 = 32;
const GEN_MASK: u64 = 0x7fff_ffff;
const LOCK: u64 = 1 << 31;
const REFS: u64 = LOCK - 1;

/// Slots in the first page; page `p` has `FIRST << p`.
const FIRST: u64 = 256;
const PAGES: usize = 24;
/// Slots in all pages (about 4.3 billion open spans at once).
const CAPACITY: u64 = FIRST * ((1 << PAGES) - 1);

struct Slot {
    state: AtomicU64,
    span: UnsafeCell<MaybeUninit<OpenSpan>>,
}

// SAFETY: `span` is written only by the thread that took the slot while it
// was free (before publishing it with a release store of `state`), and read
// or changed only by a thread that holds the lock bit or that took the last
// handle (refs 1 → 0 with the lock bit set); both are acquired with a
// compare-and-swap, so accesses never overlap. `OpenSpan` is `Send`.
unsafe impl Sync for Slot {}

static PAGES_: [OnceLock<Box<[Slot]>>; PAGES] = [const { OnceLock::new() }; PAGES];
/// The next never-used slot index.
static FRESH: AtomicU32 = AtomicU32::new(0);
/// Free slots handed back by threads.
static FREE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// A thread's free slots; handed back to [`FREE`] when the thread exits.
struct LocalFree(Vec<u32>);

impl Drop for LocalFree {
    fn drop(&mut self) {
        FREE.lock().unwrap_or_else(PoisonError::into_inner).append(&mut self.0);
    }
}

thread_local! {
    static LOCAL_FREE: RefCell<LocalFree> = const { RefCell::new(LocalFree(Vec::new())) };
}

/// Most free slots a thread keeps; half go back to [`FREE`] past it.
const KEEP_FREE: usize = 1024;
/// Free slots a thread takes from [`FREE`] at a time.
const TAKE_FREE: usize = 64;

/// Page and offset of slot `index`.
fn locate(index: u32) -> (usize, usize) {
    let j = u64::from(index) + FIRST;
    let page = (63 - j.leading_zeros()) as usize - FIRST.trailing_zeros() as usize;
    (page, (j - (FIRST << page)) as usize)
}

/// Slot `index`, if its page exists.
fn slot(index: u32) -> Option<&'static Slot> {
    let (page, offset) = locate(index);
    PAGES_.get(page)?.get()?.get(offset)
}

/// Slot `index`, allocating its page if needed (fresh indices only).
fn slot_or_make(index: u32) -> Option<&'static Slot> {
    let (page, offset) = locate(index);
    let slots = PAGES_.get(page)?.get_or_init(|| {
        (0..FIRST << page)
            .map(|_| Slot {
                state: AtomicU64::new(0),
                span: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect()
    });
    slots.get(offset)
}

/// A free slot index for this thread.
fn alloc() -> Option<u32> {
    let local = LOCAL_FREE
        .try_with(|f| {
            let mut f = f.try_borrow_mut().ok()?;
            if f.0.is_empty() {
                let mut global = FREE.lock().unwrap_or_else(PoisonError::into_inner);
                let at = global.len().saturating_sub(TAKE_FREE);
                f.0.extend(global.drain(at..));
            }
            f.0.pop()
        })
        .ok()
        .flatten();
    if local.is_some() {
        return local;
    }
    let index = FRESH.fetch_add(1, Ordering::Relaxed);
    // Below the capacity, `index + 1` fits an id's low half.
    (u64::from(index) < CAPACITY).then_some(index)
}

/// Gives slot `index` back for reuse.
fn free(index: u32) {
    let kept = LOCAL_FREE.try_with(|f| {
        let Ok(mut f) = f.try_borrow_mut() else { return false };
        f.0.push(index);
        if f.0.len() > KEEP_FREE {
            let half = f.0.len() / 2;
            FREE.lock().unwrap_or_else(PoisonError::into_inner).extend(f.0.drain(..half));
        }
        true
    });
    if kept != Ok(true) {
        FREE.lock().unwrap_or_else(PoisonError::into_inner).push(index);
    }
}

fn make_id(gen: u64, index: u32) -> u64 {
    (gen & GEN_MASK) << GEN_SHIFT | (u64::from(index) + 1)
}

/// `(generation, slot)` of an id made by [`insert`]; `None` for ids that
/// cannot be one.
fn parse(id: u64) -> Option<(u64, &'static Slot)> {
    let low = u32::try_from(id & 0xffff_ffff).ok()?.checked_sub(1)?;
    Some(((id >> GEN_SHIFT) & GEN_MASK, slot(low)?))
}

fn live(state: u64, gen: u64) -> bool {
    (state >> GEN_SHIFT) & GEN_MASK == gen && state & REFS > 0
}

/// Stores a newly opened span with one handle; returns its id (never 0,
/// high bit clear), or `None` when no slot is left.
pub(crate) fn insert(span: OpenSpan) -> Option<u64> {
    let index = alloc()?;
    let slot = slot_or_make(index)?;
    let gen = (slot.state.load(Ordering::Acquire) >> GEN_SHIFT) & GEN_MASK;
    // SAFETY: the slot is free (refs 0) and this thread took its index
    // from a free list or the fresh counter, so no other thread accesses
    // its span; publishing happens below with a release store.
    unsafe { (*slot.span.get()).write(span) };
    slot.state.store(gen << GEN_SHIFT | 1, Ordering::Release);
    Some(make_id(gen, index))
}

/// Runs `f` on live span `id` under its lock; `None` if it is not live.
pub(crate) fn with<R>(id: u64, f: impl FnOnce(&mut OpenSpan) -> R) -> Option<R> {
    let (gen, slot) = parse(id)?;
    let mut s = slot.state.load(Ordering::Acquire);
    loop {
        if !live(s, gen) {
            return None;
        }
        if s & LOCK != 0 {
            std::hint::spin_loop();
            s = slot.state.load(Ordering::Acquire);
            continue;
        }
        match slot.state.compare_exchange_weak(s, s | LOCK, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => break,
            Err(now) => s = now,
        }
    }
    // SAFETY: the lock bit is ours and the span is live (initialized).
    let r = f(unsafe { (*slot.span.get()).assume_init_mut() });
    slot.state.fetch_and(!LOCK, Ordering::Release);
    Some(r)
}

/// Adds a handle to live span `id`.
pub(crate) fn clone(id: u64) {
    let Some((gen, slot)) = parse(id) else { return };
    let mut s = slot.state.load(Ordering::Relaxed);
    // At the most handles, the span just stays open.
    while live(s, gen) && s & REFS < REFS {
        match slot.state.compare_exchange_weak(s, s + 1, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => s = now,
        }
    }
}

/// Drops a handle to live span `id`; returns the span when that was the
/// last one (its slot is free again).
pub(crate) fn release(id: u64) -> Option<OpenSpan> {
    let (gen, slot) = parse(id)?;
    let mut s = slot.state.load(Ordering::Acquire);
    loop {
        if !live(s, gen) {
            return None;
        }
        let last = s & REFS == 1;
        if last && s & LOCK != 0 {
            std::hint::spin_loop();
            s = slot.state.load(Ordering::Acquire);
            continue;
        }
        // The last handle takes the lock bit with refs 0: the slot reads as
        // dead to everyone else while the span is moved out.
        let next = if last { gen << GEN_SHIFT | LOCK } else { s - 1 };
        match slot.state.compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) if last => break,
            Ok(_) => return None,
            Err(now) => s = now,
        }
    }
    // SAFETY: the last handle is gone and the lock bit is ours: no other
    // thread reads the span, which is initialized; it is moved out once.
    let span = unsafe { (*slot.span.get()).assume_init_read() };
    slot.state.store(((gen + 1) & GEN_MASK) << GEN_SHIFT, Ordering::Release);
    if let Some(index) = u32::try_from(id & 0xffff_ffff).ok().and_then(|i| i.checked_sub(1)) {
        free(index);
    }
    Some(span)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> &'static tracing::Metadata<'static> {
        struct Cs;
        impl tracing::callsite::Callsite for Cs {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &tracing::Metadata<'_> {
                &META
            }
        }
        static CS: Cs = Cs;
        static META: tracing::Metadata<'static> = tracing::metadata! {
            name: "slab-test",
            target: "slab",
            level: tracing::Level::INFO,
            fields: &[],
            callsite: &CS,
            kind: tracing::metadata::Kind::SPAN,
        };
        &META
    }

    #[test]
    fn pages_cover_consecutive_indices() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(255), (0, 255));
        assert_eq!(locate(256), (1, 0));
        assert_eq!(locate(767), (1, 511));
        assert_eq!(locate(768), (2, 0));
        assert_eq!(locate((CAPACITY - 1) as u32), (PAGES - 1, (FIRST << (PAGES - 1)) as usize - 1));
        assert!(CAPACITY < u64::from(u32::MAX));
    }

    #[test]
    fn ids_find_their_span_until_the_last_handle_goes() {
        let id = insert(OpenSpan::new(meta(), "{\"a\":1".into())).unwrap();
        assert_ne!(id, 0);
        clone(id);
        assert_eq!(with(id, |s| s.args.clone()).as_deref(), Some("{\"a\":1"));
        assert!(release(id).is_none(), "one handle left");
        let span = release(id).expect("last handle");
        assert_eq!(span.args, "{\"a\":1");
        assert!(with(id, |_| ()).is_none(), "stale id");
        assert!(release(id).is_none());
        // The slot is reused under a new generation; the old id stays dead.
        let again = insert(OpenSpan::new(meta(), String::new())).unwrap();
        assert_ne!(again, id);
        assert!(with(id, |_| ()).is_none());
        assert!(release(again).is_some());
    }

    #[test]
    fn forged_ids_are_ignored() {
        for id in [0, 1 << 40, u64::MAX >> 1, 0xffff_ffff, 12345] {
            assert!(with(id, |_| ()).is_none());
            clone(id);
            assert!(release(id).is_none());
        }
    }

    #[test]
    fn handles_dropped_on_many_threads_close_each_span_once() {
        let ids: Vec<u64> = (0..200)
            .map(|i| {
                let id = insert(OpenSpan::new(meta(), format!("{{\"i\":{i}"))).unwrap();
                for _ in 0..3 {
                    clone(id);
                }
                id
            })
            .collect();
        let closed = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for &id in &ids {
                        with(id, |span| span.follows.push("x"));
                        if release(id).is_some() {
                            closed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(closed.load(Ordering::Relaxed), 200);
    }
}
