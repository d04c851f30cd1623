//! A `tracing` Layer that records spans and events into the trace recorder.
//!
//! Spans become complete (`X`) events from creation to close, named after the
//! span, with the span's target as category and its fields (including ones
//! recorded later) as `args`. Open spans are kept in the creating thread's
//! table in the recorder (not in the Registry's extensions, which box every
//! value and take two span look-ups), found from any thread at close; so the
//! Layer works on any subscriber, not only a `Registry`. Events (`info!` …)
//! become instants named by their message. Spans that start while the
//! session is not recording (no session, or outside the iteration window)
//! are not recorded at all and cost one check. This module owns only the
//! Layer protocol (which span goes where, when); formatting fields is
//! `fields`' job and keeping open spans the recorder's.

use crate::fields::{format_fields, format_record, record_event};
use crate::json_text::merge_args;
use crate::recorder::{self, open, OpenSpan};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// The Layer; add it to a subscriber (e.g. `tracing_subscriber::registry()`).
/// It records only while a [`TraceSession`](crate::TraceSession) is active.
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

impl<S: Subscriber> Layer<S> for TraceLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        if !recorder::is_recording() {
            return;
        }
        open::open(id.into_u64(), OpenSpan::new(attrs.metadata(), format_fields(attrs)));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        // Format outside the table's lock (a Debug impl may use tracing).
        let Some(more) = format_record(values) else { return };
        open::with_open(id.into_u64(), |span| merge_args(&mut span.args, &more));
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
