//! The library's warnings on a Python job's standard error: the Rust
//! crates log through `tracing` (the cache's "waiting for lock on …", say),
//! and a Python process has no subscriber, so without this they vanish.
//!
//! Owns only where those lines go: `ranktune: warning: <message>` on
//! stderr, warnings and errors only, installed the first time a binding
//! that can wait or warn runs, and never when something else (the
//! `ranktune` command inside the extension, the program itself) has set a
//! subscriber. It must never call into Python: an event can come from a
//! thread that runs without the GIL while another thread holds it.

use std::fmt::Write as _;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// Installs the stderr layer once, where no subscriber was set.
pub(crate) fn ensure() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if !tracing::dispatcher::has_been_set() {
            let _ = tracing_subscriber::registry().with(Stderr).try_init();
        }
    });
}

/// Writes warnings and errors to stderr, one line each.
struct Stderr;

impl<S: tracing::Subscriber> Layer<S> for Stderr {
    fn enabled(&self, meta: &tracing::Metadata<'_>, _: Context<'_, S>) -> bool {
        *meta.level() <= tracing::Level::WARN
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let word =
            if *event.metadata().level() == tracing::Level::ERROR { "error" } else { "warning" };
        let mut line = Line(String::new());
        event.record(&mut line);
        eprintln!("ranktune: {word}: {}", line.0);
    }
}

/// The event's message, then its other fields as `name=value`.
struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}
