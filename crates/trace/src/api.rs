//! The native recording API: spans, instants, counters, thread names.
//!
//! Every function here is a no-op costing one atomic load when no session is
//! active, and records into the calling thread's buffer otherwise (see
//! `recorder`). Names and categories are `&'static str` so that recording
//! allocates nothing; args are optional, serialized straight into a reused
//! per-thread buffer (no allocation once the thread has one).
//!
//! This module owns only the user-facing calls; the JSON text is
//! `json_text`'s and the buffers are the recorder's. It never touches a
//! session or a file.

use crate::clock;
use crate::json_text::push_field;
use crate::recorder::{self, strings, Kind};
use std::sync::atomic::{AtomicU32, Ordering};

/// Records a complete (`ph: X`) event from its creation to its drop.
///
/// ```
/// let _s = ranktune_trace::span("gemm", "kernel").with_arg("m", 128);
/// // … work …
/// ```
#[must_use = "the span ends when the guard is dropped"]
pub struct SpanGuard {
    /// The interned `(name, category)`.
    site: u32,
    /// Start time, or `u64::MAX` when not recording.
    start: u64,
    /// Open JSON object bytes (`{"k":v,...`), from the thread's pool.
    args: Option<Vec<u8>>,
}

/// Starts a span named `name` in category `cat`; it is recorded when the
/// returned guard drops, if a session was recording when it started.
///
/// The name and category are looked up in a small per-thread cache at each
/// call; [`trace_span!`](crate::trace_span) remembers them per call site
/// instead (fewer instructions; in time the two are within noise).
#[inline]
pub fn span(name: &'static str, cat: &'static str) -> SpanGuard {
    if !recorder::is_recording() {
        return SpanGuard { site: 0, start: u64::MAX, args: None };
    }
    let site = recorder::site_id(name, cat);
    SpanGuard { site, start: clock::now(), args: None }
}

/// A span call site: a name and category interned once, on first use (made
/// by [`trace_span!`](crate::trace_span)).
#[derive(Debug)]
pub struct Site {
    name: &'static str,
    cat: &'static str,
    /// The interned id, or `u32::MAX` before the first use.
    id: AtomicU32,
}

impl Site {
    /// A call site named `name` in category `cat`.
    pub const fn new(name: &'static str, cat: &'static str) -> Site {
        Site { name, cat, id: AtomicU32::new(u32::MAX) }
    }

    #[inline]
    fn id(&self) -> u32 {
        match self.id.load(Ordering::Relaxed) {
            u32::MAX => self.intern(),
            id => id,
        }
    }

    #[cold]
    fn intern(&self) -> u32 {
        let id = recorder::site_id(self.name, self.cat);
        self.id.store(id, Ordering::Relaxed);
        id
    }
}

/// Starts a span at call site `site` (see [`trace_span!`](crate::trace_span),
/// which makes the site).
#[inline]
pub fn span_at(site: &'static Site) -> SpanGuard {
    if !recorder::is_recording() {
        return SpanGuard { site: 0, start: u64::MAX, args: None };
    }
    SpanGuard { site: site.id(), start: clock::now(), args: None }
}

/// Starts a span like [`trace::span`](crate::span), with its name and
/// category interned once per call site (a `static` the macro declares), so
/// the span skips the per-call look-up.
///
/// ```
/// let _s = ranktune_trace::trace_span!("gemm", "kernel").with_arg("m", 128);
/// // … work …
/// ```
#[macro_export]
macro_rules! trace_span {
    ($name:expr, $cat:expr $(,)?) => {{
        static SITE: $crate::Site = $crate::Site::new($name, $cat);
        $crate::span_at(&SITE)
    }};
}

impl SpanGuard {
    /// Whether this span will be recorded.
    pub fn is_recording(&self) -> bool {
        self.start != u64::MAX
    }

    /// Adds an argument shown with the event (`args.key`). Does nothing
    /// (and formats nothing) when the span is not recording.
    pub fn with_arg(mut self, key: &str, value: impl serde::Serialize) -> SpanGuard {
        if self.is_recording() {
            let args = self.args.get_or_insert_with(|| {
                let mut s = strings::take().into_bytes();
                s.push(b'{');
                s
            });
            push_field(args, key, &value);
        }
        self
    }
}

impl Drop for SpanGuard {
    #[inline]
    fn drop(&mut self) {
        if self.start == u64::MAX {
            return;
        }
        let end = clock::now();
        let dur = end.saturating_sub(self.start);
        match self.args.take() {
            None => recorder::record_at(self.site, Kind::Complete, self.start, dur, "", b""),
            Some(mut args) => {
                args.push(b'}');
                recorder::record_at(self.site, Kind::Complete, self.start, dur, "", &args);
                args.clear();
                strings::give(String::from_utf8(args).unwrap_or_default());
            }
        }
    }
}

/// Records an instant (`ph: i`, thread scope) event now.
pub fn instant(name: &'static str, cat: &'static str) {
    if recorder::is_recording() {
        recorder::record(name, cat, Kind::Instant, clock::now(), 0, "", b"");
    }
}

/// Records a counter (`ph: C`) sample now: series `value` of track `name`.
pub fn counter(name: &'static str, value: f64) {
    if recorder::is_recording() {
        recorder::record(name, "counter", Kind::Counter, clock::now(), value.to_bits(), "", b"");
    }
}

/// Names the calling thread in the trace (`thread_name` metadata). Threads
/// are otherwise named after `std::thread::current().name()`.
pub fn set_thread_name(name: &str) {
    recorder::set_thread_name(name);
}

/// Ends the current iteration of the active session and starts the next
/// (see [`super::TraceSession::step`]). Does nothing without a session.
pub fn step() {
    if let Some(rec) = recorder::current() {
        rec.step();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inactive_span_records_nothing_and_formats_nothing() {
        // Library unit tests never start a session.
        let g = span("x", "y").with_arg("k", 1);
        assert!(!g.is_recording());
        assert!(g.args.is_none());
    }
}
