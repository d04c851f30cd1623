//! `ranktune tune` (placeholder until the tuner lands).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct TuneArgs {}

pub fn run(_args: TuneArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ranktune tune` is not built yet")
}
