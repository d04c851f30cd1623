//! What changed between two caches: entries added, removed, with a different
//! choice, with a different time, or otherwise re-measured.
//!
//! Pure comparison of two [`CacheData`]; no I/O, no opinions about which side
//! is right (that is [`merge()`](fn@crate::merge)'s job).

use super::{CacheData, Entry, EntryKey, Section};
use serde::Serialize;

/// How an entry present on both sides changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Another runner or tactic was chosen.
    Choice,
    /// Same choice, time changed by more than the threshold.
    Time,
    /// Same choice and time; only the evidence changed (candidates,
    /// checksum, environment or creation time), listed by field name.
    Other(Vec<&'static str>),
}

/// One entry that differs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// The section.
    #[serde(serialize_with = "ser_section")]
    pub section: Section,
    /// The key.
    pub key: EntryKey,
    /// The kind of change.
    pub kind: ChangeKind,
    /// The entry in the first cache.
    pub old: Entry,
    /// The entry in the second cache.
    pub new: Entry,
}

/// An entry only one side has.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OneSided {
    /// The section.
    #[serde(serialize_with = "ser_section")]
    pub section: Section,
    /// The key.
    pub key: EntryKey,
    /// The entry.
    pub entry: Entry,
}

fn ser_section<S: serde::Serializer>(s: &Section, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(&s.name())
}

/// The differences from cache `a` to cache `b`, each list in file order.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CacheDiff {
    /// In `b` only.
    pub added: Vec<OneSided>,
    /// In `a` only.
    pub removed: Vec<OneSided>,
    /// In both, different.
    pub changed: Vec<Change>,
    /// In both and equal.
    pub unchanged: usize,
}

impl CacheDiff {
    /// True when nothing differs.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }

    /// Changes of one kind (`Choice` or `Time`; `Other` matches any list).
    pub fn count(&self, kind: &ChangeKind) -> usize {
        self.changed
            .iter()
            .filter(|c| std::mem::discriminant(&c.kind) == std::mem::discriminant(kind))
            .count()
    }
}

/// Options of [`diff`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DiffOptions {
    /// Smallest relative time change reported as [`ChangeKind::Time`]
    /// (`0.0`: any change). Smaller changes count as unchanged times.
    pub time_threshold: f64,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions { time_threshold: 0.0 }
    }
}

/// Compares two caches.
///
/// ```
/// use ranktune_cache::{diff, CacheData, DiffOptions};
/// let d = diff(&CacheData::default(), &CacheData::default(), DiffOptions::default());
/// assert!(d.is_empty());
/// ```
pub fn diff(a: &CacheData, b: &CacheData, opts: DiffOptions) -> CacheDiff {
    let mut out = CacheDiff::default();
    for (section, key, old) in a.iter() {
        match b.get(section, key) {
            None => out.removed.push(OneSided { section, key: key.clone(), entry: old.clone() }),
            Some(new) => match classify(old, new, opts) {
                None => out.unchanged += 1,
                Some(kind) => out.changed.push(Change {
                    section,
                    key: key.clone(),
                    kind,
                    old: old.clone(),
                    new: new.clone(),
                }),
            },
        }
    }
    for (section, key, new) in b.iter() {
        if a.get(section, key).is_none() {
            out.added.push(OneSided { section, key: key.clone(), entry: new.clone() });
        }
    }
    out
}

fn classify(old: &Entry, new: &Entry, opts: DiffOptions) -> Option<ChangeKind> {
    if old.runner_index != new.runner_index || old.tactic != new.tactic {
        return Some(ChangeKind::Choice);
    }
    if time_changed(old.time_us, new.time_us, opts.time_threshold) {
        return Some(ChangeKind::Time);
    }
    let mut fields = Vec::new();
    if old.candidates != new.candidates {
        fields.push("candidates");
    }
    if old.checksum != new.checksum {
        fields.push("checksum");
    }
    if old.env != new.env {
        fields.push("env");
    }
    if old.created_unix != new.created_unix {
        fields.push("created_unix");
    }
    (!fields.is_empty()).then_some(ChangeKind::Other(fields))
}

fn time_changed(old: f64, new: f64, threshold: f64) -> bool {
    if old == new {
        return false;
    }
    let base = old.abs().max(new.abs());
    if !(base.is_finite()) || base == 0.0 {
        return true;
    }
    (new - old).abs() / base > threshold
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
    fn entry(tactic: i64, time_us: f64) -> Entry {
        Entry {
            runner_index: 0,
            tactic: json!(tactic),
            time_us,
            candidates: vec![],
            checksum: "c".into(),
            env: "e".into(),
            created_unix: 1,
        }
    }

    #[test]
    fn all_kinds() {
        let mut a = CacheData::default();
        let mut b = CacheData::default();
        a.insert(Section::Rank(0), key("gone"), entry(1, 10.0));
        b.insert(Section::Rank(0), key("new"), entry(1, 10.0));
        a.insert(Section::Rank(0), key("choice"), entry(1, 10.0));
        b.insert(Section::Rank(0), key("choice"), entry(2, 10.0));
        a.insert(Section::Shared, key("time"), entry(1, 10.0));
        b.insert(Section::Shared, key("time"), entry(1, 12.0));
        a.insert(Section::Shared, key("same"), entry(1, 10.0));
        b.insert(Section::Shared, key("same"), entry(1, 10.0));
        let mut other = entry(1, 10.0);
        other.env = "e2".into();
        a.insert(Section::Shared, key("other"), entry(1, 10.0));
        b.insert(Section::Shared, key("other"), other);
        // Same key in another section is a different entry.
        b.insert(Section::Rank(1), key("same"), entry(1, 10.0));

        let d = diff(&a, &b, DiffOptions::default());
        assert_eq!(d.added.len(), 2);
        assert_eq!(d.removed.len(), 1);
        assert_eq!(d.removed[0].key.op, "gone");
        assert_eq!(d.count(&ChangeKind::Choice), 1);
        assert_eq!(d.count(&ChangeKind::Time), 1);
        assert_eq!(
            d.changed.iter().find(|c| c.key.op == "other").unwrap().kind,
            ChangeKind::Other(vec!["env"])
        );
        assert_eq!(d.unchanged, 1);

        let quiet = diff(&a, &b, DiffOptions { time_threshold: 0.5 });
        assert_eq!(quiet.count(&ChangeKind::Time), 0);
        assert_eq!(quiet.unchanged, 2);
        assert!(diff(&a, &a, DiffOptions::default()).is_empty());
    }
}
