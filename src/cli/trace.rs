//! `ranktune trace …` (placeholder until trace analysis lands).
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum TraceCommand {}

pub fn run(cmd: TraceCommand) -> anyhow::Result<ExitCode> {
    match cmd {}
}
