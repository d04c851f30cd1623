//! A `tracing` Layer that records spans and events into the trace recorder.
//!
//! Spans become complete (`X`) events from creation to close, named after the
//! span, with the span's target as category and its fields (including ones
//! recorded later) as `args`. Open spans are kept in the creating thread's
//! table in the recorder (not in the Registry's extensions, which box every
//! value and take two span look-ups), found from any thread at close; so the
//! Layer works on any subscriber, not only a `Registry`. Events (`info!` …) become instants named by
//! their message. Spans that start while the session is not recording (no
//! session, or outside the iteration window) are not recorded at all and
//! cost one check. This module owns only the translation from `tracing`.

use super::api::{push_i64, push_json_str, push_u64};
use super::clock;
use super::recorder::{self, open, strings, Kind, OpenSpan};
use std::fmt::{self, Write as _};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// The Layer; add it to a subscriber (e.g. `tracing_subscriber::registry()`).
/// It records only while a [`super::TraceSession`] is active.
///
/// ```
/// use tracing_subscriber::layer::SubscriberExt;
/// let subscriber = tracing_subscriber::registry().with(ranktune_trace::layer());
/// # drop(subscriber);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceLayer {
    _private: (),
}

/// The Layer that feeds the active trace session (see [`TraceLayer`]).
pub fn layer() -> TraceLayer {
    TraceLayer { _private: () }
}

/// Collects fields as the inside of a JSON object (`"k":v,...`).
pub(crate) struct Fields<'a> {
    pub(crate) out: &'a mut String,
    pub(crate) message: Option<&'a mut String>,
}

/// Most bytes of args kept per event; fields past it are left out, so one
/// huge `Debug` value cannot defeat the buffer bound.
pub(crate) const MAX_ARGS_BYTES: usize = 1024;

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

/// Appends the fields of `more` (an open object text `{"k":v,...`) to the
/// open object text `args`, unless that would exceed [`MAX_ARGS_BYTES`].
pub(crate) fn merge_args(args: &mut String, more: &str) {
    let Some(fields) = more.strip_prefix('{').filter(|f| !f.is_empty()) else {
        return;
    };
    if args.is_empty() {
        args.push('{');
    }
    let comma = usize::from(args.len() > 1);
    if args.len() + comma + fields.len() <= MAX_ARGS_BYTES {
        if comma == 1 {
            args.push(',');
        }
        args.push_str(fields);
    }
}

/// Records a `tracing` event as an instant named by its message (the Layer
/// and [`super::subscriber`] share this).
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

impl<S: Subscriber> Layer<S> for TraceLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        if !recorder::is_recording() {
            return;
        }
        open::open(id.into_u64(), OpenSpan::new(attrs.metadata(), format_fields(attrs)));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        // Format outside the table's lock (a Debug impl may use tracing).
        let mut more = String::from("{");
        values.record(&mut Fields { out: &mut more, message: None });
        if more.len() <= 1 {
            return;
        }
        let key = id.into_u64();
        open::with_open(key, |span| merge_args(&mut span.args, &more));
    }

    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        record_event(event);
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        if let Some(span) = open::take(id.into_u64()) {
            span.close();
        }
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, _ctx: Context<'_, S>) {
        follows_from(span.into_u64(), follows.into_u64());
    }
}

/// Notes on open span `span` that it follows from span `follows` (recorded
/// as `args.follows_from`, a list of span names), if both are known.
pub(crate) fn follows_from(span: u64, follows: u64) {
    let Some(name) = open::with_open(follows, |s| s.meta.name()) else {
        return;
    };
    open::with_open(span, |s| s.follows.push(name));
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
