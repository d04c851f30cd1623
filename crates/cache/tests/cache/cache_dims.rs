//! Bucket dims beyond sizes: `-1`, `0` and floats (what TensorRT-LLM's keys
//! hold) are saved, merged and loaded exactly, and files written before
//! dims could be anything but sizes load and save as they did.

use ranktune_cache::{sizes_bucket, Dim, EntryKey, FileStore, Section, Store};
use ranktune_testkit::cache_fixtures::{self as fixtures, in_section as update};

fn key(bucket: Vec<Vec<Dim>>) -> EntryKey {
    EntryKey { bucket, ..fixtures::key("gemm", &[]) }
}

fn odd_dims() -> Vec<Vec<Dim>> {
    vec![
        vec![Dim::from(-1i64), Dim::size(0), Dim::size(4096)],
        vec![Dim::float(1.5).unwrap(), Dim::float(0.1).unwrap(), Dim::float(1.0).unwrap()],
        vec![Dim::size(u64::MAX), Dim::from(i64::MIN)],
    ]
}

#[test]
fn odd_dims_save_merge_and_load_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("c.json"));
    let odd = key(odd_dims());
    // `1` and `1.0` are different keys.
    let int_one = key(vec![vec![Dim::size(1)]]);
    let float_one = key(vec![vec![Dim::float(1.0).unwrap()]]);
    let e = fixtures::entry(serde_json::json!(1));
    store
        .save(&update(
            Section::Rank(0),
            &[
                (odd.clone(), e.clone()),
                (int_one.clone(), e.clone()),
                (float_one.clone(), e.clone()),
            ],
        ))
        .unwrap();
    // A second save folds the file's entries as text: they must survive it.
    store.save(&update(Section::Rank(1), &[(odd.clone(), e.clone())])).unwrap();
    let loaded = store.load().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.data.len(), 4);
    for section in [Section::Rank(0), Section::Rank(1)] {
        let (_, k, _) = loaded.data.iter().find(|(s, k, _)| *s == section && **k == odd).unwrap();
        let bits: Vec<Option<u64>> =
            k.bucket[1].iter().map(|d| d.as_f64().map(f64::to_bits)).collect();
        assert_eq!(bits, [Some(1.5f64.to_bits()), Some(0.1f64.to_bits()), Some(1.0f64.to_bits())]);
        assert_eq!(k.bucket[0][0].as_i64(), Some(-1));
    }
    assert!(loaded.data.get(Section::Rank(0), &int_one).is_some());
    assert!(loaded.data.get(Section::Rank(0), &float_one).is_some());
    let text = std::fs::read_to_string(dir.path().join("c.json")).unwrap();
    assert!(
        text.contains(
            r#""bucket":[[-1,0,4096],[1.5,0.1,1.0],[18446744073709551615,-9223372036854775808]]"#
        ),
        "{text}"
    );
}

#[test]
fn a_file_of_sizes_reads_and_writes_as_before() {
    // The bytes a build whose dims were only sizes wrote for this entry.
    let old = "{\n  \"format\": \"ranktune-cache\",\n  \"version\": \"1.7\",\n  \"metadata\": {\n    \"lib_version\": \"0.1.0\",\n    \"host\": \"h\",\n    \"created_unix\": 1,\n    \"updated_unix\": 1,\n    \"environments\": {}\n  },\n  \"rank_0\": [\n    {\"op\":\"gemm\",\"runner\":\"blocked\",\"fingerprint\":\"f0\",\"bucket\":[[8,64],[]],\"runner_index\":0,\"tactic\":1,\"time_us\":1.0,\"checksum\":\"sum\",\"env\":\"e\",\"created_unix\":1700000000,\"candidates\":[]}\n  ]\n}\n";
    let parsed = ranktune_cache::parse_cache(old.as_bytes()).unwrap();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let k = key(sizes_bucket(&[vec![8, 64], vec![]]));
    assert!(parsed.data.get(Section::Rank(0), &k).is_some());
    let again = ranktune_cache::cache_to_bytes(&parsed.data);
    assert_eq!(String::from_utf8(again).unwrap(), old);
    assert_eq!(ranktune_cache::bucket_sizes(&k.bucket), Some(vec![vec![8, 64], vec![]]));
}
