//! `ranktune cache diff` (not built yet).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct DiffArgs {}

pub fn run(_args: DiffArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ranktune cache diff` is not built yet")
}
