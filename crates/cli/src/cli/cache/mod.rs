//! `ranktune cache …`: one file per subcommand, independent of each other;
//! what they share is in `common`. This file only dispatches.

mod check;
mod common;
mod diff;
mod export;
mod import;
mod merge;
mod prune;
mod show;

use std::process::ExitCode;

/// The `cache` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum CacheCommand {
    /// Print a cache's entries (a table, or --json for scripts).
    Show(show::ShowArgs),
    /// Check a cache's health: exit 0 when healthy, one line per problem otherwise.
    Check(check::CheckArgs),
    /// Show what changed between two caches.
    Diff(diff::DiffArgs),
    /// Combine caches into one.
    Merge(merge::MergeArgs),
    /// Remove stale entries through the locked, merging save path.
    Prune(prune::PruneArgs),
    /// Import caches (ranktune or TensorRT-LLM format) into a cache.
    Import(import::ImportArgs),
    /// Export a cache to another format (TensorRT-LLM).
    Export(export::ExportArgs),
}

/// Runs one `cache` subcommand.
pub fn run(cmd: CacheCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        CacheCommand::Show(a) => show::run(a),
        CacheCommand::Check(a) => check::run(a),
        CacheCommand::Diff(a) => diff::run(a),
        CacheCommand::Merge(a) => merge::run(a),
        CacheCommand::Prune(a) => prune::run(a),
        CacheCommand::Import(a) => import::run(a),
        CacheCommand::Export(a) => export::run(a),
    }
}
