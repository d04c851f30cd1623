//! Property tests: any cache content survives serialization unchanged, in
//! one canonical byte form, and through a FileStore save and load.

use proptest::prelude::*;
use ranktune_cache::{
    cache_to_bytes, parse_cache, CacheData, Candidate, Entry, EntryKey, FileStore, Identity,
    Section, Stats, Store,
};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_:]{1,12}",
        any::<String>().prop_filter("non-empty", |s| !s.is_empty()),
        Just("quote \" back\\slash \n tab\t ü €".to_string()),
    ]
}

fn time() -> impl Strategy<Value = f64> {
    prop_oneof![0.0..1e6f64, Just(0.0), Just(f64::MAX), Just(5e-324)]
}

fn tactic() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        (-1e300..1e300f64).prop_map(serde_json::Value::from),
        any::<String>().prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn candidate() -> impl Strategy<Value = Candidate> {
    (
        text(),
        any::<u32>(),
        tactic(),
        prop::option::of((time(), time(), time(), -1e3..1e3f64, any::<u32>())),
        prop::option::of(text()),
    )
        .prop_map(|(runner, runner_index, tactic, stats, error)| Candidate {
            runner,
            runner_index,
            tactic,
            stats: stats.map(|(min_us, median_us, p90_us, spread, samples)| Stats {
                min_us,
                median_us,
                p90_us,
                spread,
                samples,
            }),
            error,
        })
}

/// Every kind of dim a key may hold: sizes, negative integers, finite floats.
fn dim() -> impl Strategy<Value = ranktune_cache::Dim> {
    prop_oneof![
        any::<u64>().prop_map(ranktune_cache::Dim::size),
        (i64::MIN..0).prop_map(ranktune_cache::Dim::from),
        any::<f64>().prop_filter_map("finite", ranktune_cache::Dim::float),
    ]
}

fn entry() -> impl Strategy<Value = (EntryKey, Entry)> {
    (
        (
            text(),
            text(),
            any::<String>(),
            prop::collection::vec(prop::collection::vec(dim(), 0..4), 0..4),
        ),
        (
            any::<u32>(),
            tactic(),
            time(),
            prop::collection::vec(candidate(), 0..3),
            any::<String>(),
            any::<String>(),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (op, runner, fingerprint, bucket),
                (runner_index, tactic, time_us, candidates, checksum, env, created_unix),
            )| {
                (
                    EntryKey { op, runner, fingerprint, bucket },
                    Entry {
                        runner_index,
                        tactic,
                        time_us,
                        candidates,
                        checksum,
                        env,
                        created_unix,
                    },
                )
            },
        )
}

fn cache() -> impl Strategy<Value = CacheData> {
    let section = prop_oneof![
        Just(Section::Shared),
        (0u32..5).prop_map(Section::Rank),
        any::<u32>().prop_map(Section::Rank)
    ];
    (
        prop::collection::vec((section, entry()), 0..12),
        (any::<String>(), any::<String>(), any::<u64>(), any::<u64>()),
        prop::collection::btree_map(
            any::<String>(),
            (text(), text(), text(), text(), any::<u32>()),
            0..3,
        ),
    )
        .prop_map(|(entries, (lib_version, host, created_unix, updated_unix), envs)| {
            let mut d = CacheData::default();
            for (s, (k, e)) in entries {
                d.insert(s, k, e);
            }
            d.metadata.lib_version = lib_version;
            d.metadata.host = host;
            d.metadata.created_unix = created_unix;
            d.metadata.updated_unix = updated_unix;
            for (digest, (a, b, c, e, cores)) in envs {
                d.metadata.environments.insert(
                    digest,
                    Identity {
                        lib_version: a,
                        device_kind: b,
                        device_name: c,
                        capability: e,
                        cores,
                    },
                );
            }
            d
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn serialization_round_trips_in_one_canonical_form(data in cache()) {
        let bytes = cache_to_bytes(&data);
        let back = parse_cache(&bytes).unwrap();
        prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        prop_assert_eq!(&back.data, &data);
        prop_assert_eq!(cache_to_bytes(&back.data), bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn file_store_round_trips(data in cache()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let store = FileStore::new(&path);
        store.save(&data).unwrap();
        let loaded = store.load().unwrap();
        prop_assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        prop_assert_eq!(&loaded.data.sections, &data.sections);
        for (digest, id) in &data.metadata.environments {
            prop_assert_eq!(loaded.data.metadata.environments.get(digest), Some(id));
        }
        // Saving the same content again leaves the file byte for byte.
        let before = std::fs::read(&path).unwrap_or_default();
        store.save(&data).unwrap();
        prop_assert_eq!(std::fs::read(&path).unwrap_or_default(), before);
    }
}
