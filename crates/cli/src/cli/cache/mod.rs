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

use crate::cli::ExitCode;

/// The `cache` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum CacheCommand {
    /// Print a cache's entries (a table, or --json for scripts).
    #[command(after_help = "Examples:
  ranktune cache show ranktune-cache.json           # a table: op, bucket, runner
  ranktune cache show ranktune-cache.json --rank 0  # what rank 0 uses
  ranktune cache show ranktune-cache.json --json    # stored values, for scripts")]
    Show(show::ShowArgs),
    /// Check a cache's health: exit 0 when healthy, one line per problem otherwise.
    #[command(after_help = "Examples:
  ranktune cache check ranktune-cache.json; echo $?  # 0 healthy, 1 problems, 2 error")]
    Check(check::CheckArgs),
    /// Show what changed between two caches.
    Diff(diff::DiffArgs),
    /// Combine caches into one.
    #[command(after_help = "Examples:
  ranktune cache merge node0.json node1.json -o all.json  # newest entry wins
  ranktune cache merge a.json trtllm-cache.json -o all.json --json")]
    Merge(merge::MergeArgs),
    /// Remove stale entries through the locked, merging save path.
    #[command(after_help = "Examples:
  ranktune cache prune ranktune-cache.json --dry-run  # what would be removed
  ranktune cache prune ranktune-cache.json            # deletes stale entries")]
    Prune(prune::PruneArgs),
    /// Import caches (ranktune, TensorRT-LLM, vLLM/SGLang MoE, FlashInfer, Triton) into a cache.
    #[command(after_help = "Examples:
  ranktune cache import ranktune-cache.json trtllm-cache.json  # format detected
  ranktune cache import ranktune-cache.json other.json --rank 1 --from-rank 0")]
    Import(import::ImportArgs),
    /// Export a cache to another tuner's format (TensorRT-LLM, vLLM/SGLang MoE, FlashInfer, Triton).
    #[command(after_help = "Examples:
  ranktune cache export ranktune-cache.json -o trtllm-cache.json
  # --force replaces OUT (never the cache itself):
  ranktune cache export ranktune-cache.json -o trtllm-cache.json --force")]
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
