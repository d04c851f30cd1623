//! Open `tracing` spans: created, not closed yet.
//!
//! Each thread keeps the spans it opened in its own table (in its
//! `ThreadBuf`), locked only by that thread except when a span is used or
//! closed on another thread, which then looks in the other threads' tables.
//! The lock is a [`TableLock`]: nearly always uncontended, so it is built
//! for that case (one atomic instruction to take it, a plain store to give
//! it back, where `std`'s mutex needs two atomic instructions).
//! A closed span becomes one complete event; its args buffer goes back to
//! the closing thread's pool. This module owns the tables; it never formats
//! `tracing` fields (the producers hand it args text) and knows nothing of
//! the Layer or Subscriber that fill it.

use super::{strings, with_local, Kind, ThreadBuf, GEN};
use crate::clock;
use crate::json_text::{merge_args, push_json_str};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A `tracing` span that is open (created, not yet closed).
pub(crate) struct OpenSpan {
    pub start: u64,
    /// The span's metadata: name, target (the category), level.
    pub meta: &'static tracing::Metadata<'static>,
    /// Open JSON object text (`{"k":v,...` without the `}`), or empty.
    pub args: String,
    /// Names of the spans this one follows from (`follows_from`).
    pub follows: Vec<&'static str>,
    /// The session it opened in; it is recorded only if that one is still
    /// active when it closes.
    session: u64,
}

impl OpenSpan {
    /// A span opened now with `args` (an open object text, or empty).
    pub(crate) fn new(meta: &'static tracing::Metadata<'static>, args: String) -> OpenSpan {
        let session = GEN.load(Ordering::Relaxed);
        OpenSpan { start: clock::now(), meta, args, follows: Vec::new(), session }
    }

    /// Records the span as a complete event ending now (if its session is
    /// still the active one).
    pub(crate) fn close(self) {
        let end = clock::now();
        let mut args = self.args;
        if self.session != GEN.load(Ordering::Relaxed) {
            strings::give(args);
            return;
        }
        if !self.follows.is_empty() {
            let mut more = String::from("{\"follows_from\":[");
            for (i, name) in self.follows.iter().enumerate() {
                if i > 0 {
                    more.push(',');
                }
                push_json_str(&mut more, name);
            }
            more.push(']');
            merge_args(&mut args, &more);
        }
        if args.len() > 1 {
            args.push('}');
        } else {
            args.clear();
        }
        super::record(
            self.meta.name(),
            self.meta.target(),
            Kind::Complete,
            self.start,
            end.saturating_sub(self.start),
            "",
            args.as_bytes(),
        );
        strings::give(args);
    }
}

/// One thread's open spans by id.
pub(crate) type OpenMap = ranktune_core::hash::FastMap<u64, OpenSpan>;

/// A lock for one thread's table: almost always taken by the thread that
/// owns it and free, so taking it is one compare-and-swap and giving it
/// back one release store. A waiter spins briefly, then yields.
pub(crate) struct TableLock {
    locked: AtomicBool,
    map: UnsafeCell<OpenMap>,
}

// SAFETY: `map` is only reached through a `TableGuard`, and at most one
// guard exists at a time (`locked` is taken with acquire ordering and given
// back with release). `OpenMap` is `Send`.
unsafe impl Sync for TableLock {}

impl TableLock {
    pub(crate) fn new() -> TableLock {
        TableLock { locked: AtomicBool::new(false), map: UnsafeCell::new(OpenMap::default()) }
    }

    pub(crate) fn lock(&self) -> TableGuard<'_> {
        let mut spins = 0_u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        TableGuard { lock: self }
    }
}

/// Access to a locked table; unlocks on drop (also when unwinding).
pub(crate) struct TableGuard<'a> {
    lock: &'a TableLock,
}

impl std::ops::Deref for TableGuard<'_> {
    type Target = OpenMap;
    fn deref(&self) -> &OpenMap {
        // SAFETY: this guard holds the lock.
        unsafe { &*self.lock.map.get() }
    }
}

impl std::ops::DerefMut for TableGuard<'_> {
    fn deref_mut(&mut self) -> &mut OpenMap {
        // SAFETY: this guard holds the lock, and `&mut self` is unique.
        unsafe { &mut *self.lock.map.get() }
    }
}

impl Drop for TableGuard<'_> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

/// Remembers an open span (in this thread's table).
pub(crate) fn open(id: u64, span: OpenSpan) {
    with_local(|l| {
        l.buf.open.lock().insert(id, span);
    });
}

/// Runs `f` on this thread's table, then on the other threads' tables, until
/// one returns `Some`. `f` must not record events (the thread's state is
/// borrowed meanwhile).
fn find<R>(mut f: impl FnMut(&mut OpenMap) -> Option<R>) -> Option<R> {
    with_local(|l| {
        let mut look = |buf: &ThreadBuf| f(&mut buf.open.lock());
        look(&l.buf).or_else(|| {
            l.rec.threads().iter().filter(|b| !Arc::ptr_eq(b, &l.buf)).find_map(|b| look(b))
        })
    })
    .flatten()
}

/// Runs `f` on open span `id` wherever it was opened; `None` if unknown.
pub(crate) fn with_open<R>(id: u64, f: impl FnOnce(&mut OpenSpan) -> R) -> Option<R> {
    let mut f = Some(f);
    find(|open| open.get_mut(&id).and_then(|span| f.take().map(|f| f(span))))
}

/// Removes open span `id` (wherever it was opened) and returns it, for the
/// caller to [`OpenSpan::close`].
pub(crate) fn take(id: u64) -> Option<OpenSpan> {
    find(|open| open.remove(&id))
}
