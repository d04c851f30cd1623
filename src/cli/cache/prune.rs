//! `ranktune cache prune` (not built yet).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct PruneArgs {}

pub fn run(_args: PruneArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ranktune cache prune` is not built yet")
}
