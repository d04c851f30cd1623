//! `ranktune cache check` (not built yet).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {}

pub fn run(_args: CheckArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ranktune cache check` is not built yet")
}
