//! `ranktune cache show` (not built yet).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ShowArgs {}

pub fn run(_args: ShowArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ranktune cache show` is not built yet")
}
