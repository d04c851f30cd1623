//! `tracing` data to trace events, shared by the Layer and the Subscriber:
//! a span's or a record's fields as open JSON object text (`{"k":v,...`),
//! and an event (`info!` …) as an instant named by its message.
//!
//! Field values are written with the `json_text` helpers and cut at
//! `json_text::MAX_ARGS_BYTES`. This module owns only the translation of
//! `tracing` values; it never keeps spans (the recorder's `open` tables and
//! the Subscriber's slab do) and knows nothing of the Layer or Subscriber
//! protocols.

use crate::clock;
use crate::json_text::{push_i64, push_json_str, push_u64, MAX_ARGS_BYTES};
use crate::recorder::{self, strings, Kind};
use std::fmt::{self, Write as _};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Record};

/// Collects fields as the inside of a JSON object (`"k":v,...`).
struct Fields<'a> {
    out: &'a mut String,
    message: Option<&'a mut String>,
}

impl Fields<'_> {
    /// Starts a field; returns where it began, for [`Fields::end`].
    fn key(&mut self, field: &Field) -> usize {
        let mark = self.out.len();
        if self.out.len() > 1 {
            self.out.push(',');
        }
        push_json_str(self.out, field.name());
        self.out.push(':');
        mark
    }

    /// Ends a field, taking it back out if it made the args too long.
    fn end(&mut self, mark: usize) {
        if self.out.len() > MAX_ARGS_BYTES {
            self.out.truncate(mark);
        }
    }
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            if let Some(m) = self.message.as_deref_mut() {
                let _ = write!(m, "{value:?}");
                return;
            }
        }
        let m = self.key(field);
        push_json_str(self.out, &format!("{value:?}"));
        self.end(m);
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            if let Some(m) = self.message.as_deref_mut() {
                m.push_str(value);
                return;
            }
        }
        let m = self.key(field);
        push_json_str(self.out, value);
        self.end(m);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        let m = self.key(field);
        push_i64(self.out, value);
        self.end(m);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        let m = self.key(field);
        push_u64(self.out, value);
        self.end(m);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        let m = self.key(field);
        if value.is_finite() {
            let _ = write!(self.out, "{value}");
        } else {
            push_json_str(self.out, &value.to_string());
        }
        self.end(m);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        let m = self.key(field);
        self.out.push_str(if value { "true" } else { "false" });
        self.end(m);
    }
}

/// A new span's fields as an open object text (`{"k":v,...`), in a pooled
/// buffer; empty when it has none.
pub(crate) fn format_fields(attrs: &Attributes<'_>) -> String {
    let mut args = strings::take();
    if !attrs.fields().is_empty() {
        args.push('{');
        attrs.record(&mut Fields { out: &mut args, message: None });
    }
    args
}

/// A record's fields (`span.record(…)`) as an open object text
/// (`{"k":v,...`), or `None` when it has none. Formatted before any span
/// table is locked: a `Debug` impl may use `tracing`.
pub(crate) fn format_record(values: &Record<'_>) -> Option<String> {
    let mut more = String::from("{");
    values.record(&mut Fields { out: &mut more, message: None });
    (more.len() > 1).then_some(more)
}

/// Records a `tracing` event as an instant named by its message (for the
/// Layer and the Subscriber).
pub(crate) fn record_event(event: &tracing::Event<'_>) {
    if !recorder::is_recording() {
        return;
    }
    let meta = event.metadata();
    let ts = clock::now();
    let mut args = strings::take();
    args.push('{');
    let mut message = strings::take();
    event.record(&mut Fields { out: &mut args, message: Some(&mut message) });
    if args.len() > 1 {
        args.push('}');
    } else {
        args.clear();
    }
    recorder::record(meta.name(), meta.target(), Kind::Instant, ts, 0, &message, args.as_bytes());
    strings::give(args);
    strings::give(message);
}
