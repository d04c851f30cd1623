//! `ranktune cache export` (not built yet).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ExportArgs {}

pub fn run(_args: ExportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ranktune cache export` is not built yet")
}
