//! The session guard: ties the path rule, the recorder, export and the crash
//! hooks together, and guarantees the file is written on `stop()`, on drop,
//! from the panic hook and on SIGINT/SIGTERM.
//!
//! One session at a time per process. Every export is a complete atomic
//! replace, so exporting early (panic hook, `flush()`) and again later (drop
//! after the unwinding) only ever leaves a whole file, the latest one. The
//! final export (`stop()`, drop or a signal) runs once; nothing is written
//! after it.

use crate::active::{self, Core};
use crate::export::Meta;
use crate::layer::{layer, TraceLayer};
use crate::path::{prepare, rank_path};
use crate::recorder::Recorder;
use crate::{clock, hooks, TraceConfig, TraceError};
use ranktune_core::error_chain::Chain;
use ranktune_core::rank::RankInfo;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A recording session: the guard that writes this rank's trace file.
///
/// ```no_run
/// use ranktune_core::rank::{RankInfo, RankOverrides};
/// use ranktune_trace::{span, TraceConfig, TraceSession};
/// let rank = RankInfo::detect(&RankOverrides::default())?;
/// let session = TraceSession::start(TraceConfig::new("trace.json"), &rank)?;
/// for _ in 0..10 {
///     let _s = span("work", "app");
///     session.step();
/// }
/// let path = session.stop()?; // trace_<rank>.json
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TraceSession {
    core: Arc<Core>,
    done: bool,
}

impl TraceSession {
    /// Starts recording for `rank`: resolves this rank's file with
    /// [`rank_path`], checks now that it can be written (creating its
    /// directory), installs the panic and signal hooks the config asks for,
    /// and makes this the process's active session.
    pub fn start(cfg: TraceConfig, rank: &RankInfo) -> Result<TraceSession, TraceError> {
        let mut active = active::slot();
        if active.is_some() {
            return Err(TraceError::AlreadyActive);
        }
        let pid = std::process::id();
        let host = ranktune_core::rank::host_name();
        let path = rank_path(&cfg.path, rank, pid, &host)?;
        prepare(&path)?;
        if cfg.handle_signals {
            hooks::install_signal_handler()?;
        }
        if cfg.handle_panics {
            hooks::install_panic_hook();
        }
        clock::init();
        let meta = Meta {
            rank: rank.rank,
            world_size: rank.world_size,
            local_rank: rank.local_rank,
            backend: cfg.backend,
            host,
            pid,
            base_ns: clock::base_unix_ns(),
        };
        let rec = Recorder::new(cfg.max_events, cfg.window);
        let core = Arc::new(Core::new(path, meta, rec));
        core.rec.activate();
        *active = Some(Arc::clone(&core));
        tracing::info!(path = %core.path.display(), "recording trace");
        Ok(TraceSession { core, done: false })
    }

    /// This rank's trace file.
    pub fn path(&self) -> &Path {
        &self.core.path
    }

    /// The `tracing` Layer that feeds this session (any [`TraceLayer`] feeds
    /// the active session; this is a convenience).
    pub fn layer(&self) -> TraceLayer {
        layer()
    }

    /// Ends the current iteration and starts the next: records the ending
    /// iteration as an `X` event `ProfilerStep#<N>` (category
    /// `user_annotation`, like PyTorch) when it is inside the window, and
    /// turns recording on or off for the next one.
    pub fn step(&self) {
        self.core.rec.step();
    }

    /// The current iteration (0 before the first [`TraceSession::step`]).
    pub fn iteration(&self) -> u64 {
        self.core.rec.iteration()
    }

    /// Writes the trace file now without stopping (e.g. a checkpoint).
    pub fn flush(&self) -> Result<PathBuf, TraceError> {
        self.core.export(Duration::from_secs(60)).map(Path::to_path_buf)
    }

    /// Stops recording, writes the file and returns its path.
    ///
    /// With the signal hook on, a SIGINT/SIGTERM that arrives while this
    /// writes waits for the file and then ends the process by the signal
    /// (this call does not return then).
    pub fn stop(mut self) -> Result<PathBuf, TraceError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<PathBuf, TraceError> {
        self.done = true;
        self.core.rec.deactivate();
        let result = self.core.finish(Duration::from_secs(60)).map(Path::to_path_buf);
        {
            let mut active = active::slot();
            if active.as_ref().is_some_and(|c| Arc::ptr_eq(c, &self.core)) {
                *active = None;
            }
        }
        self.core.rec.clear();
        // A SIGINT/SIGTERM that arrived while this export ran waited for it;
        // now it ends the process (see `hooks`).
        hooks::end_if_signalled();
        result
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        if !self.done {
            match self.finish() {
                Ok(path) => tracing::info!(path = %path.display(), "trace written"),
                Err(e) => tracing::warn!("{}", Chain(&e)),
            }
        }
    }
}
