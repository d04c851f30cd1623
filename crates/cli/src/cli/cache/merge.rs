//! `ranktune cache merge -o OUT IN...`: combine caches by the documented
//! conflict rule (newest entry wins, then the faster, then the earlier
//! input), report every conflict, and save through the locked, merging save,
//! which applies the same rule again, under the lock, against OUT as stored
//! at that moment (see `FileStore::save_resolving`).

use super::common::{
    load_source, location, open_store, same_file, shown, source_formats, won_by_text, Format,
};
use crate::cli::ExitCode;
use anyhow::{Context, Result};
use ranktune_cache::CacheLocation;
use ranktune_cache::{merge, new_wins};
use std::path::PathBuf;
use tracing::warn;

#[derive(Debug, clap::Args)]
#[command(after_help = "Conflicts (same key, same section, different choice): the newest entry \
    (created_unix) wins, then the faster, then the earlier input. Each is reported.")]
pub struct MergeArgs {
    /// The cache to write (a file, or redis://…). If it exists, its entries
    /// take part in the merge as if it were the first input.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// The caches to combine (any format `cache import` reads).
    #[arg(required = true, value_name = "IN")]
    pub inputs: Vec<PathBuf>,
    /// Format of the inputs.
    #[arg(long, value_parser = source_formats(), default_value = "auto")]
    pub format: Format,
    /// Print the conflicts as JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: MergeArgs) -> Result<ExitCode> {
    let mut names = Vec::new();
    let mut datas = Vec::new();
    let out = location(&args.output)?;
    let out_is_input = match &out {
        CacheLocation::File(_) => args.inputs.iter().any(|p| same_file(p, &args.output)),
        CacheLocation::Redis(_) => args.inputs.iter().any(|p| location(p).is_ok_and(|l| l == out)),
    };
    let out_exists = match &out {
        CacheLocation::File(p) => p.exists(),
        CacheLocation::Redis(_) => true,
    };
    if out_exists && !out_is_input {
        let existing = open_store(&out)?
            .inspect()
            .with_context(|| format!("reading {out} (it takes part in the merge)"))?;
        for w in &existing.warnings {
            warn!("{out}: {w}");
        }
        names.push(args.output.clone());
        datas.push(existing.data);
    }
    for path in &args.inputs {
        let source = load_source(path, args.format)?;
        names.push(path.clone());
        datas.push(source.data);
    }
    let merged = merge(&datas);
    if args.json {
        let conflicts: Vec<_> = merged
            .conflicts
            .iter()
            .map(|c| {
                serde_json::json!({
                    "section": c.section,
                    "key": c.key,
                    "kept_from": shown(&names[c.winner]),
                    "kept": c.kept,
                    "won_by": c.won_by,
                    "dropped": c.dropped.iter().map(|(i, e)| serde_json::json!({"from": shown(&names[*i]), "entry": e})).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "conflicts": conflicts }))?
        );
    } else {
        for c in &merged.conflicts {
            let dropped: Vec<String> = c
                .dropped
                .iter()
                .map(|(i, e)| {
                    format!("{} ({:.3} us) from {}", e.tactic, e.time_us, shown(&names[*i]))
                })
                .collect();
            println!(
                "conflict {} {}: kept {} ({:.3} us) from {} [{}]; dropped {}",
                c.section,
                c.key,
                c.kept.tactic,
                c.kept.time_us,
                shown(&names[c.winner]),
                won_by_text(c.won_by),
                dropped.join(", ")
            );
        }
    }
    // The rule is applied again under the lock against OUT as stored then,
    // so an entry a rank saved after OUT was read above is not replaced by
    // an older one.
    let report = open_store(&out)?
        .save_resolving(&merged.data, &|_, _, stored, new| new_wins(stored, new))
        .with_context(|| format!("saving {out}"))?;
    for w in &report.warnings {
        warn!("{w}");
    }
    let msg = format!(
        "merged {} inputs into {out}: {} entries, {} keys in several inputs, {} conflicts",
        datas.len(),
        report.total,
        merged.overlapping,
        merged.conflicts.len()
    );
    if args.json {
        eprintln!("{msg}");
    } else {
        println!("{msg}");
    }
    Ok(ExitCode::SUCCESS)
}
