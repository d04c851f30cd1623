//! `ranktune cache show FILE [--rank R] [--json]`: a cache's entries as a
//! table for people or JSON for scripts. Read-only: it never locks, moves
//! or rewrites anything.

use super::common::{bucket_text, exists, is_empty_file, location, open_store, tactic_text};
use crate::cli::ExitCode;
use ranktune_cache::{bucket_size, is_stale, CacheData, Entry, EntryKey, Identity, Section};
use std::path::PathBuf;

/// Print a cache's entries.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The cache: a file, or `redis://host[:port][/db][?prefix=NAME]`.
    pub file: PathBuf,
    /// What rank R would use, as a load does: the shared section plus its
    /// own (`rank_R`); exit 1 when the cache has neither.
    #[arg(long, value_name = "R", allow_negative_numbers = true, value_parser = crate::cli::count::<u32>)]
    pub rank: Option<u32>,
    /// JSON for scripts: {"metadata": {...}, "entries": [{"rank", "op", "runner", ...}],
    /// "blocklist": [{"op", "runner", "tactic", "bucket", "env", "kind", ...}]}.
    #[arg(long)]
    pub json: bool,
}

/// The entries shown: all, or what rank `r` loads (`shared` and `rank_r`).
fn selected(data: &CacheData, rank: Option<u32>) -> Vec<(Section, &EntryKey, &Entry)> {
    data.iter()
        .filter(|(s, _, _)| match rank {
            None => true,
            Some(r) => *s == Section::Shared || s.rank() == Some(r),
        })
        .collect()
}

/// The table's order: by op, then bucket size (smallest first, numerically),
/// then runner; ties by bucket, fingerprint and section. `--json` keeps
/// file order.
fn sort_for_people(rows: &mut [(Section, &EntryKey, &Entry)]) {
    rows.sort_by(|(sa, a, _), (sb, b, _)| {
        (&a.op, bucket_size(&a.bucket), &a.runner, &a.bucket, &a.fingerprint, sa).cmp(&(
            &b.op,
            bucket_size(&b.bucket),
            &b.runner,
            &b.bucket,
            &b.fingerprint,
            sb,
        ))
    });
}

/// Runs `cache show`.
pub fn run(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let loc = location(&args.file)?;
    if !exists(&loc) {
        anyhow::bail!("{loc} does not exist");
    }
    let store = open_store(&loc)?;
    let loaded = match super::common::inspect_any(&loc, store.as_ref()) {
        Ok(loaded) => loaded,
        Err(e) => return Err(super::common::cannot("show", e, &loc)),
    };
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    if !args.json && loaded.data.is_unchanged_update() && is_empty_file(&loc) {
        println!("empty cache: {loc} is an empty file (no entries, no metadata)");
        return Ok(ExitCode::SUCCESS);
    }
    let current = Identity::current().digest();
    let data = &loaded.data;
    // One rule for "nothing there" across stores: a Redis prefix that holds
    // nothing is an error, as a missing file is (a mistyped prefix must not
    // read as an empty cache).
    if let ranktune_cache::CacheLocation::Redis(url) = &loc {
        if data.is_unchanged_update()
            && data.metadata.lib_version.is_empty()
            && data.metadata.host.is_empty()
        {
            anyhow::bail!(
                "{loc} holds no cache: nothing is stored under the prefix `{}` on that server; \
                 check ?prefix= (a cache appears there with its first save)",
                url.prefix
            );
        }
    }
    let rows = selected(data, args.rank);
    if let Some(r) = args.rank.filter(|&r| !rows.iter().any(|(s, _, _)| s.rank() == Some(r))) {
        let ranks: std::collections::BTreeSet<u32> =
            data.iter().filter_map(|(s, _, _)| s.rank()).collect();
        let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
        let theirs = if list.is_empty() {
            "it has no rank sections".to_string()
        } else {
            format!("its ranks are {}", list.join(", "))
        };
        if rows.is_empty() {
            eprintln!("error: {loc} has no entries for rank {r}: no shared ones and no rank_{r}; {theirs}");
            return Ok(ExitCode::from(1));
        }
        // What rank r would load: the shared entries alone. Said on stderr,
        // so a script reading --json is not disturbed.
        eprintln!(
            "note: {loc} has no rank_{r} section ({theirs}); rank {r} would use the {} shared entries below",
            rows.len()
        );
    }
    if args.json {
        let m = &data.metadata;
        let doc = serde_json::json!({
            "metadata": {
                "lib_version": m.lib_version,
                "host": m.host,
                "created_unix": m.created_unix,
                "updated_unix": m.updated_unix,
                "environments": m.environments,
                "current_env": current,
            },
            "entries": rows.iter().map(|(s, k, e)| ranktune_cache::entry_listing(*s, k, e, &current)).collect::<Vec<_>>(),
            "blocklist": data.blocklist.iter().map(|(k, r)| ranktune_cache::block_listing(k, r, &current)).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = rows;
    sort_for_people(&mut rows);
    let mut cells =
        vec![["SECTION", "OP", "RUNNER", "FINGERPRINT", "BUCKET", "TACTIC", "TIME_US", "STALE"]
            .map(String::from)
            .to_vec()];
    let mut stale = 0;
    for (s, k, e) in &rows {
        let is = is_stale(e, &current);
        stale += usize::from(is);
        cells.push(vec![
            s.name(),
            k.op.clone(),
            k.runner.clone(),
            k.fingerprint.clone(),
            bucket_text(&k.bucket),
            tactic_text(&e.tactic, 40),
            format!("{:.2}", e.time_us),
            if is { "stale".into() } else { String::new() },
        ]);
    }
    if !rows.is_empty() {
        print!("{}", crate::cli::table::table(&cells));
    }
    let sections: std::collections::BTreeSet<_> = rows.iter().map(|(s, _, _)| *s).collect();
    let m = &data.metadata;
    let written = match (m.lib_version.is_empty(), m.host.is_empty()) {
        (true, true) => "the cache records no metadata (who wrote it, where)".to_string(),
        _ => format!(
            "written by ranktune {} on {}",
            if m.lib_version.is_empty() { "(version not recorded)" } else { &m.lib_version },
            if m.host.is_empty() { "(host not recorded)" } else { &m.host },
        ),
    };
    println!(
        "{} entries in {} section(s), {} stale (measured under another environment than this machine's {current}); \
         {written}",
        rows.len(),
        sections.len(),
        stale,
    );
    print_blocklist(data, &current);
    Ok(ExitCode::SUCCESS)
}

/// The blocklist as a table, with one line saying what it does; nothing
/// when it is empty.
fn print_blocklist(data: &CacheData, current: &str) {
    if data.blocklist.is_empty() {
        return;
    }
    let mut cells =
        vec![["OP", "RUNNER", "TACTIC", "FROM_BUCKET", "KIND", "WHEN", "WHO", "ENV", "MESSAGE"]
            .map(String::from)
            .to_vec()];
    let mut here = 0;
    for (k, r) in data.blocklist.iter() {
        here += usize::from(k.env == current);
        cells.push(vec![
            k.op.clone(),
            k.runner.clone(),
            tactic_text(&k.tactic(), 30),
            bucket_text(&k.bucket),
            r.kind.to_string(),
            ranktune_cache::unix_label(r.when_unix),
            match r.rank {
                Some(rank) => format!("rank {rank}@{}", r.host),
                None => r.host.clone(),
            },
            if k.env == current { format!("{} (here)", k.env) } else { k.env.clone() },
            crate::cli::table::clip(&r.message, 50),
        ]);
    }
    println!();
    print!("{}", crate::cli::table::table(&cells));
    println!(
        "{} known-bad tactic(s) on the blocklist, {here} of this machine's environment: later \
         tunes there skip each at its bucket and larger ones (`ranktune tune --retry-failed` \
         tries them again; `ranktune cache prune --blocklist` deletes the list)",
        data.blocklist.len()
    );
}
