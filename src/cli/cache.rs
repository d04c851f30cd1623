//! `ranktune cache …` (placeholder until the cache store lands).
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum CacheCommand {}

pub fn run(cmd: CacheCommand) -> anyhow::Result<ExitCode> {
    match cmd {}
}
