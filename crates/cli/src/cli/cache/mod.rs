//! `ranktune cache …`: one file per subcommand; this file only dispatches.

mod check;
mod diff;
mod export;
mod import;
mod merge;
mod prune;
mod show;

use anyhow::Context;
use ranktune_cache::FileStore;
use std::path::Path;
use std::process::ExitCode;

/// True when the file at `path` holds nothing but blanks (0 bytes
/// included): the store reads it as an empty cache, but people should hear
/// that it is empty, not that it is a healthy cache.
pub(crate) fn is_empty_file(path: &Path) -> bool {
    ranktune_cache::read_cache_bytes(path).is_ok_and(|b| b.iter().all(u8::is_ascii_whitespace))
}

/// The store for `path`, configured from the environment the same way for
/// every subcommand: a malformed `RANKTUNE_LOCK_TIMEOUT` is an error.
pub(crate) fn open_store(path: &Path) -> anyhow::Result<FileStore> {
    FileStore::from_env(path).with_context(|| format!("cannot open {}", path.display()))
}

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
