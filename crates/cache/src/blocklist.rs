//! The blocklist: tactics known to fail on an environment, kept in the
//! cache beside the entries so that later tunes skip them.
//!
//! A record is keyed by ([`BlockKey`]) the op, the runner and its
//! fingerprint, the tactic, the environment digest that saw it fail, and
//! the bucket it failed at; it says why ([`BlockKind`]: the candidate
//! crashed its worker, ran past its time limit, ran out of memory, or a
//! cached tactic failed its validation), the failure's message, when, and
//! which rank on which host.
//!
//! **Per bucket, and upwards.** A tactic that crashes at M=1024 may work at
//! M=1 (an out-of-bounds tile, a workspace that grows with the shape), so a
//! record does not block the tactic everywhere: it blocks it at the bucket it
//! failed at and at every bucket at least as large in every dimension
//! ([`Blocklist::blocks`]). Smaller buckets still try it. Dimensions that
//! are not sizes (TensorRT-LLM's `-1`, floats) must be equal.
//!
//! **Merging.** A record is a last-writer-wins value per key: merging two
//! blocklists keeps every key of both, and under one key the newer record
//! (`when_unix`; on a tie, the one applied last). A retried tactic that
//! now works is *cleared*: an update carries the clear with its time, and
//! applying it removes a stored record that is not newer than it. Clears
//! are not kept in a stored cache (applying one removes, it does not add).
//!
//! This module owns the records, their JSON form and the two rules above;
//! it does no I/O and never decides what failed (the tuner does).

use crate::dim::Dim;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Why a tactic is blocked.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlockKind {
    /// It killed the process measuring it (a signal: SIGSEGV, SIGABRT, …).
    Crash,
    /// It ran past its time limit.
    Timeout,
    /// It ran past its memory limit (or the OOM killer took it).
    Memory,
    /// A cached tactic failed its op's validation on first use.
    Validation,
    /// A kind written by a newer ranktune, kept as it is.
    Other(String),
}

impl BlockKind {
    /// The kind as the file writes it: `crash`, `timeout`, `memory`,
    /// `validation`, or a newer version's name.
    pub fn as_str(&self) -> &str {
        match self {
            BlockKind::Crash => "crash",
            BlockKind::Timeout => "timeout",
            BlockKind::Memory => "memory",
            BlockKind::Validation => "validation",
            BlockKind::Other(s) => s,
        }
    }

    /// The kind a file names (any name: unknown ones are [`BlockKind::Other`]).
    pub fn parse(name: &str) -> BlockKind {
        match name {
            "crash" => BlockKind::Crash,
            "timeout" => BlockKind::Timeout,
            "memory" => BlockKind::Memory,
            "validation" => BlockKind::Validation,
            other => BlockKind::Other(other.to_string()),
        }
    }
}

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for BlockKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for BlockKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(BlockKind::parse(&name))
    }
}

/// What a blocklist record is about: which tactic, of which runner, failed
/// where (environment digest and bucket).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockKey {
    /// The op, e.g. `gemm`.
    pub op: String,
    /// The runner's name.
    pub runner: String,
    /// The runner's fingerprint.
    pub fingerprint: String,
    /// The tactic, as compact JSON text (its canonical form: objects' keys
    /// sorted); see [`BlockKey::tactic_text`].
    tactic: String,
    /// Digest of the environment it failed in (see the file's metadata).
    pub env: String,
    /// The bucket it failed at.
    pub bucket: Vec<Vec<Dim>>,
}

impl BlockKey {
    /// The key of `tactic` of `runner` (fingerprint `fingerprint`) of
    /// `op`, failed at `bucket` in environment `env`.
    pub fn new(
        op: impl Into<String>,
        runner: impl Into<String>,
        fingerprint: impl Into<String>,
        tactic: &serde_json::Value,
        env: impl Into<String>,
        bucket: Vec<Vec<Dim>>,
    ) -> BlockKey {
        BlockKey {
            op: op.into(),
            runner: runner.into(),
            fingerprint: fingerprint.into(),
            tactic: tactic_text(tactic),
            env: env.into(),
            bucket,
        }
    }

    /// The tactic's compact JSON text (objects' keys sorted): how two
    /// tactics are compared.
    pub fn tactic_text(&self) -> &str {
        &self.tactic
    }

    /// The tactic as a value.
    pub fn tactic(&self) -> serde_json::Value {
        serde_json::from_str(&self.tactic).unwrap_or(serde_json::Value::Null)
    }
}

/// The canonical text of a tactic: compact JSON, objects' keys sorted
/// (serde_json's map is sorted), so equal tactics have equal text.
pub fn tactic_text(tactic: &serde_json::Value) -> String {
    tactic.to_string()
}

impl fmt::Display for BlockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}@{} tactic {} at {} (env {})",
            self.op,
            self.runner,
            self.fingerprint,
            self.tactic,
            crate::label::bucket_label(&self.bucket),
            self.env
        )
    }
}

/// One blocklist record: why and when a tactic failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocked {
    /// Why.
    pub kind: BlockKind,
    /// The failure's message (the signal, the limit, the mismatch).
    pub message: String,
    /// When, seconds since the Unix epoch.
    pub when_unix: u64,
    /// The rank that saw it, when known.
    pub rank: Option<u32>,
    /// The host that saw it (informational).
    pub host: String,
    /// Fields a newer ranktune wrote, kept through rewrites (compact JSON).
    pub(crate) extra: BTreeMap<String, serde_json::Value>,
}

impl Blocked {
    /// A record of a `kind` failure with `message`, seen now-ish
    /// (`when_unix`) by `rank` on `host`.
    pub fn new(
        kind: BlockKind,
        message: impl Into<String>,
        when_unix: u64,
        rank: Option<u32>,
        host: impl Into<String>,
    ) -> Blocked {
        Blocked {
            kind,
            message: message.into(),
            when_unix,
            rank,
            host: host.into(),
            extra: BTreeMap::new(),
        }
    }
}

/// The blocklist of a cache: records by key, and (in an update only) the
/// records it clears. See the module docs for the rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Blocklist {
    records: BTreeMap<BlockKey, Blocked>,
    cleared: BTreeMap<BlockKey, u64>,
}

impl Blocklist {
    /// True when there are no records and no clears.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.cleared.is_empty()
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Every record, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&BlockKey, &Blocked)> {
        self.records.iter()
    }

    /// The record under `key`.
    pub fn get(&self, key: &BlockKey) -> Option<&Blocked> {
        self.records.get(key)
    }

    /// The clears this update carries, with their times.
    pub fn cleared(&self) -> impl Iterator<Item = (&BlockKey, u64)> {
        self.cleared.iter().map(|(k, t)| (k, *t))
    }

    /// Records (or replaces, when newer or as new) the record under `key`;
    /// a clear of the same key in this update is dropped. True when
    /// anything changed.
    pub fn insert(&mut self, key: BlockKey, record: Blocked) -> bool {
        self.cleared.remove(&key);
        match self.records.get(&key) {
            Some(old) if old.when_unix > record.when_unix || *old == record => false,
            _ => {
                self.records.insert(key, record);
                true
            }
        }
    }

    /// Clears `key` as of `when_unix`: this update's record under it is
    /// dropped, and applying the update removes a stored record that is
    /// not newer.
    pub fn clear(&mut self, key: BlockKey, when_unix: u64) {
        if self.records.get(&key).is_some_and(|r| r.when_unix <= when_unix) {
            self.records.remove(&key);
        }
        let slot = self.cleared.entry(key).or_insert(when_unix);
        *slot = (*slot).max(when_unix);
    }

    /// Adds a newer update's records and clears to this update's (both
    /// kept: what a failed save puts back before the next one).
    pub fn extend(&mut self, newer: Blocklist) {
        for (key, when) in newer.cleared {
            self.clear(key, when);
        }
        for (key, record) in newer.records {
            self.insert(key, record);
        }
    }

    /// Removes every record `pred` picks; returns how many.
    pub fn remove_where(&mut self, pred: impl Fn(&BlockKey, &Blocked) -> bool) -> usize {
        let before = self.records.len();
        self.records.retain(|k, r| !pred(k, r));
        before - self.records.len()
    }

    /// Applies `src` over `self`, as a save over what is stored: its
    /// records are added, or replace ours when not older; its clears remove
    /// our records that are not newer. True when anything changed.
    pub fn apply(&mut self, src: Blocklist) -> bool {
        let mut changed = false;
        for (key, when) in src.cleared {
            if self.records.get(&key).is_some_and(|r| r.when_unix <= when) {
                self.records.remove(&key);
                changed = true;
            }
        }
        for (key, record) in src.records {
            match self.records.get(&key) {
                Some(old) if old.when_unix > record.when_unix || *old == record => {}
                _ => {
                    self.records.insert(key, record);
                    changed = true;
                }
            }
        }
        changed
    }

    /// The records that block tactics in environment `env` at `bucket`
    /// (sizes): those of `env` (every environment when `None`) whose
    /// bucket is `bucket` or smaller in every dimension (see the module
    /// docs), for `op`.
    pub fn blocking<'a>(
        &'a self,
        op: &'a str,
        env: Option<&'a str>,
        bucket: &'a [Vec<u64>],
    ) -> impl Iterator<Item = (&'a BlockKey, &'a Blocked)> + 'a {
        self.records.iter().filter(move |(k, _)| {
            k.op == op && env.is_none_or(|e| k.env == e) && covers(&k.bucket, bucket)
        })
    }

    /// True when a record blocks `tactic` of `runner`@`fingerprint` of
    /// `op` at `bucket` in `env` (every environment when `None`).
    pub fn blocks(
        &self,
        op: &str,
        runner: &str,
        fingerprint: &str,
        tactic: &serde_json::Value,
        env: Option<&str>,
        bucket: &[Vec<u64>],
    ) -> bool {
        let text = tactic_text(tactic);
        self.blocking(op, env, bucket)
            .any(|(k, _)| k.runner == runner && k.fingerprint == fingerprint && k.tactic == text)
    }
}

/// True when a record at `failed` covers bucket `at`: the same number of
/// inputs and dims, every size of `at` at least the one that failed, and
/// every other dim (a negative integer, a float) equal.
pub fn covers(failed: &[Vec<Dim>], at: &[Vec<u64>]) -> bool {
    failed.len() == at.len()
        && failed.iter().zip(at).all(|(f, a)| {
            f.len() == a.len()
                && f.iter().zip(a).all(|(fd, &ad)| match fd.as_u64() {
                    Some(size) => ad >= size && !fd.is_float(),
                    None => false,
                })
        })
}

// ------------------------------------------------------------ JSON form

/// A record as one line of the file: its key's fields, then its own.
#[derive(Serialize)]
struct RecordOut<'a> {
    op: &'a str,
    runner: &'a str,
    fingerprint: &'a str,
    tactic: serde_json::Value,
    bucket: &'a [Vec<Dim>],
    env: &'a str,
    kind: &'a BlockKind,
    message: &'a str,
    when_unix: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    rank: Option<u32>,
    host: &'a str,
    #[serde(flatten)]
    extra: &'a BTreeMap<String, serde_json::Value>,
}

/// A clear as one line of an update.
#[derive(Serialize, Deserialize)]
struct ClearLine {
    op: String,
    runner: String,
    fingerprint: String,
    tactic: serde_json::Value,
    bucket: Vec<Vec<Dim>>,
    env: String,
    cleared_unix: u64,
}

/// Appends one record as compact JSON.
pub(crate) fn write_record(key: &BlockKey, r: &Blocked, out: &mut Vec<u8>) {
    let line = RecordOut {
        op: &key.op,
        runner: &key.runner,
        fingerprint: &key.fingerprint,
        tactic: key.tactic(),
        bucket: &key.bucket,
        env: &key.env,
        kind: &r.kind,
        message: &r.message,
        when_unix: r.when_unix,
        rank: r.rank,
        host: &r.host,
        extra: &r.extra,
    };
    // Writing into a Vec cannot fail; our types serialize infallibly.
    let _ = serde_json::to_writer(&mut *out, &line);
}

/// Appends one clear as compact JSON.
pub(crate) fn write_clear(key: &BlockKey, when: u64, out: &mut Vec<u8>) {
    let line = ClearLine {
        op: key.op.clone(),
        runner: key.runner.clone(),
        fingerprint: key.fingerprint.clone(),
        tactic: key.tactic(),
        bucket: key.bucket.clone(),
        env: key.env.clone(),
        cleared_unix: when,
    };
    let _ = serde_json::to_writer(&mut *out, &line);
}

/// One record of the file's `blocklist` array; `Err` says what is wrong.
pub(crate) fn read_record(text: &str) -> Result<(BlockKey, Blocked), String> {
    let mut map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text).map_err(|e| format!("not a JSON object ({e})"))?;
    let op: String = take(&mut map, "op", true)?.unwrap_or_default();
    let runner: String = take(&mut map, "runner", true)?.unwrap_or_default();
    if op.is_empty() || runner.is_empty() {
        return Err("op and runner must not be empty".into());
    }
    let fingerprint: String = take(&mut map, "fingerprint", true)?.unwrap_or_default();
    let tactic: serde_json::Value = take(&mut map, "tactic", true)?.unwrap_or_default();
    let bucket: Vec<Vec<Dim>> = take(&mut map, "bucket", true)?.unwrap_or_default();
    let env: String = take(&mut map, "env", true)?.unwrap_or_default();
    let kind: BlockKind = take(&mut map, "kind", true)?.unwrap_or(BlockKind::Crash);
    let when_unix: u64 = take(&mut map, "when_unix", true)?.unwrap_or(0);
    let message: String = take(&mut map, "message", false)?.unwrap_or_default();
    let rank: Option<u32> = take(&mut map, "rank", false)?;
    let host: String = take(&mut map, "host", false)?.unwrap_or_default();
    let key = BlockKey::new(op, runner, fingerprint, &tactic, env, bucket);
    let extra = map.into_iter().collect();
    Ok((key, Blocked { kind, message, when_unix, rank, host, extra }))
}

/// Takes field `name` out of `map`, typed; a missing `required` field and
/// a value of the wrong type are errors naming the field.
fn take<T: serde::de::DeserializeOwned>(
    map: &mut serde_json::Map<String, serde_json::Value>,
    name: &str,
    required: bool,
) -> Result<Option<T>, String> {
    match map.remove(name) {
        Some(v) => serde_json::from_value(v).map(Some).map_err(|e| format!("{name}: {e}")),
        None if required => Err(format!("missing field `{name}`")),
        None => Ok(None),
    }
}

/// One clear of an update's `blocklist_cleared` array.
pub(crate) fn read_clear(text: &str) -> Result<(BlockKey, u64), String> {
    let c: ClearLine = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok((BlockKey::new(c.op, c.runner, c.fingerprint, &c.tactic, c.env, c.bucket), c.cleared_unix))
}

/// Reads the `blocklist` (`cleared` false) or `blocklist_cleared` array
/// text into `into`; a bad element is skipped with a warning naming it.
pub(crate) fn read_array(
    text: &str,
    cleared: bool,
    into: &mut Blocklist,
    warnings: &mut Vec<String>,
) {
    let name = if cleared { "blocklist_cleared" } else { "blocklist" };
    let items: Vec<Box<serde_json::value::RawValue>> = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            warnings.push(format!("{name} ignored: expected an array of records ({e})"));
            return;
        }
    };
    for (i, raw) in items.iter().enumerate() {
        if cleared {
            match read_clear(raw.get()) {
                Ok((k, t)) => into.clear(k, t),
                Err(e) => warnings.push(format!("bad {name}[{i}] skipped: {e}")),
            }
        } else {
            match read_record(raw.get()) {
                Ok((k, r)) => {
                    if into.records.contains_key(&k) {
                        warnings.push(format!(
                            "duplicate {name} record {}: kept the newer one",
                            crate::label::escape_control(&k.to_string())
                        ));
                    }
                    into.insert(k, r);
                }
                Err(e) => warnings.push(
                    crate::label::escape_control(&format!("bad {name}[{i}] skipped: {e}"))
                        .into_owned(),
                ),
            }
        }
    }
}

/// Writes the blocklist as the file's top-level fields: `"blocklist"`
/// (one record per line) and, for an update that clears records,
/// `"blocklist_cleared"`. Nothing for an empty blocklist.
pub(crate) fn write_fields(b: &Blocklist, out: &mut Vec<u8>) {
    if !b.records.is_empty() {
        out.extend_from_slice(b",\n  \"blocklist\": [");
        for (i, (k, r)) in b.records.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b"\n    " } else { b",\n    " });
            write_record(k, r, out);
        }
        out.extend_from_slice(b"\n  ]");
    }
    if !b.cleared.is_empty() {
        out.extend_from_slice(b",\n  \"blocklist_cleared\": [");
        for (i, (k, t)) in b.cleared.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b"\n    " } else { b",\n    " });
            write_clear(k, *t, out);
        }
        out.extend_from_slice(b"\n  ]");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizes_bucket;

    fn key(tactic: i64, bucket: &[Vec<u64>]) -> BlockKey {
        BlockKey::new("gemm", "tiled", "f", &tactic.into(), "e", sizes_bucket(bucket))
    }

    fn rec(when: u64, msg: &str) -> Blocked {
        Blocked::new(BlockKind::Crash, msg, when, Some(0), "h")
    }

    #[test]
    fn a_record_blocks_its_bucket_and_larger_ones_only() {
        let mut b = Blocklist::default();
        b.insert(key(3, &[vec![1024, 64]]), rec(1, "SIGSEGV"));
        let t = serde_json::json!(3);
        let at = |m: u64, k: u64| b.blocks("gemm", "tiled", "f", &t, Some("e"), &[vec![m, k]]);
        assert!(at(1024, 64));
        assert!(at(2048, 64));
        assert!(!at(512, 64), "a smaller bucket still tries it");
        assert!(!at(2048, 32), "smaller in one dim");
        assert!(!b.blocks("gemm", "tiled", "f", &t, Some("other"), &[vec![1024, 64]]));
        assert!(b.blocks("gemm", "tiled", "f", &t, None, &[vec![1024, 64]]));
        assert!(!b.blocks("gemm", "tiled", "f", &4.into(), Some("e"), &[vec![1024, 64]]));
        assert!(!b.blocks("gemm", "tiled", "g", &t, Some("e"), &[vec![1024, 64]]));
        assert!(!b.blocks("gemm", "tiled", "f", &t, Some("e"), &[vec![1024, 64, 1]]));
    }

    #[test]
    fn non_size_dims_must_be_equal() {
        let failed = vec![vec![Dim::from(-1i64), Dim::size(4)]];
        assert!(!covers(&failed, &[vec![5, 4]]));
        assert!(covers(&sizes_bucket(&[vec![2]]), &[vec![2]]));
        assert!(!covers(&[vec![Dim::float(2.0).unwrap()]], &[vec![2]]));
    }

    #[test]
    fn newest_record_wins_and_clears_remove_only_older_ones() {
        let k = key(1, &[vec![8]]);
        let mut stored = Blocklist::default();
        stored.insert(k.clone(), rec(10, "old"));
        let mut older = Blocklist::default();
        older.insert(k.clone(), rec(5, "older"));
        assert!(!stored.apply(older), "an older record does not replace a newer one");
        assert_eq!(stored.get(&k).unwrap().message, "old");
        let mut newer = Blocklist::default();
        newer.insert(k.clone(), rec(11, "new"));
        newer.insert(key(2, &[vec![8]]), rec(1, "other"));
        assert!(stored.apply(newer));
        assert_eq!((stored.len(), stored.get(&k).unwrap().message.as_str()), (2, "new"));
        let mut early_clear = Blocklist::default();
        early_clear.clear(k.clone(), 9);
        assert!(!stored.apply(early_clear), "a clear older than the record leaves it");
        let mut clear = Blocklist::default();
        clear.clear(k.clone(), 11);
        assert!(stored.apply(clear));
        assert!(stored.get(&k).is_none());
        assert_eq!(stored.cleared().count(), 0, "a stored blocklist keeps no clears");
    }

    #[test]
    fn records_round_trip_with_a_newer_versions_fields() {
        let text = r#"[{"op":"gemm","runner":"tiled","fingerprint":"f","tactic":{"b":1,"a":2},"bucket":[[8]],"env":"e","kind":"hang-forever","message":"m","when_unix":3,"host":"h","numa":[1,2]}]"#;
        let mut b = Blocklist::default();
        let mut w = Vec::new();
        read_array(text, false, &mut b, &mut w);
        assert!(w.is_empty(), "{w:?}");
        let (k, r) = b.iter().next().unwrap();
        assert_eq!(k.tactic_text(), r#"{"a":2,"b":1}"#);
        assert_eq!(r.kind, BlockKind::Other("hang-forever".into()));
        let mut out = Vec::new();
        write_record(k, r, &mut out);
        let line = String::from_utf8(out).unwrap();
        assert_eq!(
            line,
            r#"{"op":"gemm","runner":"tiled","fingerprint":"f","tactic":{"a":2,"b":1},"bucket":[[8]],"env":"e","kind":"hang-forever","message":"m","when_unix":3,"host":"h","numa":[1,2]}"#
        );
    }

    #[test]
    fn bad_records_are_skipped_with_a_warning() {
        let text = r#"[{"op":"gemm"}, {"op":"","runner":"r","fingerprint":"f","tactic":1,"bucket":[],"env":"e","kind":"crash","when_unix":1}, 7]"#;
        let mut b = Blocklist::default();
        let mut w = Vec::new();
        read_array(text, false, &mut b, &mut w);
        assert_eq!((b.len(), w.len()), (0, 3), "{w:?}");
        read_array("{}", false, &mut b, &mut w);
        assert!(w[3].contains("expected an array"), "{w:?}");
    }
}
