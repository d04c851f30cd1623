//! `ranktune tune --ranks N`: starts N child ranks of this same executable
//! (`ranktune tune --child …` with this run's options) through
//! `ranktune_tune::Launcher`, draws their progress, and gathers their
//! reports into the job's report.
//!
//! It only turns options into a child's command line and reports into the
//! job's report; starting, reading and waiting are the library's.

use super::progress::LaunchBar;
use super::report::{JobReport, RankReport};
use super::{max_tokens, OpName, TuneArgs};
use anyhow::Context;
use ranktune_tune::Launcher;
use std::ffi::OsString;
use std::path::Path;
use std::time::Instant;

/// Runs `n` child ranks tuning into `cache` and returns the job's report.
pub(super) fn launch(args: &TuneArgs, cache: &Path, n: u32) -> anyhow::Result<JobReport> {
    let started = Instant::now();
    let exe =
        std::env::current_exe().context("finding the ranktune executable to start the ranks")?;
    let mut bar = LaunchBar::new(n);
    let mut reports: Vec<RankReport> =
        Launcher::new(exe).args(child_args(args, cache)).run(n, &mut bar)?;
    reports.sort_by_key(|r| r.rank);
    Ok(JobReport::new(cache.to_path_buf(), reports, started.elapsed().as_secs_f64()))
}

/// A child rank's arguments: this run's options, spelled out.
fn child_args(args: &TuneArgs, cache: &Path) -> Vec<OsString> {
    let ops: Vec<&str> = args
        .ops
        .iter()
        .map(|o| match o {
            OpName::Gemm => "gemm",
            OpName::Softmax => "softmax",
            OpName::Rmsnorm => "rmsnorm",
        })
        .collect();
    let mut a: Vec<OsString> = ["tune", "--child", "--ops"].map(OsString::from).to_vec();
    a.push(ops.join(",").into());
    a.push("--cache".into());
    a.push(cache.into());
    a.push("--max-tokens".into());
    a.push(max_tokens(args).to_string().into());
    if args.quick {
        a.push("--quick".into());
    }
    a.push("--strategy".into());
    a.push(args.strategy.name().into());
    if let Some(trace) = &args.trace {
        a.push("--trace".into());
        a.push(trace.into());
    }
    a
}
