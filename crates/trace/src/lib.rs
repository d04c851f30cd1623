//! Per-rank profiling traces, the recording side: one Chrome trace file per
//! rank, written atomically on stop, on drop, on panic and on SIGINT/SIGTERM.
//!
//! ```
//! use ranktune_core::rank::RankInfo;
//! use ranktune_trace::{span, TraceConfig, TraceSession};
//!
//! let dir = tempfile::tempdir()?;
//! let mut cfg = TraceConfig::new(dir.path().join("trace.json"));
//! cfg.handle_signals = false; // this program handles no signals itself
//! let session = TraceSession::start(cfg, &RankInfo::SINGLE)?;
//! {
//!     let _s = span("load", "io").with_arg("bytes", 4096);
//!     let _t = ranktune_trace::trace_span!("decode", "cpu");
//! }
//! let path = session.stop()?; // this rank's file: trace_0.json
//! assert_eq!(path, dir.path().join("trace_0.json"));
//! assert!(path.exists());
//! let text = std::fs::read_to_string(&path)?;
//! assert!(text.contains(r#""name":"load""#) && text.contains(r#""name":"decode""#));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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
//! - [`span`], [`instant`], [`counter`], [`step`], [`trace_span!`]: the
//!   native API (`api`);
//! - [`layer`]: a `tracing` Layer on the same recorder (`layer`);
//! - [`subscriber`]: a lean `tracing` Subscriber on the same recorder, for
//!   programs that want traces without a `Registry` (`subscriber`).
//!
//! Modules depend one way only, top to bottom (an arrow is "uses"):
//!
//! ```text
//! session ─▶ hooks ─▶ active ─▶ export ─▶ recorder ─▶ json_text, clock, window, sys
//! api ──────────────────────────────────▶ recorder
//! layer, subscriber ─▶ fields ──────────▶ recorder
//! ```
//!
//! Shortcuts downwards are allowed (`session` also uses `active`, `export`,
//! `recorder`, `config`, `path`, and `layer` to hand out a [`TraceLayer`];
//! the producers and `export` also use `json_text`). Nothing calls up: the
//! recorder knows nothing of the API, the Layer, the Subscriber or the
//! session, and `json_text` knows nothing of any other module.
//!
//! The recording side never reads trace files; reading, merging and
//! summarizing them is the `ranktune-trace-analyze` crate's job.

mod active;
mod adopt;
mod api;
mod clock;
mod config;
mod error;
mod export;
mod fields;
mod hooks;
mod json_text;
mod layer;
mod path;
mod recorder;
mod session;
mod subscriber;
mod sys;
mod window;

pub use adopt::{cycle_path, publish_adopted};
pub use api::{counter, instant, set_thread_name, span, span_at, step, Site, SpanGuard};
pub use config::{TraceConfig, BASE_VAR, MAX_EVENTS_VAR, PATH_VARS, SIGNALS_VAR, WINDOW_VARS};
pub use error::TraceError;
pub use layer::{layer, TraceLayer};
pub use path::{prepare, rank_files, rank_path};
pub use session::{run_identity, RunIdentity, TraceSession};
pub use subscriber::{subscriber, TraceSubscriber};
pub use window::IterWindow;
