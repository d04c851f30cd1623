//! The table `ranktune tune` prints without `--json`: one line per bucket
//! (the rank column only for more than one rank), then failed tactics,
//! buckets a collective strategy tuned alone, and the job's totals.
//!
//! Presentation only, and its output is checked byte for byte by the CLI
//! tests: change a column or a sentence only on purpose.

use super::labels::{shape_label, tactic_label};
use super::report::{JobReport, RankReport};

/// `12.3 µs`, `4.56 ms`, `-`.
fn us(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 1000.0 => format!("{:.2} ms", v / 1000.0),
        Some(v) => format!("{v:.1} µs"),
        None => "-".to_string(),
    }
}

/// Prints the table of `report` to stdout.
pub(super) fn print_table(report: &JobReport) {
    let multi = report.ranks.len() > 1;
    let header = [
        "rank",
        "op",
        "bucket",
        "runner",
        "tactic",
        "best",
        "vs fallback",
        "cands",
        "fails",
        "source",
    ];
    let mut lines: Vec<[String; 10]> = Vec::new();
    for r in &report.ranks {
        for row in &r.rows {
            lines.push([
                row.rank.to_string(),
                row.op.clone(),
                shape_label(&row.bucket),
                row.runner.clone(),
                tactic_label(&row.tactic),
                us(row.best_us),
                row.speedup.map_or("-".to_string(), |s| format!("{s:.2}x")),
                row.candidates.to_string(),
                row.failures.len().to_string(),
                match (row.section.as_deref(), &row.note) {
                    (_, Some(_)) => format!("{}, alone", row.source),
                    (Some("shared"), None) => format!("{}, shared", row.source),
                    _ => row.source.clone(),
                },
            ]);
        }
    }
    let skip = usize::from(!multi);
    let mut widths = [0usize; 10];
    for (i, h) in header.iter().enumerate() {
        widths[i] = h.chars().count();
    }
    for l in &lines {
        for (i, c) in l.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let fmt = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .skip(skip)
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let header: Vec<String> = header.iter().map(|s| s.to_string()).collect();
    println!("{}", fmt(&header));
    for l in &lines {
        println!("{}", fmt(l));
    }
    for r in &report.ranks {
        for row in &r.rows {
            for f in &row.failures {
                println!(
                    "  failed on rank {} {} {}: {f}",
                    row.rank,
                    row.op,
                    shape_label(&row.bucket)
                );
            }
        }
    }
    for r in &report.ranks {
        let mut notes = r.rows.iter().filter_map(|row| row.note.as_ref().map(|n| (row, n)));
        if let Some((row, note)) = notes.next() {
            println!("  rank {} {} {}: {note}", row.rank, row.op, shape_label(&row.bucket));
            let more = notes.count();
            if more > 0 {
                println!("  rank {}: {more} more bucket(s) tuned alone after that", row.rank);
            }
        }
    }
    println!();
    if !report.strategy.is_empty() && report.strategy != "independent" {
        let sum = |f: fn(&RankReport) -> u64| report.ranks.iter().map(f).sum::<u64>();
        println!(
            "strategy {}: {} buckets tuned together, {} cache hits agreed by all ranks, {} tuned alone after a failure (counts over ranks)",
            report.strategy,
            sum(|r| r.shared),
            sum(|r| r.agreed_hits),
            sum(|r| r.strategy_fallbacks)
        );
    }
    let lookups = report.hits + report.misses;
    if report.tuned == 0 && report.misses == 0 {
        println!(
            "nothing to tune: all {lookups} lookups hit the cache {} ({} rank{})",
            report.cache.display(),
            report.ranks.len(),
            if report.ranks.len() == 1 { "" } else { "s" }
        );
    } else {
        println!(
            "tuned {} buckets on {} rank{} in {:.2} s of measuring ({:.2} s wall); cache hits {}, misses {}, fallbacks {}, failed tactics {}",
            report.tuned,
            report.ranks.len(),
            if report.ranks.len() == 1 { "" } else { "s" },
            report.tuning_seconds,
            report.wall_seconds,
            report.hits,
            report.misses,
            report.fallbacks,
            report.failed_tactics
        );
        let saved: usize = report.ranks.iter().map(|r| r.entries_saved).sum();
        println!("saved {saved} entries to {}", report.cache.display());
    }
}
