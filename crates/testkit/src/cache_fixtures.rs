//! Cache fixtures (feature `cache`): the keys, entries and caches that the
//! cache's and the command's tests build, written once. A test file states
//! only how its entries differ from these, with struct-update syntax:
//!
//! ```
//! use ranktune_cache::{Entry, Section};
//! use ranktune_testkit::cache_fixtures::{entry, in_section, key};
//!
//! let k = key("gemm", &[&[64, 64]]);
//! let e = Entry { time_us: 12.5, ..entry(serde_json::json!(3)) };
//! let cache = in_section(Section::Rank(0), &[(k.clone(), e.clone())]);
//! assert_eq!(cache.get(Section::Rank(0), &k), Some(&e));
//! ```
//!
//! Owns test data only; it never touches a store or the filesystem.

use ranktune_cache::{CacheData, Dim, Entry, EntryKey, Section};

/// The runner of [`key`]'s keys.
pub const RUNNER: &str = "blocked";
/// The fingerprint of [`key`]'s keys.
pub const FINGERPRINT: &str = "f0";
/// When [`entry`]'s and [`tiled_entry`]'s entries were measured.
pub const CREATED_UNIX: u64 = 1_700_000_000;

/// A key of op `op` for `bucket`, runner [`RUNNER`], fingerprint
/// [`FINGERPRINT`].
pub fn key(op: &str, bucket: &[&[u64]]) -> EntryKey {
    EntryKey {
        op: op.into(),
        runner: RUNNER.into(),
        fingerprint: FINGERPRINT.into(),
        bucket: bucket.iter().map(|dims| dims.iter().map(|&d| Dim::size(d)).collect()).collect(),
    }
}

/// An entry of `tactic` with the plainest evidence: runner 0, 1 µs, no
/// candidates, checksum `sum`, environment `e`, measured at
/// [`CREATED_UNIX`].
pub fn entry(tactic: serde_json::Value) -> Entry {
    Entry {
        runner_index: 0,
        tactic,
        time_us: 1.0,
        candidates: vec![],
        checksum: "sum".into(),
        env: "e".into(),
        created_unix: CREATED_UNIX,
    }
}

/// The entry the many-process tests save: runner 1, a structured tactic
/// (`{"tile": [tactic, 8], "order": "ikj"}`), `10 + tactic` µs, environment
/// `env0`.
pub fn tiled_entry(tactic: u64) -> Entry {
    Entry {
        runner_index: 1,
        time_us: 10.0 + tactic as f64,
        env: "env0".into(),
        ..entry(serde_json::json!({"tile": [tactic, 8], "order": "ikj"}))
    }
}

/// A cache holding `items` in `section`.
pub fn in_section(section: Section, items: &[(EntryKey, Entry)]) -> CacheData {
    let mut d = CacheData::default();
    for (k, e) in items {
        d.insert(section, k.clone(), e.clone());
    }
    d
}

/// A cache holding `items`, each in its section.
pub fn cache_of(items: &[(Section, EntryKey, Entry)]) -> CacheData {
    let mut d = CacheData::default();
    for (s, k, e) in items {
        d.insert(*s, k.clone(), e.clone());
    }
    d
}
