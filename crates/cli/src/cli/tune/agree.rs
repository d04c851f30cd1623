//! Whether the ranks of a finished job ended with the same choices, and the
//! warning `ranktune tune` prints when they did not, with the command that
//! tunes them together.
//!
//! Pure functions of the job's report and arguments: it never tunes, reads
//! the cache or prints (the caller prints the warning).

use super::labels::shape_label;
use super::report::JobReport;
use super::{max_tokens, OpName, TuneArgs};
use std::collections::{BTreeMap, BTreeSet};

/// Per (op, bucket): the distinct (runner, tactic) choices of the ranks.
type Choices<'a> = BTreeMap<(&'a str, &'a Vec<Vec<u64>>), BTreeSet<(String, String)>>;

/// At most this many buckets are named in the warning.
const NAMED: usize = 4;

/// The buckets (op and shape label) on which the ranks' rows chose a
/// different runner or tactic — the ranks would run different code — in
/// table order, and the number of buckets compared.
pub(super) fn disagreements(report: &JobReport) -> (Vec<String>, usize) {
    let mut choices: Choices<'_> = BTreeMap::new();
    let mut order = Vec::new();
    for row in report.ranks.iter().flat_map(|r| &r.rows) {
        let k = (row.op.as_str(), &row.bucket);
        if !choices.contains_key(&k) {
            order.push(k);
        }
        choices.entry(k).or_default().insert((row.runner.clone(), row.tactic.to_string()));
    }
    let differ = order
        .iter()
        .filter(|k| choices.get(*k).is_some_and(|c| c.len() > 1))
        .map(|(op, bucket)| format!("{op} {}", shape_label(bucket)))
        .collect();
    (differ, order.len())
}

/// The warning for a job whose ranks ended with different choices, or
/// `None` when they agree (or there is only one rank).
pub(super) fn warning(report: &JobReport, args: &TuneArgs) -> Option<String> {
    if report.ranks.len() < 2 {
        return None;
    }
    let (differ, total) = disagreements(report);
    if differ.is_empty() {
        return None;
    }
    let mut named = differ.iter().take(NAMED).cloned().collect::<Vec<_>>().join(", ");
    if differ.len() > NAMED {
        named.push_str(", …");
    }
    Some(format!(
        "warning: the ranks chose differently on {} of {total} buckets ({named}): they would run \
         different code, and `ranktune cache check` reports it. Tune those buckets together \
         (cached choices that differ are measured again, the rest stay):\n  {}",
        differ.len(),
        fix_command(report, args)
    ))
}

/// `ranktune tune` with this job's ops, sizes and cache, tuned together.
fn fix_command(report: &JobReport, args: &TuneArgs) -> String {
    let mut cmd = format!("ranktune tune --ranks {}", report.ranks.len());
    if args.quick {
        cmd.push_str(" --quick");
    }
    if args.max_tokens.is_some() {
        cmd.push_str(&format!(" --max-tokens {}", max_tokens(args)));
    }
    if args.ops.len() < 3 {
        cmd.push_str(&format!(" --ops {}", OpName::list(&args.ops)));
    }
    cmd.push_str(&format!(" --strategy parallel --cache {}", shell_word(&report.cache)));
    cmd
}

/// A path as one shell word: as it is when it needs no quoting, else in
/// single quotes.
fn shell_word(s: &str) -> String {
    let plain =
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:,@".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TuneArgs,
    }

    fn report(tactics: [[&str; 3]; 2]) -> JobReport {
        let ranks: Vec<_> = tactics
            .iter()
            .enumerate()
            .map(|(r, ts)| {
                let rows: Vec<_> = ts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        json!({
                            "rank": r, "op": "rmsnorm", "bucket": [[1u64 << i, 256]],
                            "runner": "rowwise", "tactic": t, "source": "cache",
                            "best_us": 1.0, "fallback_us": 2.0, "speedup": 2.0,
                            "candidates": 3, "failures": [],
                        })
                    })
                    .collect();
                json!({
                    "rank": r, "world_size": 2, "tuned": 0, "hits": 3, "misses": 0,
                    "fallbacks": 0, "failed_tactics": 0, "tuning_seconds": 0.0,
                    "entries_saved": 0, "rows": rows,
                })
            })
            .collect();
        serde_json::from_value(json!({
            "cache": "my dir/c.json", "world_size": 2, "strategy": "independent", "tuned": 0,
            "hits": 6, "misses": 0, "fallbacks": 0, "failed_tactics": 0, "tuning_seconds": 0.0,
            "wall_seconds": 0.1, "ranks": ranks,
        }))
        .unwrap()
    }

    #[test]
    fn names_the_buckets_that_differ_and_the_command_that_fixes_them() {
        let cli = Cli::parse_from([
            "x",
            "--quick",
            "--max-tokens",
            "4",
            "--ops",
            "rmsnorm",
            "--strategy",
            "independent",
        ]);
        let agreeing = report([["a", "b", "c"], ["a", "b", "c"]]);
        assert_eq!(warning(&agreeing, &cli.args), None);
        let two = report([["a", "b", "c"], ["a", "x", "y"]]);
        assert_eq!(disagreements(&two), (vec!["rmsnorm 2x256".into(), "rmsnorm 4x256".into()], 3));
        assert_eq!(
            warning(&two, &cli.args).unwrap(),
            "warning: the ranks chose differently on 2 of 3 buckets (rmsnorm 2x256, rmsnorm \
             4x256): they would run different code, and `ranktune cache check` reports it. Tune \
             those buckets together (cached choices that differ are measured again, the rest \
             stay):\n  ranktune tune --ranks 2 --quick --max-tokens 4 --ops rmsnorm --strategy \
             parallel --cache 'my dir/c.json'"
        );
    }
}
