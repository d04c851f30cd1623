//! One entry (and one blocklist record) as scripts see it: the JSON object
//! `ranktune cache show --json` prints and the Python package's
//! `Cache.entries()` (`Cache.blocklist()`) returns. One shape for
//! both, so a script can move between them. Pure: no I/O, no printing.

use crate::{is_stale, Entry, EntryKey, Section};

/// The listing of one entry of `section`, judged stale or not against this
/// machine's environment digest `current`.
///
/// ```
/// use ranktune_cache::{entry_listing, Entry, EntryKey, Section};
/// let key = EntryKey { op: "gemm".into(), runner: "naive".into(),
///                      fingerprint: "f".into(), bucket: ranktune_cache::sizes_bucket(&[vec![8, 512]]) };
/// let entry = Entry { runner_index: 0, tactic: "ikj".into(), time_us: 3.5, candidates: vec![],
///                     checksum: "c".into(), env: "e".into(), created_unix: 0 };
/// let v = entry_listing(Section::Rank(1), &key, &entry, "e");
/// assert_eq!((v["rank"].as_u64(), v["section"].as_str()), (Some(1), Some("rank_1")));
/// assert_eq!(v["stale"], false);
/// ```
pub fn entry_listing(
    section: Section,
    k: &EntryKey,
    e: &Entry,
    current: &str,
) -> serde_json::Value {
    serde_json::json!({
        "rank": section.rank(),
        "section": section.name(),
        "op": k.op,
        "runner": k.runner,
        "fingerprint": k.fingerprint,
        "bucket": k.bucket,
        "tactic": e.tactic,
        "time_us": e.time_us,
        "stale": is_stale(e, current),
        "runner_index": e.runner_index,
        "checksum": e.checksum,
        "env": e.env,
        "created_unix": e.created_unix,
        "candidates": e.candidates,
    })
}

/// The listing of one blocklist record, as `ranktune cache show --json`
/// prints it under `blocklist` and the Python package's
/// `Cache.blocklist()` returns it; `here` says whether it is of this
/// machine's environment digest `current`.
///
/// ```
/// use ranktune_cache::{block_listing, sizes_bucket, BlockKey, BlockKind, Blocked};
/// let key = BlockKey::new("gemm", "tiled", "f", &7.into(), "e", sizes_bucket(&[vec![64]]));
/// let rec = Blocked::new(BlockKind::Timeout, "over 2.0 s", 5, Some(1), "node1");
/// let v = block_listing(&key, &rec, "e");
/// assert_eq!((v["kind"].as_str(), v["tactic"].as_u64(), v["here"].as_bool()), (Some("timeout"), Some(7), Some(true)));
/// ```
pub fn block_listing(
    key: &crate::BlockKey,
    record: &crate::Blocked,
    current: &str,
) -> serde_json::Value {
    serde_json::json!({
        "op": key.op,
        "runner": key.runner,
        "fingerprint": key.fingerprint,
        "tactic": key.tactic(),
        "bucket": key.bucket,
        "env": key.env,
        "here": key.env == current,
        "kind": record.kind.as_str(),
        "message": record.message,
        "when_unix": record.when_unix,
        "rank": record.rank,
        "host": record.host,
    })
}
