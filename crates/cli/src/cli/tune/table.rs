//! The table `ranktune tune` prints without `--json`: one line per bucket
//! (the rank column only for more than one rank), then failed tactics,
//! buckets a collective strategy tuned alone, and the job's totals.
//!
//! Presentation only, and its output is checked byte for byte by the CLI
//! tests: change a column or a sentence only on purpose.

use super::labels::{shape_label, tactic_label};
use super::report::{speedup_is_rough, JobReport, RankReport, Row, ROUGH_BELOW};
use std::fmt::{self, Write};

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
    print!("{}", render(report));
}

/// The table of `report`, every line ending in a newline.
fn render(report: &JobReport) -> String {
    let mut out = String::new();
    // Writing to a String never fails.
    let _ = write_table(&mut out, report);
    out
}

fn write_table(out: &mut String, report: &JobReport) -> fmt::Result {
    write_buckets(out, report)?;
    write_failures(out, report)?;
    write_blocklist(out, report)?;
    write_tuned_alone(out, report)?;
    write_rough_note(out, report)?;
    writeln!(out)?;
    write_totals(out, report)
}

/// The columns; the first (rank) only for more than one rank.
const HEADER: [&str; 10] =
    ["rank", "op", "bucket", "runner", "tactic", "best", "vs fallback", "cands", "fails", "source"];

/// The "vs fallback" cell: the ratio of the medians; `faster` with no
/// number when the fallback's median is of too few samples for a ratio to
/// mean anything (it was dropped early as clearly slower).
fn speedup_cell(row: &Row) -> String {
    match row.speedup {
        Some(_) if speedup_is_rough(row) => "faster*".to_string(),
        Some(s) => format!("{s:.2}x"),
        None => "-".to_string(),
    }
}

/// One bucket's cells, in [`HEADER`]'s order.
fn cells(row: &Row) -> [String; 10] {
    [
        row.rank.to_string(),
        row.op.clone(),
        shape_label(&row.bucket),
        row.runner.clone(),
        tactic_label(&row.tactic),
        us(row.best_us),
        speedup_cell(row),
        row.candidates.to_string(),
        row.failures.len().to_string(),
        match (row.section.as_deref(), &row.note) {
            (_, Some(_)) => format!("{}, alone", row.source),
            (Some("shared"), None) => format!("{}, shared", row.source),
            _ => row.source.clone(),
        },
    ]
}

/// The header and one line per bucket, each column as wide as its widest
/// cell, two spaces apart, no trailing spaces.
fn write_buckets(out: &mut String, report: &JobReport) -> fmt::Result {
    let lines: Vec<[String; 10]> = report
        .ranks
        .iter()
        .flat_map(|r| &r.rows)
        .map(|r| cells(r).map(|c| crate::cli::table::clip(&c, crate::cli::table::MAX_CELL)))
        .collect();
    let mut widths = HEADER.map(|h| h.chars().count());
    for l in &lines {
        for (w, c) in widths.iter_mut().zip(l) {
            *w = (*w).max(c.chars().count());
        }
    }
    let skip = usize::from(report.ranks.len() <= 1);
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(widths)
            .skip(skip)
            .map(|(c, w)| {
                // padded by hand: a format width above 65535 panics
                let pad = w.saturating_sub(c.chars().count());
                format!("{c}{}", " ".repeat(pad))
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    writeln!(out, "{}", line(&HEADER.map(String::from)))?;
    for l in &lines {
        writeln!(out, "{}", line(l))?;
    }
    Ok(())
}

/// One line per failed tactic.
fn write_failures(out: &mut String, report: &JobReport) -> fmt::Result {
    for row in report.ranks.iter().flat_map(|r| &r.rows) {
        for f in &row.failures {
            let (rank, op, shape) = (row.rank, &row.op, shape_label(&row.bucket));
            writeln!(out, "  failed on rank {rank} {op} {shape}: {f}")?;
        }
    }
    Ok(())
}

/// Per bucket, the known-bad tactics skipped, those put on the blocklist,
/// and those that worked again; then one line with the job's totals.
fn write_blocklist(out: &mut String, report: &JobReport) -> fmt::Result {
    let rows: Vec<&Row> = report.ranks.iter().flat_map(|r| &r.rows).collect();
    for row in &rows {
        let (rank, op, shape) = (row.rank, &row.op, shape_label(&row.bucket));
        if !row.skipped.is_empty() {
            writeln!(
                out,
                "  rank {rank} {op} {shape}: skipped {} known-bad tactic(s) ({})",
                row.skipped.len(),
                row.skipped.join(", ")
            )?;
        }
        if !row.blocked.is_empty() {
            writeln!(
                out,
                "  rank {rank} {op} {shape}: put on the blocklist: {}",
                row.blocked.join(", ")
            )?;
        }
        if row.unblocked > 0 {
            writeln!(
                out,
                "  rank {rank} {op} {shape}: {} retried known-bad tactic(s) worked and left the \
                 blocklist",
                row.unblocked
            )?;
        }
    }
    let skipped: usize = rows.iter().map(|r| r.skipped.len()).sum();
    if skipped > 0 {
        writeln!(
            out,
            "skipped {skipped} known-bad tactic(s) (on the cache's blocklist for this \
             environment; `--retry-failed` tries them again)"
        )?;
    }
    Ok(())
}

/// Per rank, why a collective strategy first tuned a bucket alone, and how
/// many more buckets it tuned alone after that.
fn write_tuned_alone(out: &mut String, report: &JobReport) -> fmt::Result {
    for r in &report.ranks {
        let mut notes = r.rows.iter().filter_map(|row| row.note.as_ref().map(|n| (row, n)));
        if let Some((row, note)) = notes.next() {
            writeln!(out, "  rank {} {} {}: {note}", row.rank, row.op, shape_label(&row.bucket))?;
            let more = notes.count();
            if more > 0 {
                writeln!(out, "  rank {}: {more} more bucket(s) tuned alone after that", row.rank)?;
            }
        }
    }
    Ok(())
}

/// What `faster*` in the "vs fallback" column means, when it is used.
fn write_rough_note(out: &mut String, report: &JobReport) -> fmt::Result {
    if report.ranks.iter().flat_map(|r| &r.rows).any(speedup_is_rough) {
        writeln!(
            out,
            "  faster*: the fallback was clearly slower and dropped after fewer than {ROUGH_BELOW} \
             timings, too few for a ratio that means anything (`--json` has the raw figures)"
        )?;
    }
    Ok(())
}

/// The strategy's counts (for a collective strategy) and the job's totals.
fn write_totals(out: &mut String, report: &JobReport) -> fmt::Result {
    if !report.strategy.is_empty() && report.strategy != "independent" {
        let sum = |f: fn(&RankReport) -> u64| report.ranks.iter().map(f).sum::<u64>();
        writeln!(
            out,
            "strategy {}: {} buckets tuned together, {} cache hits agreed by all ranks, {} tuned alone after a failure (counts over ranks)",
            report.strategy,
            sum(|r| r.shared),
            sum(|r| r.agreed_hits),
            sum(|r| r.strategy_fallbacks)
        )?;
    }
    let ranks = report.ranks.len();
    let plural = if ranks == 1 { "" } else { "s" };
    let c = &report.counts;
    if c.tuned == 0 && c.misses == 0 {
        let lookups = c.hits + c.misses;
        let cache = &report.cache;
        return writeln!(
            out,
            "nothing to tune: all {lookups} lookups hit the cache {cache} ({ranks} rank{plural})"
        );
    }
    writeln!(
        out,
        "tuned {} buckets on {ranks} rank{plural} in {:.2} s of measuring ({:.2} s wall); cache hits {}, misses {}, fallbacks {}, failed tactics {}",
        c.tuned,
        c.tuning_seconds,
        report.wall_seconds,
        c.hits,
        c.misses,
        c.fallbacks,
        c.failed_tactics
    )?;
    if c.worker_starts > 0 {
        writeln!(
            out,
            "isolated measuring: {} worker processes started, {:.1} ms each on average",
            c.worker_starts,
            c.worker_start_seconds * 1e3 / c.worker_starts as f64
        )?;
    }
    let (saved, shared) = distinct_saved(report);
    write!(out, "saved {saved} entries to {}", report.cache)?;
    if shared > 0 && ranks > 1 {
        write!(out, " ({shared} of them in the shared section, written by every rank)")?;
    }
    writeln!(out)
}

/// How many distinct entries the job saved, and how many of those are in
/// the `shared` section. Every rank of a collective run writes the same
/// shared entries (the save merges them into one), so summing the ranks'
/// counts would count each shared entry once per rank.
fn distinct_saved(report: &JobReport) -> (usize, usize) {
    let written: usize = report.ranks.iter().map(|r| r.entries_saved).sum();
    let shared_rows = || {
        report
            .ranks
            .iter()
            .flat_map(|r| &r.rows)
            .filter(|row| row.source == "tuned" && row.section.as_deref() == Some("shared"))
    };
    let distinct: std::collections::BTreeSet<_> =
        shared_rows().map(|row| (&row.op, &row.bucket, &row.runner)).collect();
    let repeats = shared_rows().count() - distinct.len();
    (written.saturating_sub(repeats), distinct.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(rank: u32, source: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut r = json!({
            "rank": rank, "op": "gemm", "bucket": [[16, 64], [64, 32]], "runner": "blocked",
            "tactic": {"blocked": {"tile_m": 4, "tile_n": 64}}, "source": source,
            "best_us": 12.345, "fallback_us": 1500.0, "speedup": 121.5, "candidates": 7,
            "failures": [],
        });
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        r
    }

    fn rank(rank: u32, strategy: &str, rows: Vec<serde_json::Value>) -> serde_json::Value {
        json!({
            "rank": rank, "world_size": 2, "tuned": 3, "hits": 1, "misses": 3, "fallbacks": 0,
            "failed_tactics": 1, "tuning_seconds": 0.25, "entries_saved": 3,
            "strategy": strategy, "shared": 2, "agreed_hits": 1, "strategy_fallbacks": 1,
            "rows": rows,
        })
    }

    fn job(ranks: Vec<serde_json::Value>, tuned: u64, misses: u64) -> JobReport {
        let strategy = ranks[0]["strategy"].clone();
        serde_json::from_value(json!({
            "cache": "dir/c.json", "world_size": ranks.len(), "strategy": strategy,
            "tuned": tuned, "hits": 2, "misses": misses, "fallbacks": 1, "failed_tactics": 1,
            "tuning_seconds": 0.5, "wall_seconds": 1.25, "ranks": ranks,
        }))
        .unwrap()
    }

    #[test]
    fn a_collective_run_counts_each_shared_entry_once() {
        // Two ranks tuned the same two buckets together: each rank's save
        // wrote both shared entries, and rank 1 one entry of its own.
        let shared = |rank, m: u64| {
            row(rank, "tuned", json!({"section": "shared", "bucket": [[m, 64], [64, 32]]}))
        };
        let mut r0 = rank(0, "parallel", vec![shared(0, 16), shared(0, 32)]);
        let mut r1 = rank(
            1,
            "parallel",
            vec![shared(1, 16), shared(1, 32), row(1, "tuned", json!({"section": "rank_1"}))],
        );
        r0["entries_saved"] = json!(2);
        r1["entries_saved"] = json!(3);
        let report = job(vec![r0, r1], 5, 5);
        assert_eq!(distinct_saved(&report), (3, 2));
        let text = render(&report);
        assert!(
            text.ends_with(
                "saved 3 entries to dir/c.json (2 of them in the shared section, written by every rank)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_table_reads_as_it_always_has() {
        let one = job(
            vec![rank(
                0,
                "independent",
                vec![
                    row(0, "tuned", json!({"failures": ["blocked x: boom\nline"]})),
                    row(0, "cache", json!({"best_us": 2500.0, "speedup": null, "tactic": "naive"})),
                    row(
                        0,
                        "fallback",
                        json!({"best_us": null, "fallback_us": null, "speedup": null, "candidates": 0}),
                    ),
                ],
            )],
            3,
            3,
        );
        let two = job(
            vec![
                rank(
                    0,
                    "merge",
                    vec![
                        row(0, "tuned", json!({"section": "shared", "measured_here": 7})),
                        row(
                            0,
                            "tuned",
                            json!({"section": "rank_0", "note": "rank(s) [1] did not arrive"}),
                        ),
                        row(0, "tuned", json!({"section": "rank_0", "note": "later"})),
                        row(0, "tuned", json!({"section": "rank_0", "note": "later"})),
                    ],
                ),
                rank(1, "merge", vec![row(1, "cache", json!({"bucket": [[1024, 4096]]}))]),
            ],
            5,
            4,
        );
        let cached = job(vec![rank(0, "", vec![row(0, "cache", json!({}))])], 0, 0);
        // Written by the table printer before it was split into sections.
        let expected = [
            (
                &one,
                r#"op    bucket       runner   tactic                       best     vs fallback  cands  fails  source
gemm  16x64,64x32  blocked  blocked(tile_m=4,tile_n=64)  12.3 µs  121.50x      7      1      tuned
gemm  16x64,64x32  blocked  naive                        2.50 ms  -            7      0      cache
gemm  16x64,64x32  blocked  blocked(tile_m=4,tile_n=64)  -        -            0      0      fallback
  failed on rank 0 gemm 16x64,64x32: blocked x: boom
line

tuned 3 buckets on 1 rank in 0.50 s of measuring (1.25 s wall); cache hits 2, misses 3, fallbacks 1, failed tactics 1
saved 3 entries to dir/c.json
"#,
            ),
            (
                &two,
                r#"rank  op    bucket       runner   tactic                       best     vs fallback  cands  fails  source
0     gemm  16x64,64x32  blocked  blocked(tile_m=4,tile_n=64)  12.3 µs  121.50x      7      0      tuned, shared
0     gemm  16x64,64x32  blocked  blocked(tile_m=4,tile_n=64)  12.3 µs  121.50x      7      0      tuned, alone
0     gemm  16x64,64x32  blocked  blocked(tile_m=4,tile_n=64)  12.3 µs  121.50x      7      0      tuned, alone
0     gemm  16x64,64x32  blocked  blocked(tile_m=4,tile_n=64)  12.3 µs  121.50x      7      0      tuned, alone
1     gemm  1024x4096    blocked  blocked(tile_m=4,tile_n=64)  12.3 µs  121.50x      7      0      cache
  rank 0 gemm 16x64,64x32: rank(s) [1] did not arrive
  rank 0: 2 more bucket(s) tuned alone after that

strategy merge: 4 buckets tuned together, 2 cache hits agreed by all ranks, 2 tuned alone after a failure (counts over ranks)
tuned 5 buckets on 2 ranks in 0.50 s of measuring (1.25 s wall); cache hits 2, misses 4, fallbacks 1, failed tactics 1
saved 6 entries to dir/c.json (1 of them in the shared section, written by every rank)
"#,
            ),
            (
                &cached,
                r#"op    bucket       runner   tactic                       best     vs fallback  cands  fails  source
gemm  16x64,64x32  blocked  blocked(tile_m=4,tile_n=64)  12.3 µs  121.50x      7      0      cache

nothing to tune: all 2 lookups hit the cache dir/c.json (1 rank)
"#,
            ),
        ];
        for (report, want) in expected {
            assert_eq!(render(report), want);
        }
    }

    #[test]
    fn a_ratio_from_a_fallback_timed_once_or_twice_is_not_printed() {
        let rows = vec![
            row(0, "tuned", json!({"fallback_samples": 1})),
            row(0, "tuned", json!({"fallback_samples": 2, "speedup": 7.0})),
            row(0, "tuned", json!({"fallback_samples": 3, "speedup": 1.25})),
            row(0, "cache", json!({})),
        ];
        let report = job(vec![rank(0, "independent", rows)], 3, 3);
        let text = render(&report);
        let cells: Vec<String> = report.ranks[0].rows.iter().map(speedup_cell).collect();
        assert_eq!(cells, ["faster*", "faster*", "1.25x", "121.50x"]);
        assert!(
            text.contains(
                "  faster*: the fallback was clearly slower and dropped after fewer than 3"
            ),
            "{text}"
        );
        // No such row, no note.
        let report = job(vec![rank(0, "independent", vec![row(0, "cache", json!({}))])], 3, 3);
        assert!(!render(&report).contains("faster*"));
    }
}
