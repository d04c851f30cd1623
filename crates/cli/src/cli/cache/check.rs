//! `ranktune cache check FILE`: is this cache healthy? Exit 0 when it is;
//! otherwise exit 1 with one line per problem: the file does not parse,
//! bad entries, stale entries, ranks that chose different tactics for the
//! same op and bucket. Read-only.

use super::common::{bucket_text, is_empty_file, open_store, tactic_text};
use ranktune_cache::{is_stale, CacheData, CacheError, Identity, Section};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Per (op, bucket): each distinct choice and the sections that made it.
type Choices<'a> = BTreeMap<(&'a str, &'a Vec<Vec<u64>>), BTreeMap<String, Vec<String>>>;

/// Check a cache's health.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The cache file.
    pub file: PathBuf,
}

/// Every problem of a cache that loaded, one line each.
pub(super) fn problems(data: &CacheData, current: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Stale entries: one line per (section, environment).
    let mut stale: BTreeMap<(Section, &str), usize> = BTreeMap::new();
    for (s, _, e) in data.iter() {
        if is_stale(e, current) {
            *stale.entry((s, e.env.as_str())).or_default() += 1;
        }
    }
    for ((s, env), n) in stale {
        let what = data.metadata.environments.get(env).map_or_else(
            || "an environment not recorded in metadata".to_string(),
            |id| id.describe(),
        );
        out.push(format!(
            "stale: {s}: {n} entries measured under environment {env} ({what}), not this machine's {current}; \
             they are not used (remove them with `ranktune cache prune`)"
        ));
    }
    // Ranks that disagree: same op and bucket, different choice.
    let mut choices: Choices<'_> = BTreeMap::new();
    for (s, k, e) in data.iter() {
        if let Section::Rank(_) = s {
            let choice =
                format!("{}@{} tactic {}", k.runner, k.fingerprint, tactic_text(&e.tactic, 60));
            choices
                .entry((&k.op, &k.bucket))
                .or_default()
                .entry(choice)
                .or_default()
                .push(s.name());
        }
    }
    for ((op, bucket), by_choice) in choices {
        if by_choice.len() > 1 {
            let parts: Vec<String> = by_choice
                .iter()
                .map(|(c, ranks)| format!("{} chose {c}", ranks.join(", ")))
                .collect();
            out.push(format!(
                "ranks disagree on {op} {}: {}",
                bucket_text(bucket),
                parts.join("; ")
            ));
        }
    }
    out
}

/// Runs `cache check`.
pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let path = &args.file;
    let mut lines = Vec::new();
    if std::fs::symlink_metadata(path).is_err() {
        anyhow::bail!("{} does not exist", path.display());
    }
    match open_store(path)?.inspect() {
        Ok(loaded) => {
            if is_empty_file(path) {
                println!(
                    "empty file \u{2014} {} holds no cache at all (0 bytes or only blanks); the tuner \
                     reads it as an empty cache. Delete it, or let `ranktune tune` write it",
                    path.display()
                );
                return Ok(ExitCode::FAILURE);
            }
            lines.extend(loaded.warnings.iter().cloned());
            lines.extend(problems(&loaded.data, &Identity::current().digest()));
            if lines.is_empty() {
                let sections: std::collections::BTreeSet<_> = loaded.data.sections.keys().collect();
                println!(
                    "{}: healthy ({} entries in {} section(s))",
                    path.display(),
                    loaded.data.len(),
                    sections.len()
                );
                return Ok(ExitCode::SUCCESS);
            }
        }
        Err(e @ (CacheError::Corrupt { .. } | CacheError::Unsupported { .. })) => {
            lines.push(format!("unusable: {e}"));
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("cannot check {}", path.display())))
        }
    }
    for l in &lines {
        println!("{l}");
    }
    Ok(ExitCode::FAILURE)
}
