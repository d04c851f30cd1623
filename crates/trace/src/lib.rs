//! Per-rank profiling traces: recording (one Chrome trace per rank) and
//! analysis (merging ranks onto one timeline, finding the slow rank).
//!
//! Recording, in one picture:
//!
//! ```text
//! span()/tracing ──▶ per-thread buffer (recorder) ──▶ export: temp file + rename
//!                         ▲ window: step()                 ▲ stop / drop / panic / SIGINT / SIGTERM
//! TraceConfig ─▶ TraceSession::start ─▶ rank_path ─▶ trace_<rank>.json[.gz]
//! ```
//!
//! - [`rank_path`]: where each rank writes (`path`);
//! - [`IterWindow`]: which iterations are kept (`window`);
//! - [`TraceConfig`]: settings, from the API or the environment (`config`);
//! - [`TraceSession`]: the guard that records and writes the file (`session`);
//! - [`span`], [`instant`], [`counter`], [`step`]: the native API (`api`);
//! - [`layer`]: a `tracing` Layer on the same recorder (`layer`);
//! - [`subscriber`]: a lean `tracing` Subscriber on the same recorder, for
//!   programs that want traces without a `Registry` (`subscriber`).
//!
//! The recording side never reads trace files; `analyze` never records.

mod api;
mod clock;
mod config;
mod error;
mod export;
mod hooks;
mod layer;
mod path;
mod recorder;
mod session;
mod subscriber;
mod sys;
mod window;

pub use api::{counter, instant, set_thread_name, span, span_at, step, Site, SpanGuard};
pub use config::{TraceConfig, MAX_EVENTS_VAR, PATH_VARS, SIGNALS_VAR, WINDOW_VARS};
pub use error::TraceError;
pub use layer::{layer, TraceLayer};
pub use path::{prepare, rank_path};
pub use session::TraceSession;
pub use subscriber::{subscriber, TraceSubscriber};
pub use window::IterWindow;
