//! `ranktune cache diff A B`: what changed from cache A to cache B — entries
//! added, removed, with a different choice, with a changed time — as a table
//! or as JSON. Exit status like diff(1): 0 no reported difference, 1
//! differences reported, 2 trouble (a file missing or unreadable, a bad
//! flag).

use super::common::{load_source, source_formats, Format};
use crate::cli::ExitCode;
use anyhow::Result;
use ranktune_cache::{diff, CacheDiff, ChangeKind, DiffOptions, Entry, EntryKey};
use std::path::PathBuf;

/// The default `--time-threshold`, in percent: the tuner's widest near-tie
/// band ([`ranktune_tune::NOISE_BAND_CAP`], 10%). A time change smaller than
/// that is within the run-to-run noise the tuner itself refuses to decide
/// on, so it is not a change worth exit status 1.
pub const DEFAULT_TIME_THRESHOLD_PCT: f64 = ranktune_tune::NOISE_BAND_CAP * 100.0;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Exit status: 0 when nothing is reported (no entry added, removed, with another choice, \
or with a time change above --time-threshold; with --all, no evidence change either), \
1 when something is, 2 on trouble (a file missing or unreadable, a bad flag).

Examples:
  ranktune cache diff old.json new.json              # choices, >10% time changes
  ranktune cache diff old.json new.json --time-threshold 0  # every time change
  ranktune cache diff tune.json trtllm-cache.json --json    # JSON for scripts")]
pub struct DiffArgs {
    /// The old cache.
    pub a: PathBuf,
    /// The new cache.
    pub b: PathBuf,
    /// Format of both files.
    #[arg(long, value_parser = source_formats(), default_value = "auto")]
    pub format: Format,
    /// Report time changes only above this many percent. The default, 10,
    /// is the tuner's widest near-tie band: smaller changes are run-to-run
    /// noise. 0 reports every change.
    #[arg(long, value_name = "PCT", default_value_t = DEFAULT_TIME_THRESHOLD_PCT, allow_negative_numbers = true)]
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
    let mut a = load_source(&args.a, args.format)?;
    let mut b = load_source(&args.b, args.format)?;
    // Fused-MoE configs of two GPUs: compare batch size by batch size.
    if let Some((da, db, dev_a, dev_b)) =
        ranktune_formats::vllm_moe::align_devices(&a.data, &b.data)
    {
        if !args.json {
            println!("comparing the configs of {dev_a} (old) and {dev_b} (new) by batch size");
        }
        (a.data, b.data) = (da, db);
    }
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
    Ok(if reported(&d, args.all) == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// How many differences the output reports: added, removed, another
/// choice, a time change above the threshold, and with `all` also the
/// evidence-only changes (a re-measurement within the noise).
fn reported(d: &CacheDiff, all: bool) -> usize {
    let evidence = d.changed.len() - d.count(&ChangeKind::Choice) - d.count(&ChangeKind::Time);
    d.added.len() + d.removed.len() + d.changed.len() - if all { 0 } else { evidence }
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
            ChangeKind::Choice => {
                // Two config objects (fused-MoE or Triton configs): only the
                // keys that differ, and the times when there are any.
                if let Some((mut old, mut new)) = differing_fields(&c.old, &c.new) {
                    if c.old.time_us != 0.0 || c.new.time_us != 0.0 {
                        old.push_str(&format!(" @ {:.3}us", c.old.time_us));
                        new.push_str(&format!(" @ {:.3}us", c.new.time_us));
                    }
                    rows.push(row("choice", &c.section.name(), Some(&c.key), old, new));
                    continue;
                }
                ("choice", choice(&c.new))
            }
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
            ranktune_cache::bucket_label(&k.bucket),
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
        crate::cli::table::clip(&ranktune_cache::tactic_label(&e.tactic), 40),
        e.time_us
    )
}

/// For two entries of the same runner whose tactics are both JSON objects:
/// `key=value` for each key whose value differs, old and new. A Triton
/// config's `kwargs` count as keys of the config (Triton passes them all
/// to the kernel alike).
fn differing_fields(old: &Entry, new: &Entry) -> Option<(String, String)> {
    let (serde_json::Value::Object(a), serde_json::Value::Object(b)) = (&old.tactic, &new.tactic)
    else {
        return None;
    };
    if old.runner_index != new.runner_index {
        return None;
    }
    let flat = |m: &serde_json::Map<String, serde_json::Value>| {
        let mut out = m.clone();
        if let Some(serde_json::Value::Object(kwargs)) = m.get("kwargs") {
            out.remove("kwargs");
            for (k, v) in kwargs {
                out.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        out
    };
    let (a, b) = (&flat(a), &flat(b));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let show = |m: &serde_json::Map<String, serde_json::Value>, k: &str| {
        m.get(k).map_or("-".to_string(), |v| v.to_string())
    };
    let differ: Vec<&String> = keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).collect();
    let side =
        |m| differ.iter().map(|k| format!("{k}={}", show(m, k))).collect::<Vec<_>>().join(" ");
    Some((side(a), side(b)))
}
