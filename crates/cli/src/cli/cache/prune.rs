//! `ranktune cache prune FILE [--env current|DIGEST] [--blocklist] [--dry-run]`:
//! remove entries measured under another environment, and the blocklist
//! records of other environments (with `--blocklist`, every blocklist
//! record), through the store's locked, merging path (so it is safe while
//! ranks are saving). Which entries go is decided under the lock, on each
//! entry as stored then: a rank that re-tunes a stale entry while prune runs
//! keeps its fresh entry, and a blocklist record written again meanwhile (a
//! newer failure) is kept.

use super::common::{exists, location, open_store};
use crate::cli::ExitCode;
use anyhow::Context;
use ranktune_cache::{is_stale, Identity};
use std::path::PathBuf;

/// Remove stale entries.
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// The cache: a file, or `redis://host[:port][/db][?prefix=NAME]`.
    pub file: PathBuf,
    /// Keep only entries of this environment: `current` (this machine) or
    /// a digest listed in the file's `metadata.environments` (as `cache show
    /// --json` prints them). Any other digest is refused.
    #[arg(long, value_name = "current|DIGEST", default_value = "current")]
    pub env: String,
    /// Also delete every blocklist record, this environment's too, so the
    /// next tune tries every tactic again (without it, only the records of
    /// other environments go).
    #[arg(long)]
    pub blocklist: bool,
    /// Only say what would be removed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs `cache prune`.
pub fn run(args: PruneArgs) -> anyhow::Result<ExitCode> {
    let current = Identity::current().digest();
    let keep = if args.env == "current" { current.clone() } else { args.env.clone() };
    let loc = location(&args.file)?;
    if !exists(&loc) {
        anyhow::bail!("{loc} does not exist");
    }
    let store = open_store(&loc)?;
    let loaded = match store.inspect() {
        Ok(loaded) => loaded,
        Err(e) => return Err(super::common::cannot("prune", e, &loc)),
    };
    let known = &loaded.data.metadata.environments;
    if keep != current && !known.contains_key(&keep) {
        let mut listed: Vec<String> = known.keys().cloned().collect();
        if !listed.contains(&current) {
            listed.push(format!("{current} (this machine)"));
        }
        anyhow::bail!(
            "--env {:?} is neither `current` nor an environment recorded in {loc}; nothing was \
             removed. Known environments: {}",
            args.env,
            listed.join(", ")
        );
    }
    // The blocklist records that go: other environments', or all.
    let mut clears = ranktune_cache::CacheData::default();
    for (k, r) in loaded.data.blocklist.iter() {
        if args.blocklist || k.env != keep {
            clears.blocklist.clear(k.clone(), r.when_unix);
        }
    }
    let blocks = clears.blocklist.cleared().count();
    let blocks_note = |verb: &str| {
        let which = if args.blocklist { "" } else { " of other environments" };
        format!("; {verb} {blocks} blocklist record(s){which}")
    };
    if args.dry_run {
        for w in &loaded.warnings {
            eprintln!("warning: {w}");
        }
        for (k, _) in clears.blocklist.cleared() {
            println!("would remove blocklist record {k}");
        }
        let stale: Vec<_> = loaded.data.iter().filter(|(_, _, e)| is_stale(e, &keep)).collect();
        for (s, k, e) in &stale {
            println!("would remove {s} {k} (env {})", e.env);
        }
        println!(
            "{loc}: would remove {} stale entries (not measured under {keep}){}{}; nothing changed (--dry-run)",
            stale.len(),
            if loaded.bad_entries > 0 {
                format!(" and {} malformed entries", loaded.bad_entries)
            } else {
                String::new()
            },
            if blocks > 0 { blocks_note("and") } else { String::new() }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let report = store
        .remove_where(&|_, _, e| is_stale(e, &keep))
        .with_context(|| format!("cannot prune {loc}"))?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    let mut removed_blocks = String::new();
    if blocks > 0 {
        // Clears: a record not newer than the one read here goes; one
        // written again since (a newer failure) stays.
        let r = store.save(&clears).with_context(|| format!("cannot prune {loc}"))?;
        for w in &r.warnings {
            eprintln!("warning: {w}");
        }
        removed_blocks = blocks_note("removed");
    }
    println!(
        "{loc}: removed {} stale entries (not measured under {keep}){removed_blocks}; {} entries left",
        report.written, report.total
    );
    Ok(ExitCode::SUCCESS)
}
