//! Reading and writing TensorRT-LLM cache files: ranktune's import/export
//! against the reference's own Python (json + ast.literal_eval / repr +
//! json.dump), on the same generated file, in one run.
//!
//! `cargo bench --bench cache_interop -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, Criterion};
use ranktune_cache::EntryKey;
use ranktune_formats::trtllm::{export_document, format_key, import_bytes, to_json_text};
use serde_json::{json, Map, Value};

const RANKS: u32 = 8;
const ENTRIES: u64 = 1000;

/// A reference-style file: RANKS sections of ENTRIES entries with realistic
/// keys (nested repr fingerprints, 2-4 shapes) and tactics (ints, tuples, strings).
fn reference_doc() -> Vec<u8> {
    let mut doc = Map::new();
    doc.insert(
        "metadata".into(),
        json!({"lib_version": "1.2.0", "creation_timestamp": 1.7e9, "device_name": "NVIDIA H200", "device_capability": [9, 0]}),
    );
    for r in 0..RANKS {
        let mut section = Map::new();
        for i in 0..ENTRIES {
            let m = 1 + (i % 14);
            let key = EntryKey {
                op: format!("trtllm::op_{}", i / 14),
                runner: "FP8BlockScalingGemmRunner".into(),
                fingerprint: format!(
                    "(8, (0, 1, 2, 3, 4, 5, 6, 7), 'RESIDUAL_RMS_NORM', 1e-06, True, {r})"
                ),
                bucket: ranktune_cache::sizes_bucket(&[
                    vec![1 << m, 4096],
                    vec![4096, 7168],
                    vec![7168],
                ]),
            };
            let tactic = match i % 3 {
                0 => format!("{}", i % 97),
                1 => format!("(({}, 256), (1, 2), {})", 64 << (i % 3), i % 5),
                _ => format!("'bmm_E4m3_E4m3E4m3_Fp32_t128x8x128_s6_et64x8_m64x8x32_cga1x1x1_{i}'"),
            };
            section.insert(
                format_key(&key),
                json!({"runner_id": i % 3, "tactic": tactic, "min_time": 0.01 + i as f64 * 1e-5}),
            );
        }
        doc.insert(format!("rank_{r}"), Value::Object(section));
    }
    serde_json::to_vec_pretty(&Value::Object(doc)).unwrap_or_default()
}

fn python_baseline(bytes: &[u8]) {
    let dir = std::env::temp_dir().join(format!("ranktune-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("trtllm.json");
    if std::fs::write(&file, bytes).is_err() {
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/trtllm_reference.py");
    match std::process::Command::new("python3").arg(script).arg(&file).arg("5").output() {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            let mut it = text.split_whitespace().filter_map(|t| t.parse::<f64>().ok());
            if let (Some(l), Some(s)) = (it.next(), it.next()) {
                println!(
                    "reference python (median of 5): load {:.1} ms, save {:.1} ms",
                    l * 1e3,
                    s * 1e3
                );
            }
        }
        _ => println!("reference python baseline unavailable (python3 missing?)"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn bench(c: &mut Criterion) {
    let bytes = reference_doc();
    println!("file: {} ranks x {} entries, {:.1} MB", RANKS, ENTRIES, bytes.len() as f64 / 1e6);
    python_baseline(&bytes);
    let data = import_bytes(&bytes).map(|i| i.data).unwrap_or_default();
    assert_eq!(data.len(), (RANKS as usize) * ENTRIES as usize);
    let mut g = c.benchmark_group("trtllm");
    g.sample_size(10);
    g.bench_function("import (parse keys + tactics)", |b| {
        b.iter(|| import_bytes(&bytes).map(|i| i.data.len()))
    });
    g.bench_function("export (format + JSON text)", |b| {
        b.iter(|| to_json_text(&export_document(&data).1).len())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
