//! The native recording API: spans, instants, counters, thread names.
//!
//! Every function here is a no-op costing one atomic load when no session is
//! active, and records into the calling thread's buffer otherwise (see
//! `recorder`). Names and categories are `&'static str` so that recording
//! allocates nothing; args are optional, serialized straight into a reused
//! per-thread buffer (no allocation once the thread has one).

use super::clock;
use super::recorder::{self, strings, Kind};
use std::fmt::Write as _;
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

/// Appends `"key":value` (after a comma unless it is the first field) to
/// open JSON object bytes, serialized in place; a field that would pass
/// [`super::layer::MAX_ARGS_BYTES`] is left out.
pub(crate) fn push_field(args: &mut Vec<u8>, key: &str, value: &impl serde::Serialize) {
    let mark = args.len();
    if args.len() > 1 {
        args.push(b',');
    }
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *args, key);
    args.push(b':');
    let value_at = args.len();
    if let Err(e) = serde_json::to_writer(&mut *args, value) {
        args.truncate(value_at);
        let _ = serde_json::to_writer(&mut *args, &format!("<unserializable: {e}>"));
    }
    if args.len() > super::layer::MAX_ARGS_BYTES {
        args.truncate(mark);
    }
}

/// Appends `s` as a JSON string literal.
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        // Nothing to escape (the usual field name or value): one copy.
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends the decimal digits of `v` (with `itoa`, not the `fmt`
/// machinery: this is on the path of every `tracing` span with an integer
/// field and of every number in an exported trace).
pub(crate) fn push_u64(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// Appends the decimal digits of `v`, with a `-` when negative.
pub(crate) fn push_i64(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    push_u64(out, v.unsigned_abs());
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
    fn json_text_helpers_escape() {
        let mut s = b"{".to_vec();
        push_field(&mut s, "a\"b", &"x\ny\u{1}");
        push_field(&mut s, "n", &3);
        s.push(b'}');
        let v: serde_json::Value = serde_json::from_slice(&s).unwrap();
        assert_eq!(v["a\"b"], "x\ny\u{1}");
        assert_eq!(v["n"], 3);
    }

    #[test]
    fn integers_are_written_in_decimal() {
        for v in [0, 1, 9, 10, 42, 1_000_000, i64::MAX, i64::MIN, -1, -10] {
            let mut s = String::new();
            push_i64(&mut s, v);
            assert_eq!(s, v.to_string());
        }
        let mut s = String::new();
        push_u64(&mut s, u64::MAX);
        assert_eq!(s, u64::MAX.to_string());
    }

    #[test]
    fn oversized_args_are_left_out_and_the_rest_stays_valid() {
        let mut s = b"{".to_vec();
        push_field(&mut s, "small", &1);
        push_field(&mut s, "huge", &"x".repeat(5000));
        push_field(&mut s, "after", &2);
        let bad: std::collections::HashMap<Vec<u8>, u8> = [(vec![1], 2)].into();
        push_field(&mut s, "bad", &bad);
        s.push(b'}');
        let v: serde_json::Value = serde_json::from_slice(&s).unwrap();
        assert_eq!(v["small"], 1);
        assert_eq!(v["after"], 2);
        assert!(v.get("huge").is_none());
        assert!(v["bad"].as_str().unwrap().starts_with("<unserializable"), "{v}");
    }

    #[test]
    fn inactive_span_records_nothing_and_formats_nothing() {
        // Library unit tests never start a session.
        let g = span("x", "y").with_arg("k", 1);
        assert!(!g.is_recording());
        assert!(g.args.is_none());
    }
}
