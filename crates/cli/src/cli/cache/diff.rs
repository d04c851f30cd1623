//! `ranktune cache diff A B`: what changed from cache A to cache B — entries
//! added, removed, with a different choice, with a changed time — as a table
//! or as JSON. Exit status like diff(1): 0 same, 1 different, 2 trouble.

use super::common::{load_source, Format};
use anyhow::Result;
use ranktune_cache::{diff, CacheDiff, ChangeKind, DiffOptions, Entry, EntryKey};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The old cache.
    pub a: PathBuf,
    /// The new cache.
    pub b: PathBuf,
    /// Format of both files.
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    pub format: Format,
    /// Report time changes only above this many percent.
    #[arg(long, value_name = "PCT", default_value_t = 0.0)]
    pub time_threshold: f64,
    /// Also list entries whose only change is their evidence (candidates,
    /// checksum, environment, creation time).
    #[arg(long)]
    pub all: bool,
    /// Print JSON for scripts instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DiffArgs) -> Result<ExitCode> {
    if !(args.time_threshold.is_finite() && args.time_threshold >= 0.0) {
        anyhow::bail!(
            "--time-threshold must be a non-negative percentage, got {}",
            args.time_threshold
        );
    }
    let a = load_source(&args.a, args.format)?;
    let b = load_source(&args.b, args.format)?;
    let d = diff(&a.data, &b.data, DiffOptions { time_threshold: args.time_threshold / 100.0 });
    let other = d.changed.len() - d.count(&ChangeKind::Choice) - d.count(&ChangeKind::Time);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        print!("{}", render(&d, args.all));
        println!(
            "{} added, {} removed, {} different choice, {} time change, {} other change, {} unchanged",
            d.added.len(),
            d.removed.len(),
            d.count(&ChangeKind::Choice),
            d.count(&ChangeKind::Time),
            other,
            d.unchanged
        );
    }
    Ok(if d.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn render(d: &CacheDiff, all: bool) -> String {
    let mut rows = vec![row("CHANGE", "SECTION", None, "OLD".into(), "NEW".into())];
    for x in &d.added {
        rows.push(row("added", &x.section.name(), Some(&x.key), "-".into(), choice(&x.entry)));
    }
    for x in &d.removed {
        rows.push(row("removed", &x.section.name(), Some(&x.key), choice(&x.entry), "-".into()));
    }
    for c in &d.changed {
        let (what, new) = match &c.kind {
            ChangeKind::Choice => ("choice", choice(&c.new)),
            ChangeKind::Time => {
                let pct = (c.new.time_us - c.old.time_us) / c.old.time_us * 100.0;
                ("time", format!("{} ({pct:+.1}%)", choice(&c.new)))
            }
            ChangeKind::Other(fields) if all => {
                ("other", format!("{} ({})", choice(&c.new), fields.join(", ")))
            }
            ChangeKind::Other(_) => continue,
        };
        rows.push(row(what, &c.section.name(), Some(&c.key), choice(&c.old), new));
    }
    if rows.len() == 1 {
        return String::new();
    }
    crate::cli::table::table(&rows)
}

fn row(what: &str, section: &str, key: Option<&EntryKey>, old: String, new: String) -> Vec<String> {
    let (op, runner, fp, bucket) = match key {
        Some(k) => (
            k.op.clone(),
            k.runner.clone(),
            crate::cli::table::clip(&k.fingerprint, 24),
            format!("{:?}", k.bucket),
        ),
        None => ("OP".into(), "RUNNER".into(), "FINGERPRINT".into(), "BUCKET".into()),
    };
    vec![what.into(), section.into(), op, runner, fp, bucket, old, new]
}

/// `#runner_index tactic @ time`.
fn choice(e: &Entry) -> String {
    format!(
        "#{} {} @ {:.3}us",
        e.runner_index,
        crate::cli::table::clip(&e.tactic.to_string(), 40),
        e.time_us
    )
}
