//! `ranktune cache prune FILE [--env current|DIGEST]`: remove entries
//! measured under another environment, through the store's locked, merging
//! save path (so it is safe while ranks are saving).

use anyhow::Context;
use ranktune::cache::{is_stale, lock_timeout_from_env, FileStore, Identity, Store};
use std::path::PathBuf;
use std::process::ExitCode;

/// Remove stale entries.
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// The cache file.
    pub file: PathBuf,
    /// Keep only entries of this environment: `current` (this machine) or
    /// an environment digest as `cache show --json` lists them.
    #[arg(long, value_name = "current|DIGEST", default_value = "current")]
    pub env: String,
}

/// Runs `cache prune`.
pub fn run(args: PruneArgs) -> anyhow::Result<ExitCode> {
    let keep = if args.env == "current" { Identity::current().digest() } else { args.env.clone() };
    if keep.is_empty() || !keep.bytes().all(|b| b.is_ascii_hexdigit()) {
        anyhow::bail!(
            "--env {:?} is neither `current` nor an environment digest (hex, as in `cache show --json`)",
            args.env
        );
    }
    if std::fs::symlink_metadata(&args.file).is_err() {
        anyhow::bail!("{} does not exist", args.file.display());
    }
    let store = FileStore::new(&args.file).with_lock_timeout(lock_timeout_from_env()?);
    let loaded = store.inspect().with_context(|| {
        format!("cannot prune {}; `ranktune cache check` says more", args.file.display())
    })?;
    let keys: Vec<_> = loaded
        .data
        .iter()
        .filter(|(_, _, e)| is_stale(e, &keep))
        .map(|(s, k, _)| (s, k.clone()))
        .collect();
    let report =
        store.remove(&keys).with_context(|| format!("cannot prune {}", args.file.display()))?;
    println!(
        "{}: removed {} stale entries (not measured under {keep}); {} entries left",
        args.file.display(),
        report.written,
        report.total
    );
    Ok(ExitCode::SUCCESS)
}
