//! A loaded cache's health problems, one line each: stale entries and ranks
//! that chose differently for the same op and bucket. Shared by
//! `ranktune cache check` and the Python package's `Cache.check()`, so both
//! report the same lines. Pure: no I/O, no logging.

use crate::{is_stale, CacheData, Section};
use std::collections::BTreeMap;

/// Per (op, bucket): each distinct choice and the sections that made it.
type Choices<'a> = BTreeMap<(&'a str, &'a Vec<Vec<u64>>), BTreeMap<String, Vec<String>>>;

/// `[[64,64],[64]]`: a bucket as people read it.
pub fn bucket_text(bucket: &[Vec<u64>]) -> String {
    serde_json::to_string(bucket).unwrap_or_default()
}

/// A tactic in at most `max` characters (strings without quotes; longer
/// text ends in `…`).
pub fn tactic_text(t: &serde_json::Value, max: usize) -> String {
    let s = match t {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.chars().count() <= max {
        return s;
    }
    let head: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{head}…")
}

/// Every problem of a cache that loaded, one line each; `current` is this
/// machine's environment digest ([`crate::Identity::digest`]).
///
/// ```
/// use ranktune_cache::{check::problems, CacheData};
/// assert!(problems(&CacheData::default(), "e").is_empty());
/// ```
pub fn problems(data: &CacheData, current: &str) -> Vec<String> {
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
