//! Combining caches, and moving a single rank's entries to another rank.
//!
//! The conflict rule (also in `docs/cache-interop.md`): when several inputs
//! hold the same key in the same section, the entry with the **newest
//! `created_unix`** wins; on a tie the **lower `time_us`** wins; on a further
//! tie the **earlier input** wins. Inputs that chose a different runner or
//! tactic than the winner are reported as a [`Conflict`]; inputs that agree
//! are not. Entries are never mixed: the winner is kept whole, with its own
//! candidates and environment. Blocklists are united: every record of
//! every input, the newest under one key. No I/O here: the CLI saves the result through
//! the locked, merging store.

use super::{CacheData, Entry, EntryKey, Section};
use serde::Serialize;
use std::collections::BTreeMap;

/// Why the winner of a conflict won.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WonBy {
    /// It was created most recently.
    Newer,
    /// Same creation time; it was faster.
    Faster,
    /// Same creation time and time; it came first.
    Earlier,
}

/// One key whose inputs chose differently.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Conflict {
    /// The section (`shared`, `rank_N`).
    pub section: String,
    /// The key.
    pub key: EntryKey,
    /// Index (in the inputs) of the kept entry.
    pub winner: usize,
    /// The kept entry.
    pub kept: Entry,
    /// Why it won over the closest loser.
    pub won_by: WonBy,
    /// The entries that lost and chose differently, with their input index.
    pub dropped: Vec<(usize, Entry)>,
}

/// The result of [`merge`].
#[derive(Clone, Debug, Default)]
pub struct Merged {
    /// The combined cache.
    pub data: CacheData,
    /// Keys where inputs chose different tactics, with the resolution.
    pub conflicts: Vec<Conflict>,
    /// Keys found in more than one input (agreeing or not).
    pub overlapping: usize,
}

/// Combines caches by the rule in the module docs.
///
/// ```
/// use ranktune_cache::{merge, CacheData};
/// let m = merge(&[CacheData::default(), CacheData::default()]);
/// assert!(m.data.is_empty() && m.conflicts.is_empty());
/// ```
pub fn merge(inputs: &[CacheData]) -> Merged {
    let mut out = Merged::default();
    let mut all: BTreeMap<(Section, &EntryKey), Vec<(usize, &Entry)>> = BTreeMap::new();
    for (i, input) in inputs.iter().enumerate() {
        for (section, key, entry) in input.iter() {
            all.entry((section, key)).or_default().push((i, entry));
        }
    }
    for ((section, key), found) in all {
        if found.len() > 1 {
            out.overlapping += 1;
        }
        let mut order = found.clone();
        order.sort_by(rank);
        let (wi, winner) = order[0];
        let dropped: Vec<(usize, Entry)> = order[1..]
            .iter()
            .filter(|(_, e)| e.runner_index != winner.runner_index || e.tactic != winner.tactic)
            .map(|(i, e)| (*i, (*e).clone()))
            .collect();
        if !dropped.is_empty() {
            let closest = order[1].1;
            let won_by = if winner.created_unix != closest.created_unix {
                WonBy::Newer
            } else if winner.time_us != closest.time_us {
                WonBy::Faster
            } else {
                WonBy::Earlier
            };
            out.conflicts.push(Conflict {
                section: section.name(),
                key: key.clone(),
                winner: wi,
                kept: winner.clone(),
                won_by,
                dropped,
            });
        }
        out.data.insert(section, key.clone(), winner.clone());
    }
    out.data.metadata = merge_metadata(inputs);
    // Blocklists: the union; under one key the newest record wins (on a
    // tie, the later input's).
    for input in inputs {
        out.data.blocklist.apply(input.blocklist.clone());
    }
    // What imported files looked like travels with their entries (later
    // inputs over earlier ones), so an export after a merge reproduces them.
    for input in inputs {
        out.data.take_origins_from(input);
    }
    out
}

/// The conflict rule for two entries under one key, `stored` counting as
/// the earlier input: true when `new` wins (newer; or the same age and
/// faster). What `cache merge -o` applies under the lock against the entry
/// stored at that moment.
///
/// ```
/// # use ranktune_cache::{new_wins, Entry};
/// let e = |t: u64| Entry { runner_index: 0, tactic: 0.into(), time_us: 1.0,
///     candidates: vec![], checksum: "c".into(), env: "e".into(), created_unix: t };
/// assert!(new_wins(&e(1), &e(2)) && !new_wins(&e(2), &e(1)) && !new_wins(&e(1), &e(1)));
/// ```
pub fn new_wins(stored: &Entry, new: &Entry) -> bool {
    rank(&(1, new), &(0, stored)) == std::cmp::Ordering::Less
}

/// Orders candidates best first: newer, then faster (NaN last), then earlier.
fn rank(a: &(usize, &Entry), b: &(usize, &Entry)) -> std::cmp::Ordering {
    let time = |e: &Entry| if e.time_us.is_nan() { f64::INFINITY } else { e.time_us };
    b.1.created_unix
        .cmp(&a.1.created_unix)
        .then(time(a.1).total_cmp(&time(b.1)))
        .then(a.0.cmp(&b.0))
}

fn merge_metadata(inputs: &[CacheData]) -> super::Metadata {
    let mut meta = super::Metadata::default();
    for input in inputs {
        let m = &input.metadata;
        if meta.lib_version.is_empty() {
            meta.lib_version = m.lib_version.clone();
        }
        if meta.host.is_empty() {
            meta.host = m.host.clone();
        }
        if m.created_unix > 0 && (meta.created_unix == 0 || m.created_unix < meta.created_unix) {
            meta.created_unix = m.created_unix;
        }
        meta.updated_unix = meta.updated_unix.max(m.updated_unix);
        for (digest, id) in &m.environments {
            meta.environments.entry(digest.clone()).or_insert_with(|| id.clone());
        }
    }
    meta
}

/// Why [`place_in_rank`] could not place a cache.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlaceError {
    /// The requested source rank is absent.
    #[error("there is no rank_{wanted} section (sections: {present}); pick one of them")]
    NoSuchRank {
        /// The requested rank.
        wanted: u32,
        /// The rank sections present.
        present: String,
    },
    /// Several rank sections, and no choice made.
    #[error("the source has several rank sections ({present}); say which one to place with a source rank (--from-rank)")]
    Ambiguous {
        /// The rank sections present.
        present: String,
    },
}

/// Moves one rank section of `data` to `rank_<to>`: the only rank section,
/// or `rank_<from>` when given (other rank sections are then left out). The
/// `shared` section stays as it is.
pub fn place_in_rank(
    mut data: CacheData,
    from: Option<u32>,
    to: u32,
) -> Result<CacheData, PlaceError> {
    let ranks: Vec<u32> = data.sections.keys().filter_map(Section::rank).collect();
    let present = || {
        if ranks.is_empty() {
            "none".to_string()
        } else {
            ranks.iter().map(|r| format!("rank_{r}")).collect::<Vec<_>>().join(", ")
        }
    };
    let source = match from {
        Some(f) if ranks.contains(&f) => Some(f),
        Some(f) => return Err(PlaceError::NoSuchRank { wanted: f, present: present() }),
        None if ranks.len() > 1 => return Err(PlaceError::Ambiguous { present: present() }),
        None => ranks.first().copied(),
    };
    let moved = source.and_then(|s| data.sections.remove(&Section::Rank(s)));
    data.sections.retain(|s, _| *s == Section::Shared);
    if let Some(entries) = moved {
        data.sections.insert(Section::Rank(to), entries);
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(op: &str) -> EntryKey {
        EntryKey {
            op: op.into(),
            runner: "r".into(),
            fingerprint: "f".into(),
            bucket: crate::sizes_bucket(&[vec![8]]),
        }
    }
    fn entry(tactic: i64, time_us: f64, created: u64) -> Entry {
        Entry {
            runner_index: 0,
            tactic: json!(tactic),
            time_us,
            candidates: vec![],
            checksum: "c".into(),
            env: "e".into(),
            created_unix: created,
        }
    }
    fn one(section: Section, op: &str, e: Entry) -> CacheData {
        let mut d = CacheData::default();
        d.insert(section, key(op), e);
        d
    }

    #[test]
    fn newer_wins_then_faster_then_earlier() {
        let r0 = Section::Rank(0);
        let m = merge(&[one(r0, "a", entry(1, 5.0, 10)), one(r0, "a", entry(2, 9.0, 20))]);
        assert_eq!(m.data.get(r0, &key("a")).unwrap().tactic, json!(2));
        assert_eq!(m.conflicts.len(), 1);
        assert_eq!(m.conflicts[0].won_by, WonBy::Newer);
        assert_eq!(m.conflicts[0].winner, 1);
        assert_eq!(m.conflicts[0].dropped[0].0, 0);

        let m = merge(&[one(r0, "a", entry(1, 9.0, 10)), one(r0, "a", entry(2, 5.0, 10))]);
        assert_eq!(m.data.get(r0, &key("a")).unwrap().tactic, json!(2));
        assert_eq!(m.conflicts[0].won_by, WonBy::Faster);

        let m = merge(&[one(r0, "a", entry(1, 5.0, 10)), one(r0, "a", entry(2, 5.0, 10))]);
        assert_eq!(m.data.get(r0, &key("a")).unwrap().tactic, json!(1));
        assert_eq!(m.conflicts[0].won_by, WonBy::Earlier);
    }

    #[test]
    fn agreement_is_not_a_conflict_and_sections_are_separate() {
        let m = merge(&[
            one(Section::Rank(0), "a", entry(1, 5.0, 10)),
            one(Section::Rank(0), "a", entry(1, 4.0, 10)),
            one(Section::Rank(1), "a", entry(7, 4.0, 10)),
            one(Section::Shared, "b", entry(3, 1.0, 1)),
        ]);
        assert!(m.conflicts.is_empty());
        assert_eq!(m.overlapping, 1);
        assert_eq!(m.data.len(), 3);
        assert_eq!(m.data.get(Section::Rank(0), &key("a")).unwrap().time_us, 4.0);
    }

    #[test]
    fn placing_ranks() {
        let mut d = one(Section::Rank(3), "a", entry(1, 5.0, 10));
        d.insert(Section::Shared, key("s"), entry(1, 1.0, 1));
        let placed = place_in_rank(d.clone(), None, 5).unwrap();
        assert!(placed.get(Section::Rank(5), &key("a")).is_some());
        assert!(placed.get(Section::Shared, &key("s")).is_some());
        assert_eq!(placed.len(), 2);

        d.insert(Section::Rank(4), key("b"), entry(1, 1.0, 1));
        assert!(matches!(place_in_rank(d.clone(), None, 0), Err(PlaceError::Ambiguous { .. })));
        let picked = place_in_rank(d.clone(), Some(4), 0).unwrap();
        assert!(picked.get(Section::Rank(0), &key("b")).is_some());
        assert_eq!(picked.len(), 2);
        let err = place_in_rank(d, Some(9), 0).unwrap_err();
        assert!(err.to_string().contains("rank_3, rank_4"), "{err}");
    }
}
