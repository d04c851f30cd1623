//! `ranktune cache merge` (not built yet).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct MergeArgs {}

pub fn run(_args: MergeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ranktune cache merge` is not built yet")
}
