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
    ///
    /// The file's header says which run it belongs to, so that files of
    /// different runs are never mixed by analysis: `otherData.run_id` is
    /// [`TraceConfig::run_id`], else the launcher's job id
    /// ([`ranktune_core::job::JobId::detect_with`]: `RANKTUNE_JOB_ID`, torchrun,
    /// MPI, Slurm, …), else `base-<ns>` from a shared clock base
    /// (`RANKTUNE_TRACE_BASE_NS`), else, for a one-rank job, an id of this
    /// process; a multi-rank job with none of these has no run id (analysis
    /// then tells runs apart by world size only).
    ///
    /// `baseTimeNanoseconds` is [`TraceConfig::base_ns`], else
    /// `RANKTUNE_TRACE_BASE_NS`, else this process's own start. A shared
    /// base later than this process's start, or more than 30 days before
    /// it, cannot be used: the rank then writes its own base and warns.
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
        let run = run_header(&cfg, rank, clock::base_unix_ns(), pid, &host, |name| {
            std::env::var(name).ok()
        })?;
        let meta = Meta {
            rank: rank.rank,
            world_size: rank.world_size,
            local_rank: rank.local_rank,
            backend: cfg.backend,
            host,
            pid,
            base_ns: run.base_ns,
            offset_ns: run.offset_ns,
            run_id: run.run_id,
            run_id_source: run.run_id_source,
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

/// The run's part of a file header.
#[derive(Debug, PartialEq, Eq)]
struct RunHeader {
    /// `baseTimeNanoseconds`.
    base_ns: u64,
    /// Added to this process's event times (its own base minus `base_ns`).
    offset_ns: u64,
    /// `otherData.run_id`.
    run_id: Option<String>,
    /// `otherData.run_id_source`.
    run_id_source: &'static str,
}

/// Oldest shared base a rank accepts: 30 days before its own start (older
/// bases would make times too large for microsecond text with nanosecond
/// decimals to stay exact in the readers' doubles).
const MAX_BASE_AGE_NS: u64 = 30 * 86_400 * 1_000_000_000;

/// Chooses the run id and the clock base (the rules on [`TraceSession::start`]).
fn run_header(
    cfg: &TraceConfig,
    rank: &RankInfo,
    own_ns: u64,
    pid: u32,
    host: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<RunHeader, TraceError> {
    let shared = match cfg.base_ns {
        Some(b) => Some(b),
        None => TraceConfig::base_from_env_with(&env)?,
    };
    let (base_ns, offset_ns) = match shared {
        Some(b) if b <= own_ns && own_ns - b <= MAX_BASE_AGE_NS => (b, own_ns - b),
        Some(b) => {
            tracing::warn!(
                "the shared trace clock base {b} ({}) is {} this process's start {own_ns}; \
                 this rank writes its own base, so its raw times are not comparable with the \
                 other ranks' (`ranktune trace merge` still lines them up); set {} to a time \
                 taken just before the ranks start",
                crate::config::BASE_VAR,
                if b > own_ns { "later than" } else { "more than 30 days before" },
                crate::config::BASE_VAR
            );
            (own_ns, 0)
        }
        None => (own_ns, 0),
    };
    let (run_id, run_id_source) = if let Some(id) = cfg.run_id.clone() {
        (Some(id), "TraceConfig::run_id")
    } else if let Some(job) = ranktune_core::job::JobId::detect_with(&env) {
        (Some(job.value), job.source)
    } else if let Some(b) = shared {
        (Some(format!("base-{b}")), crate::config::BASE_VAR)
    } else if rank.world_size <= 1 {
        (Some(format!("{host}-{pid}-{own_ns}")), "this process (a one-rank job)")
    } else {
        (None, "none: no launcher job id and no shared base")
    };
    Ok(RunHeader { base_ns, offset_ns, run_id, run_id_source })
}

/// Which run a trace file of this rank belongs to and its clock base: what
/// ranktune's own files write as `otherData.run_id` and
/// `baseTimeNanoseconds`, for another recorder's files of the same rank
/// (`torch.profiler`'s, through `ranktune.torch`), so that `trace merge`
/// and `trace summary` put them in the same run and on the same clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunIdentity {
    /// `baseTimeNanoseconds`: Unix-epoch nanoseconds (the shared
    /// `RANKTUNE_TRACE_BASE_NS`, else this process's clock base).
    pub base_ns: u64,
    /// `otherData.run_id`.
    pub run_id: Option<String>,
    /// `otherData.run_id_source`.
    pub run_id_source: &'static str,
}

/// This process's [`RunIdentity`] for `rank` (the rules on
/// [`TraceSession::start`], reading the environment).
pub fn run_identity(rank: &RankInfo) -> Result<RunIdentity, TraceError> {
    clock::init();
    let cfg = TraceConfig::new("-");
    let h = run_header(
        &cfg,
        rank,
        clock::base_unix_ns(),
        std::process::id(),
        &ranktune_core::rank::host_name(),
        |name| std::env::var(name).ok(),
    )?;
    Ok(RunIdentity { base_ns: h.base_ns, run_id: h.run_id, run_id_source: h.run_id_source })
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

#[cfg(test)]
mod tests {
    use super::*;
    use ranktune_core::rank::RankSource;
    use std::collections::HashMap;

    fn header(cfg: &TraceConfig, world: u32, own: u64, vars: &[(&str, &str)]) -> RunHeader {
        let map: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let rank =
            RankInfo { rank: 0, world_size: world, local_rank: 0, source: RankSource::Explicit };
        run_header(cfg, &rank, own, 42, "node7", |n| map.get(n).cloned()).unwrap()
    }

    #[test]
    fn a_launched_rank_writes_the_shared_base_and_the_job_id() {
        let cfg = TraceConfig::new("t.json");
        let own = 1_764_460_800_000_000_000;
        let vars = [
            ("RANKTUNE_JOB_ID", "ranktune-7-ab"),
            ("RANKTUNE_TRACE_BASE_NS", "1764460799990000000"),
        ];
        let h = header(&cfg, 4, own, &vars);
        assert_eq!((h.base_ns, h.offset_ns), (1_764_460_799_990_000_000, 10_000_000));
        assert_eq!(
            (h.run_id.as_deref(), h.run_id_source),
            (Some("ranktune-7-ab"), "RANKTUNE_JOB_ID")
        );
        // Under torchrun, with the base exported by the user.
        let vars =
            [("TORCHELASTIC_RUN_ID", "none"), ("MASTER_ADDR", "n1"), ("MASTER_PORT", "29500")];
        let h = header(&cfg, 4, own, &vars);
        assert_eq!(h.run_id.as_deref(), Some("torchelastic-none-n1-29500"));
        assert_eq!((h.base_ns, h.offset_ns), (own, 0), "no shared base: its own");
    }

    #[test]
    fn without_a_launcher() {
        let cfg = TraceConfig::new("t.json");
        let own = 1_764_460_800_000_000_000;
        let h = header(&cfg, 1, own, &[]);
        assert_eq!(h.run_id.as_deref(), Some("node7-42-1764460800000000000"));
        let h = header(&cfg, 2, own, &[]);
        assert_eq!((h.run_id, h.base_ns), (None, own));
        let h = header(&cfg, 2, own, &[("RANKTUNE_TRACE_BASE_NS", "1764460700000000000")]);
        assert_eq!(h.run_id.as_deref(), Some("base-1764460700000000000"));
        assert_eq!(h.offset_ns, 100_000_000_000);
        // The config wins over the environment.
        let cfg = TraceConfig { run_id: Some("mine".into()), base_ns: Some(own - 5), ..cfg };
        let h = header(&cfg, 2, own, &[("RANKTUNE_JOB_ID", "j"), ("RANKTUNE_TRACE_BASE_NS", "1")]);
        assert_eq!((h.run_id.as_deref(), h.base_ns, h.offset_ns), (Some("mine"), own - 5, 5));
    }

    #[test]
    fn an_unusable_base_falls_back_to_the_own_one() {
        let cfg = TraceConfig::new("t.json");
        let own = 1_764_460_800_000_000_000_u64;
        for bad in [own + 1, own - MAX_BASE_AGE_NS - 1] {
            let h = header(&cfg, 2, own, &[("RANKTUNE_TRACE_BASE_NS", &bad.to_string())]);
            assert_eq!((h.base_ns, h.offset_ns), (own, 0), "{bad}");
        }
        let rank = RankInfo { rank: 0, world_size: 2, local_rank: 0, source: RankSource::Explicit };
        let e = run_header(&cfg, &rank, own, 1, "h", |n| {
            (n == "RANKTUNE_TRACE_BASE_NS").then(|| "soon".to_string())
        })
        .unwrap_err();
        assert!(e.to_string().contains("RANKTUNE_TRACE_BASE_NS"), "{e}");
    }
}
