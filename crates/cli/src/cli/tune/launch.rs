//! `ranktune tune --ranks N`: starts N child ranks of this same executable
//! (`ranktune tune --child …` with this run's options) through
//! `ranktune_launch::Launcher`, draws their progress, and gathers their
//! reports into the job's report.
//!
//! It only turns options into a child's command line and reports into the
//! job's report; starting, reading and waiting are the library's.

use super::meet;
use super::progress::LaunchBar;
use super::report::{JobReport, RankReport};
use super::{max_tokens, rank, shown, strategy_for, OpName, TuneArgs};
use crate::cli::sys;
use anyhow::Context;
use ranktune_cache::CacheLocation;
use ranktune_core::rank::{RankInfo, RankSource};
use ranktune_launch::{LaunchError, Launcher};
use ranktune_trace::TraceConfig;
use std::ffi::OsString;
use std::io::Write;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Instant;

/// How a launch ended.
pub(super) enum Launched {
    /// Every rank finished: the job's report (boxed: it is large).
    Done(Box<JobReport>),
    /// SIGINT/SIGTERM (the number) stopped the job; it was forwarded to the
    /// ranks, which saved what they had tuned.
    Stopped(i32),
}

/// Runs `n` child ranks tuning into `cache` and returns the job's report.
/// When `stop` is set (SIGINT/SIGTERM), the signal is forwarded to the ranks
/// and the launch waits for them to save and exit (bounded, see
/// `ranktune_launch::Launcher::stop_on`).
pub(super) fn launch(
    args: &TuneArgs,
    cache: &CacheLocation,
    n: u32,
    stop: &Arc<AtomicUsize>,
) -> anyhow::Result<Launched> {
    let started = Instant::now();
    check_paths(args, cache, n)?;
    let exe = crate::cli::rank_executable()
        .context("finding the ranktune executable to start the ranks")?;
    let mut bar = LaunchBar::new(n);
    let isolation = super::isolate::settings(args)?;
    let mut child = child_args(args, cache, n);
    child.extend(super::isolate::child_flags(&isolation).into_iter().map(OsString::from));
    // The save policy as resolved here (flag, variable or default).
    let save_every = super::durable::policy(args)?;
    child.extend(["--save-every".into(), OsString::from(save_every.to_string())]);
    let mut launcher = Launcher::new(exe).args(child);
    // Local ranks meet in a private directory of this job, not beside the
    // cache (where they would leave `.ranktune-collective/` in the user's
    // working tree), unless the user chose the meeting place.
    let meet = match std::env::var_os(ranktune_collective::COLLECTIVE_DIR_ENV)
        .filter(|v| !v.is_empty())
        .or_else(|| std::env::var_os("RANKTUNE_COLLECTIVE").filter(|v| !v.is_empty()))
    {
        Some(_) => None,
        None => Some(meet::PrivateDir::create().context("creating the ranks' meeting place")?),
    };
    if let Some(dir) = &meet {
        launcher = launcher.env(ranktune_collective::COLLECTIVE_DIR_ENV, dir.path());
    }
    // A password given in the URL reaches the ranks through the
    // environment, never through their command lines.
    if let Some(pw) = match cache {
        CacheLocation::Redis(u) => u.password(),
        CacheLocation::File(_) => None,
    } {
        launcher = launcher.env(ranktune_redis::PASSWORD_ENV, pw);
    }
    let launched = launcher.stop_on(Arc::clone(stop)).run::<RankReport>(n, &mut bar);
    drop(bar);
    let mut reports = match launched {
        Ok(reports) => reports,
        Err(e @ LaunchError::Interrupted { .. }) => {
            let sig = e.interrupted_by().unwrap_or(libc::SIGTERM);
            let name = sys::signal_name(sig);
            let mut err = std::io::stderr().lock();
            let _ = match &e {
                LaunchError::Interrupted { unclean, .. } if !unclean.is_empty() => {
                    writeln!(err, "ranktune: {name}: {e}")
                }
                _ => writeln!(
                    err,
                    "ranktune: {name}: stopped {n} ranks; each saved what it had tuned to {cache}{}",
                    args.trace.as_ref().map_or(String::new(), |t| format!(
                        " and wrote its trace ({})",
                        t.display()
                    ))
                ),
            };
            return Ok(Launched::Stopped(sig));
        }
        Err(e) => return Err(e.into()),
    };
    reports.sort_by_key(|r| r.rank);
    let report = JobReport::new(shown(cache), reports, started.elapsed().as_secs_f64());
    Ok(Launched::Done(Box::new(report)))
}

/// Checks the cache and trace paths once, before any rank starts, so that a
/// bad one is one error here rather than the same error from every rank and
/// again in the launcher's summary. Each rank checks again (the launcher's
/// check creates the directories the ranks would create, and nothing else).
fn check_paths(args: &TuneArgs, cache: &CacheLocation, n: u32) -> anyhow::Result<()> {
    if let Some(path) = cache.as_path().filter(|p| p.is_dir()) {
        anyhow::bail!(
            "the tuning cache {} is a directory; give a file path, e.g. --cache {}",
            path.display(),
            path.join("ranktune-cache.json").display()
        );
    }
    rank::open_store(cache)?;
    if let Some(cfg) =
        TraceConfig::from_env_or(args.trace.clone()).context("reading the trace settings")?
    {
        let host = ranktune_core::rank::host_name();
        for r in 0..n {
            let info =
                RankInfo { rank: r, world_size: n, local_rank: r, source: RankSource::Ranktune };
            let path = ranktune_trace::rank_path(&cfg.path, &info, std::process::id(), &host)
                .context("starting the trace")?;
            ranktune_trace::prepare(&path).context("starting the trace")?;
        }
    }
    Ok(())
}

/// A child rank's arguments: this run's options, spelled out.
fn child_args(args: &TuneArgs, cache: &CacheLocation, n: u32) -> Vec<OsString> {
    let mut a: Vec<OsString> = ["tune", "--child"].map(OsString::from).to_vec();
    if args.model.is_none() {
        a.push("--ops".into());
        a.push(OpName::list(&args.ops).into());
    }
    a.push("--cache".into());
    a.push(match cache {
        CacheLocation::File(p) => p.clone().into_os_string(),
        CacheLocation::Redis(u) => u.without_password().to_string().into(),
    });
    a.push("--max-tokens".into());
    a.push(max_tokens(args).to_string().into());
    if let Some(model) = &args.model {
        a.push("--model".into());
        a.push(model.into());
        a.push("--tp".into());
        a.push(args.tp.to_string().into());
    }
    if args.retry_failed {
        a.push("--retry-failed".into());
    }
    if args.quick {
        a.push("--quick".into());
    }
    // `-v`/`-vv` reach the ranks too, so their logs (durable saves, worker
    // starts) come back as `[rank N] …` lines.
    for _ in 0..crate::cli::verbosity() {
        a.push("-v".into());
    }
    a.push("--strategy".into());
    a.push(strategy_for(args, n).name().into());
    if let Some(trace) = &args.trace {
        a.push("--trace".into());
        a.push(trace.into());
    }
    a
}
