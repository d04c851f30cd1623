//! The native recording API: spans, instants, counters, thread names.
//!
//! Every function here is a no-op costing one atomic load when no session is
//! active, and records into the calling thread's buffer otherwise (see
//! `recorder`). Names and categories are `&'static str` so that recording
//! allocates nothing; args are optional and allocate only when given.

use super::clock;
use super::recorder::{self, Event, Name, Payload};
use std::fmt::Write as _;

/// Records a complete (`ph: X`) event from its creation to its drop.
///
/// ```
/// let _s = ranktune::trace::span("gemm", "kernel").with_arg("m", 128);
/// // … work …
/// ```
#[must_use = "the span ends when the guard is dropped"]
pub struct SpanGuard {
    name: &'static str,
    cat: &'static str,
    /// Start time, or `u64::MAX` when not recording.
    start: u64,
    args: Option<String>,
}

/// Starts a span named `name` in category `cat`; it is recorded when the
/// returned guard drops, if a session was recording when it started.
#[inline]
pub fn span(name: &'static str, cat: &'static str) -> SpanGuard {
    let start = if recorder::is_recording() { clock::now() } else { u64::MAX };
    SpanGuard { name, cat, start, args: None }
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
                let mut s = String::with_capacity(64);
                s.push('{');
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
        recorder::push(Event {
            name: Name::Static(self.name),
            cat: self.cat,
            ts: self.start,
            payload: Payload::Complete { dur: end.saturating_sub(self.start) },
            args: self.args.take().map(close_object),
        });
    }
}

/// Appends `"key":value,` to an open JSON object text.
pub(crate) fn push_field(args: &mut String, key: &str, value: &impl serde::Serialize) {
    let mark = args.len();
    push_field_unbounded(args, key, value);
    if args.len() > super::layer::MAX_ARGS_BYTES {
        args.truncate(mark);
    }
}

fn push_field_unbounded(args: &mut String, key: &str, value: &impl serde::Serialize) {
    if args.len() > 1 {
        args.push(',');
    }
    push_json_str(args, key);
    args.push(':');
    match serde_json::to_string(value) {
        Ok(v) => args.push_str(&v),
        Err(e) => push_json_str(args, &format!("<unserializable: {e}>")),
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

/// Appends the decimal digits of `v` (without the `fmt` machinery: this is
/// on the path of every `tracing` span with an integer field).
pub(crate) fn push_u64(out: &mut String, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[at..]).unwrap_or_default());
}

/// Appends the decimal digits of `v`, with a `-` when negative.
pub(crate) fn push_i64(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    push_u64(out, v.unsigned_abs());
}

/// Closes an open JSON object text made with [`push_field`].
pub(crate) fn close_object(mut args: String) -> String {
    args.push('}');
    args
}

/// Records an instant (`ph: i`, thread scope) event now.
pub fn instant(name: &'static str, cat: &'static str) {
    if recorder::is_recording() {
        recorder::push(Event {
            name: Name::Static(name),
            cat,
            ts: clock::now(),
            payload: Payload::Instant,
            args: None,
        });
    }
}

/// Records a counter (`ph: C`) sample now: series `value` of track `name`.
pub fn counter(name: &'static str, value: f64) {
    if recorder::is_recording() {
        recorder::push(Event {
            name: Name::Static(name),
            cat: "counter",
            ts: clock::now(),
            payload: Payload::Counter(value),
            args: None,
        });
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
        let mut s = String::from("{");
        push_field(&mut s, "a\"b", &"x\ny\u{1}");
        push_field(&mut s, "n", &3);
        let v: serde_json::Value = serde_json::from_str(&close_object(s)).unwrap();
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
        let mut s = String::from("{");
        push_field(&mut s, "small", &1);
        push_field(&mut s, "huge", &"x".repeat(5000));
        push_field(&mut s, "after", &2);
        let v: serde_json::Value = serde_json::from_str(&close_object(s)).unwrap();
        assert_eq!(v, serde_json::json!({"small": 1, "after": 2}));
    }

    #[test]
    fn inactive_span_records_nothing_and_formats_nothing() {
        // Library unit tests never start a session.
        let g = span("x", "y").with_arg("k", 1);
        assert!(!g.is_recording());
        assert!(g.args.is_none());
    }
}
