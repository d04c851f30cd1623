//! The health check of a cache (`ranktune cache check`, and every other
//! caller that needs it): stale entries, ranks whose choices diverge, and
//! (as information) the blocklist's known-bad tactics.
//!
//! Owns the definitions of "stale" as the check reports it and of
//! "divergent": a pure function of the cache's content. It never reads or
//! writes files and never prints (callers print the problems' `Display`).
//!
//! **Divergence** means that the ranks would run different code for the
//! same op and bucket: two rank sections chose a different runner (by name
//! and by position in the op's runner list) or a different tactic. Sections
//! are compared by the set of choices each holds for the op and bucket, so
//! several choices within one section (an entry per runner, as FlashInfer
//! tunes them) are no divergence. The
//! runner's *fingerprint* (its parameters; TensorRT-LLM's `unique_id`) is not
//! compared: it is set by the code, not chosen by tuning, and it often holds
//! the rank itself (an expert-parallel MoE runner's id carries its EP rank),
//! so every rank legitimately has its own.

use super::document::CacheData;
use super::entry::{Entry, EntryKey, Section};
use super::identity::is_stale;
use std::collections::BTreeMap;
use std::fmt;

/// What the ranks chose for one op and bucket: the part of an entry that
/// decides which code runs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RankChoice {
    /// Runner name.
    pub runner: String,
    /// The runner's position in the op's runner list.
    pub runner_index: u32,
    /// The tactic, as compact JSON.
    pub tactic: String,
}

impl RankChoice {
    /// The choice an entry records.
    pub fn of(key: &EntryKey, entry: &Entry) -> RankChoice {
        RankChoice {
            runner: key.runner.clone(),
            runner_index: entry.runner_index,
            tactic: match &entry.tactic {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            },
        }
    }
}

/// One finding of [`check`]. `Display` is the line `cache check` prints.
/// Not every finding is a defect: entries measured on another machine (an
/// imported TensorRT-LLM file, a cache tuned on the GPU nodes) are a fact
/// about the file, see [`Problem::is_defect`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Problem {
    /// Entries of one section measured in another environment than this
    /// one: kept, and used where that environment runs, not here.
    Stale {
        /// The section.
        section: Section,
        /// The entries' environment digest.
        env: String,
        /// That environment, described (or said to be unrecorded).
        described: String,
        /// This machine's environment digest.
        current: String,
        /// How many entries.
        count: usize,
    },
    /// Rank sections that chose differently for one op and bucket.
    Divergent {
        /// The op.
        op: String,
        /// The bucket.
        bucket: Vec<Vec<crate::Dim>>,
        /// Each distinct choice and the sections that made it (at least two).
        choices: Vec<(RankChoice, Vec<Section>)>,
    },
    /// A tactic on the blocklist: a fact to report (later tunes in that
    /// environment skip it), not a defect.
    Blocked {
        /// The record's key.
        key: crate::BlockKey,
        /// The record.
        record: crate::Blocked,
        /// Whether the record is of this machine's environment.
        here: bool,
    },
}

impl Problem {
    /// Whether this finding is something wrong with the cache (ranks that
    /// disagree), rather than a fact to report (entries measured elsewhere,
    /// which that machine uses and this one retunes). `cache check` exits 1
    /// only for defects.
    pub fn is_defect(&self) -> bool {
        match self {
            Problem::Stale { .. } | Problem::Blocked { .. } => false,
            Problem::Divergent { .. } => true,
        }
    }
}

/// At most this many characters of a tactic in a problem's line.
const TACTIC_CHARS: usize = 60;

/// The tactic label people read everywhere ([`crate::tactic_label`]) for a
/// choice's compact-JSON tactic (a plain string tactic is kept as it is).
fn tactic_text(json: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(v) => crate::tactic_label(&v),
        Err(_) => json.to_string(),
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{head}…")
}

impl fmt::Display for Problem {
    /// The problem in words, with control characters in the names a file
    /// or server gave (ops, runners, tactics) written out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::new();
        self.write_text(&mut text)?;
        f.write_str(&crate::label::escape_control(&text))
    }
}

impl Problem {
    fn write_text(&self, f: &mut String) -> fmt::Result {
        use fmt::Write;
        match self {
            Problem::Stale { section, env, described, current, count } => write!(
                f,
                "measured elsewhere: {section}: {count} entries of environment {env} ({described}), \
                 not this machine's {current}; kept for that environment, not used here \
                 (`ranktune cache prune` would delete these {count} entries)"
            ),
            Problem::Blocked { key, record, here } => {
                let who = match record.rank {
                    Some(r) => format!("rank {r} on {}", record.host),
                    None => record.host.clone(),
                };
                write!(
                    f,
                    "known-bad tactic: {}/{} tactic {} at {} and larger: {}: {} ({who}, {}; \
                     environment {}{}); skipped by later tunes there, tried again with \
                     --retry-failed",
                    key.op,
                    key.runner,
                    clip(&tactic_text(key.tactic_text()), TACTIC_CHARS),
                    crate::bucket_label(&key.bucket),
                    record.kind,
                    record.message,
                    crate::time::unix_label(record.when_unix),
                    key.env,
                    if *here { ", this machine's" } else { "" }
                )
            }
            Problem::Divergent { op, bucket, choices } => {
                write!(f, "ranks disagree on {op} {}: ", crate::bucket_label(bucket))?;
                for (i, (c, sections)) in choices.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    let names: Vec<String> = sections.iter().map(Section::name).collect();
                    // The runner's position only when a name alone is ambiguous.
                    let same_name = choices.iter().filter(|(o, _)| o.runner == c.runner).count();
                    let runner = if choices.iter().any(|(o, _)| {
                        o.runner == c.runner && o.runner_index != c.runner_index
                    }) && same_name > 1
                    {
                        format!("{} (runner #{})", c.runner, c.runner_index)
                    } else {
                        c.runner.clone()
                    };
                    write!(
                        f,
                        "{} chose {runner} tactic {}",
                        names.join(", "),
                        clip(&tactic_text(&c.tactic), TACTIC_CHARS)
                    )?;
                }
                Ok(())
            }
        }
    }
}

/// Every problem of `data`, judged on a machine whose environment digest is
/// `current`: stale entries (one problem per section and environment) and
/// divergent choices between rank sections (see the module docs for the
/// rule). An empty list is a healthy cache.
///
/// ```
/// use ranktune_cache::{check, CacheData, Entry, EntryKey, Section};
///
/// let entry = |fp: &str| {
///     let key = EntryKey { op: "moe".into(), runner: "MoERunner".into(),
///                          fingerprint: fp.into(), bucket: ranktune_cache::sizes_bucket(&[vec![8, 7168]]) };
///     let e = Entry { runner_index: 0, tactic: serde_json::json!([256, 1]), time_us: 1.0,
///                     candidates: vec![], checksum: String::new(), env: "e".into(), created_unix: 0 };
///     (key, e)
/// };
/// let mut data = CacheData::default();
/// // The runner's id holds the expert-parallel rank; the choice is the same.
/// let (k, e) = entry("(ep_rank=0)");
/// data.insert(Section::Rank(0), k, e);
/// let (k, e) = entry("(ep_rank=1)");
/// data.insert(Section::Rank(1), k, e);
/// assert!(check(&data, "e").is_empty());
/// ```
pub fn check(data: &CacheData, current: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut stale: BTreeMap<(Section, &str), usize> = BTreeMap::new();
    for (s, _, e) in data.iter() {
        if is_stale(e, current) {
            *stale.entry((s, e.env.as_str())).or_default() += 1;
        }
    }
    for ((section, env), count) in stale {
        let described = data.metadata.environments.get(env).map_or_else(
            || "an environment not recorded in metadata".to_string(),
            |id| id.describe(),
        );
        out.push(Problem::Stale {
            section,
            env: env.to_string(),
            described,
            current: current.to_string(),
            count,
        });
    }
    out.extend(divergent(data));
    for (key, record) in data.blocklist.iter() {
        out.push(Problem::Blocked {
            key: key.clone(),
            record: record.clone(),
            here: key.env == current,
        });
    }
    out
}

/// The op-and-bucket pairs on which rank sections chose differently.
fn divergent(data: &CacheData) -> Vec<Problem> {
    type ByChoice = BTreeMap<RankChoice, Vec<Section>>;
    let mut by_bucket: BTreeMap<(&str, &Vec<Vec<crate::Dim>>), ByChoice> = BTreeMap::new();
    for (s, k, e) in data.iter() {
        if let Section::Rank(_) = s {
            let sections =
                by_bucket.entry((&k.op, &k.bucket)).or_default().entry(RankChoice::of(k, e));
            let list = sections.or_default();
            if !list.contains(&s) {
                list.push(s);
            }
        }
    }
    // Sections differ when the sets of choices they hold differ: one section
    // holding several choices for an op and bucket (FlashInfer tunes each
    // runner of an op apart, so its file holds one entry per runner) is no
    // disagreement, and neither are ranks that all hold the same several.
    let sections_differ = |choices: &ByChoice| {
        let mut per_section: BTreeMap<Section, Vec<&RankChoice>> = BTreeMap::new();
        for (choice, sections) in choices {
            for s in sections {
                per_section.entry(*s).or_default().push(choice);
            }
        }
        let mut sets = per_section.into_values();
        let first = sets.next();
        sets.any(|set| Some(&set) != first.as_ref())
    };
    by_bucket
        .into_iter()
        .filter(|(_, choices)| choices.len() > 1 && sections_differ(choices))
        .map(|((op, bucket), choices)| {
            // In rank order: each choice's ranks sorted, and the choices by
            // the first rank that made them.
            let mut choices: Vec<(RankChoice, Vec<Section>)> = choices.into_iter().collect();
            for (_, sections) in &mut choices {
                sections.sort();
            }
            choices.sort_by(|a, b| a.1.first().cmp(&b.1.first()));
            Problem::Divergent { op: op.to_string(), bucket: bucket.clone(), choices }
        })
        .collect()
}

/// Whether a `shared` entry under `shared_key` supersedes the rank entry
/// `rank_key`/`rank_entry`: same op and same bucket, in a rank section, and
/// not newer than the shared entry. The runner and its fingerprint do not
/// matter: the shared entry is the ranks' agreed decision for that op and
/// bucket, whichever runner each rank had chosen alone (that difference is
/// what made them disagree).
pub fn supersedes(
    shared_key: &EntryKey,
    shared: &Entry,
    section: Section,
    rank_key: &EntryKey,
    rank_entry: &Entry,
) -> bool {
    matches!(section, Section::Rank(_))
        && shared_key.op == rank_key.op
        && shared_key.bucket == rank_key.bucket
        && rank_entry.created_unix <= shared.created_unix
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(data: &mut CacheData, s: Section, runner: &str, fp: &str, index: u32, t: i64) {
        let key = EntryKey {
            op: "moe".into(),
            runner: runner.into(),
            fingerprint: fp.into(),
            bucket: crate::sizes_bucket(&[vec![8, 64]]),
        };
        let entry = Entry {
            runner_index: index,
            tactic: json!(t),
            time_us: 1.0,
            candidates: vec![],
            checksum: "c".into(),
            env: "e".into(),
            created_unix: 0,
        };
        data.insert(s, key, entry);
    }

    #[test]
    fn only_a_different_runner_or_tactic_is_divergence() {
        // Same choice, per-rank fingerprints: healthy.
        let mut data = CacheData::default();
        for r in 0..4 {
            put(&mut data, Section::Rank(r), "MoERunner", &format!("(ep_rank={r})"), 0, 7);
        }
        assert_eq!(check(&data, "e"), vec![]);

        // A different tactic on one rank: divergent, naming it.
        put(&mut data, Section::Rank(2), "MoERunner", "(ep_rank=2)", 0, 9);
        let p = check(&data, "e");
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(
            p[0].to_string(),
            "ranks disagree on moe 8x64: rank_0, rank_1, rank_3 chose MoERunner tactic 7; \
             rank_2 chose MoERunner tactic 9"
        );

        // Same name and tactic, another runner of the list: divergent too.
        let mut data = CacheData::default();
        put(&mut data, Section::Rank(0), "MoERunner", "a", 0, 7);
        put(&mut data, Section::Rank(1), "MoERunner", "b", 1, 7);
        let p = check(&data, "e");
        assert_eq!(
            p[0].to_string(),
            "ranks disagree on moe 8x64: rank_0 chose MoERunner (runner #0) tactic 7; \
             rank_1 chose MoERunner (runner #1) tactic 7"
        );

        // In rank order: rank_0's choice first, even when it sorts last,
        // and rank_2 before rank_10.
        let mut data = CacheData::default();
        put(&mut data, Section::Rank(0), "ZRunner", "a", 1, 7);
        put(&mut data, Section::Rank(10), "ARunner", "a", 0, 7);
        put(&mut data, Section::Rank(2), "ARunner", "a", 0, 7);
        let p = check(&data, "e");
        assert_eq!(
            p[0].to_string(),
            "ranks disagree on moe 8x64: rank_0 chose ZRunner tactic 7; rank_2, rank_10 chose \
             ARunner tactic 7"
        );
        // One entry per runner in each section (FlashInfer tunes each
        // runner apart): the same set on every rank is no disagreement; a
        // rank whose set differs is.
        let mut data = CacheData::default();
        put(&mut data, Section::Rank(0), "CudnnRunner", "a", 0, 7);
        put(&mut data, Section::Rank(0), "CutlassRunner", "b", 0, 3);
        assert_eq!(check(&data, "e"), vec![]);
        put(&mut data, Section::Rank(1), "CudnnRunner", "a", 0, 7);
        put(&mut data, Section::Rank(1), "CutlassRunner", "b", 0, 3);
        assert_eq!(check(&data, "e"), vec![]);
        put(&mut data, Section::Rank(1), "CutlassRunner", "b", 0, 4);
        let p = check(&data, "e");
        assert_eq!(p.len(), 1, "{p:?}");

        // Shared entries are never compared with rank entries.
        let mut data = CacheData::default();
        put(&mut data, Section::Rank(0), "MoERunner", "a", 0, 7);
        put(&mut data, Section::Shared, "MoERunner", "a", 0, 9);
        assert_eq!(check(&data, "e"), vec![]);
    }

    #[test]
    fn stale_entries_are_counted_per_section_and_environment() {
        let mut data = CacheData::default();
        put(&mut data, Section::Rank(0), "R", "a", 0, 7);
        let p = check(&data, "other");
        assert!(
            matches!(&p[..], [Problem::Stale { count: 1, section: Section::Rank(0), .. }]),
            "{p:?}"
        );
        assert!(p[0].to_string().contains("environment not recorded"), "{}", p[0]);
    }

    #[test]
    fn superseding_takes_same_op_and_bucket_in_rank_sections_not_newer() {
        let key = |runner: &str, op: &str, n: u64| EntryKey {
            op: op.into(),
            runner: runner.into(),
            fingerprint: "f".into(),
            bucket: crate::sizes_bucket(&[vec![n]]),
        };
        let entry = |created: u64| Entry {
            runner_index: 0,
            tactic: json!(1),
            time_us: 1.0,
            candidates: vec![],
            checksum: "c".into(),
            env: "e".into(),
            created_unix: created,
        };
        let (sk, se) = (key("a", "gemm", 8), entry(100));
        assert!(supersedes(&sk, &se, Section::Rank(1), &key("b", "gemm", 8), &entry(99)));
        assert!(supersedes(&sk, &se, Section::Rank(1), &key("a", "gemm", 8), &entry(100)));
        assert!(!supersedes(&sk, &se, Section::Rank(1), &key("a", "gemm", 8), &entry(101)));
        assert!(!supersedes(&sk, &se, Section::Rank(1), &key("a", "gemm", 16), &entry(1)));
        assert!(!supersedes(&sk, &se, Section::Rank(1), &key("a", "softmax", 8), &entry(1)));
        assert!(!supersedes(&sk, &se, Section::Shared, &key("b", "gemm", 8), &entry(1)));
    }
}
