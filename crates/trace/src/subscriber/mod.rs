//! A lean `tracing` Subscriber that records into the trace recorder without
//! a `tracing_subscriber::Registry`.
//!
//! The Registry gives layers a shared span store (a sharded slab, span
//! extensions, parent look-ups); on the bench machine it alone costs more per
//! span than recording does. A program that only wants its `tracing` spans in
//! the trace can install this Subscriber instead: span ids come from a
//! span's slot (see `slab`: the id is the slot, so no table look-up and at
//! most one atomic read-modify-write per call), entered spans in a
//! per-thread stack. It records exactly what [`super::TraceLayer`] records. It does no
//! formatting or log output of its own: use the Registry + Layer when the
//! program also logs through `tracing-subscriber`'s fmt layer.
//!
//! Spans created while no session records (no session, or outside the
//! iteration window) get an *untracked* id (high bit set) and cost an id and
//! one check; they are never looked up again, and `Span::current()` inside
//! them is none (only recorded spans keep their metadata). This module owns only the
//! `Subscriber` protocol: ids, reference counts, the entered-span stack.

mod slab;

use crate::fields::{format_fields, format_record, record_event};
use crate::json_text::merge_args;
use crate::recorder::{self, OpenSpan};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_core::span::Current;

/// Marks ids of spans that are not recorded (no table entry).
const UNTRACKED: u64 = 1 << 63;
/// Ids a thread takes from the global counter at a time.
const ID_BLOCK: u64 = 1 << 12;

static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's unused ids: `next..end`.
    static IDS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// Ids of the spans this thread has entered, innermost last.
    static STACK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// A fresh span id, unique in the process, never 0 and below [`UNTRACKED`].
fn next_id() -> u64 {
    IDS.try_with(|ids| {
        let (mut next, mut end) = ids.get();
        if next == end {
            next = NEXT_BLOCK.fetch_add(ID_BLOCK, Ordering::Relaxed);
            end = next + ID_BLOCK;
        }
        ids.set((next + 1, end));
        next
    })
    // Thread-local storage already torn down (a span made in a TLS
    // destructor): take a single id from the global counter.
    .unwrap_or_else(|_| NEXT_BLOCK.fetch_add(1, Ordering::Relaxed))
        & !UNTRACKED
}

/// The Subscriber; install it with `tracing::subscriber::set_global_default`
/// or `with_default`. It records only while a [`super::TraceSession`] is
/// active, like the Layer.
///
/// ```
/// let subscriber = ranktune_trace::subscriber().with_max_level(tracing::Level::DEBUG);
/// tracing::subscriber::with_default(subscriber, || {
///     let _s = tracing::info_span!("work", n = 3).entered();
/// });
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TraceSubscriber {
    max_level: LevelFilter,
}

/// The lean Subscriber feeding the active trace session (see
/// [`TraceSubscriber`]); it keeps spans and events of every level until
/// [`TraceSubscriber::with_max_level`] says otherwise.
pub fn subscriber() -> TraceSubscriber {
    TraceSubscriber { max_level: LevelFilter::TRACE }
}

impl TraceSubscriber {
    /// Keeps only spans and events at `level` or more important (also
    /// reported as the max level hint, so `tracing` skips the rest cheaply).
    #[must_use]
    pub fn with_max_level(self, level: impl Into<LevelFilter>) -> TraceSubscriber {
        TraceSubscriber { max_level: level.into() }
    }
}

fn tracked(id: &Id) -> Option<u64> {
    let id = id.into_u64();
    (id & UNTRACKED == 0).then_some(id)
}

impl Subscriber for TraceSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.enabled(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        meta.level() <= &self.max_level
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.max_level)
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        if recorder::is_recording() {
            if let Some(id) = slab::insert(OpenSpan::new(attrs.metadata(), format_fields(attrs))) {
                return Id::from_u64(id);
            }
        }
        Id::from_u64(next_id() | UNTRACKED)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let Some(key) = tracked(span) else { return };
        // Format outside the table's lock (a Debug impl may use tracing).
        let Some(more) = format_record(values) else { return };
        slab::with(key, |span| merge_args(&mut span.args, &more));
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        if let (Some(span), Some(follows)) = (tracked(span), tracked(follows)) {
            if let Some(name) = slab::with(follows, |s| s.meta.name()) {
                slab::with(span, |s| s.follows.push(name));
            }
        }
    }

    fn event(&self, event: &tracing::Event<'_>) {
        record_event(event);
    }

    fn enter(&self, span: &Id) {
        let id = span.into_u64();
        let _ = STACK.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                s.push(id);
            }
        });
    }

    fn exit(&self, span: &Id) {
        let id = span.into_u64();
        let _ = STACK.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                // Usually the innermost; spans may also exit out of order.
                if let Some(at) = s.iter().rposition(|&e| e == id) {
                    s.remove(at);
                }
            }
        });
    }

    fn clone_span(&self, span: &Id) -> Id {
        if let Some(key) = tracked(span) {
            slab::clone(key);
        }
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        // Untracked spans keep no count, so they never report closing.
        match tracked(&span).and_then(slab::release) {
            Some(closed) => {
                closed.close();
                true
            }
            None => false,
        }
    }

    fn current_span(&self) -> Current {
        let top = STACK.try_with(|s| s.try_borrow().ok().and_then(|s| s.last().copied()));
        // Only recorded spans have their metadata at hand; for the others
        // (and spans closed meanwhile) report no current span.
        let known = |id: u64| slab::with(id, |s| s.meta);
        match top
            .ok()
            .flatten()
            .filter(|&id| id & UNTRACKED == 0)
            .and_then(|id| Some((id, known(id)?)))
        {
            Some((id, meta)) => Current::new(Id::from_u64(id), meta),
            None => Current::none(),
        }
    }
}
