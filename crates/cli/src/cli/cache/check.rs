//! `ranktune cache check FILE`: is this cache healthy? Exit 0 when it is;
//! otherwise exit 1 with one line per problem: the file does not parse,
//! bad entries, ranks that would run different code for the same op and
//! bucket. Entries measured in another environment are listed too, and so
//! are the blocklist's known-bad tactics, but neither is a defect (exit 0
//! when they are all there is). Read-only. What counts as a problem is
//! `ranktune_cache::check`'s; this module only reads the file and prints.

use super::common::{exists, is_empty_file, location, open_store};
use crate::cli::ExitCode;
use ranktune_cache::{CacheError, Identity};
use std::path::PathBuf;

/// Check a cache's health.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The cache: a file, or `redis://host[:port][/db][?prefix=NAME]`.
    pub file: PathBuf,
}

/// Runs `cache check`.
pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let loc = location(&args.file)?;
    let mut lines = Vec::new();
    if !exists(&loc) {
        anyhow::bail!("{loc} does not exist");
    }
    match super::common::inspect_any(&loc, open_store(&loc)?.as_ref()) {
        Ok(loaded) => {
            if is_empty_file(&loc) {
                println!(
                    "empty file \u{2014} {loc} holds no cache at all (0 bytes or only blanks); the tuner \
                     reads it as an empty cache. Delete it, or let `ranktune tune` write it"
                );
                return Ok(ExitCode::FAILURE);
            }
            lines.extend(loaded.warnings.iter().cloned());
            let current = Identity::current().digest();
            let (defects, elsewhere): (Vec<_>, Vec<_>) =
                ranktune_cache::check(&loaded.data, &current)
                    .into_iter()
                    .partition(|p| p.is_defect());
            lines.extend(defects.iter().map(|p| p.to_string()));
            for p in &elsewhere {
                println!("{p}");
            }
            if lines.is_empty() {
                let sections: std::collections::BTreeSet<_> = loaded.data.sections.keys().collect();
                let others: usize = elsewhere
                    .iter()
                    .map(|p| match p {
                        ranktune_cache::Problem::Stale { count, .. } => *count,
                        _ => 0,
                    })
                    .sum();
                let mut note = if others > 0 {
                    format!("; {others} of them measured elsewhere, not used here")
                } else {
                    String::new()
                };
                let blocked = loaded.data.blocklist.len();
                if blocked > 0 {
                    note.push_str(&format!("; {blocked} known-bad tactic(s) on the blocklist"));
                }
                println!(
                    "{loc}: healthy ({} entries in {} section(s){note})",
                    loaded.data.len(),
                    sections.len()
                );
                return Ok(ExitCode::SUCCESS);
            }
        }
        Err(e @ (CacheError::Corrupt { .. } | CacheError::Unsupported { .. })) => {
            let advice = super::common::unreadable_advice(&e, &loc);
            if advice.is_empty() {
                lines.push(format!("unusable: {e}"));
            } else {
                lines.push(format!("unusable: {e}; what to do: {advice}"));
            }
        }
        Err(e) => return Err(anyhow::Error::new(e).context(format!("cannot check {loc}"))),
    }
    for l in &lines {
        println!("{l}");
    }
    Ok(ExitCode::FAILURE)
}
