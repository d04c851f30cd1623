//! `ranktune cache import` (not built yet).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {}

pub fn run(_args: ImportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`ranktune cache import` is not built yet")
}
