//! `trace merge` on generated jobs: valid JSON, one process group per rank
//! with no pid collisions, names and sort order by rank, thread names kept,
//! flows kept per rank, absolute and first-step clocks, gzip in and out,
//! rank detection and its errors.
use ranktune_testkit::synth::{self, JobSpec, Shape};
use ranktune_testkit::Cli;
use ranktune_trace_analyze::{self as analyze, Align, MergeOptions};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

fn bin() -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_ranktune"))
}

fn load(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap();
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut out).unwrap();
        out
    } else {
        bytes
    };
    serde_json::from_slice(&bytes).expect("merged output is valid JSON")
}

/// pid → rank, from the process_name events ("rank R · pid P ...").
fn pid_ranks(doc: &Value) -> HashMap<u64, u32> {
    let mut m = HashMap::new();
    for e in doc["traceEvents"].as_array().unwrap() {
        if e["ph"] == "M" && e["name"] == "process_name" {
            let name = e["args"]["name"].as_str().unwrap();
            let rank: u32 =
                name.strip_prefix("rank ").unwrap().split(' ').next().unwrap().parse().unwrap();
            assert!(name.contains(" · pid "), "{name}");
            let pid = e["pid"].as_u64().unwrap();
            assert!(m.insert(pid, rank).is_none(), "pid {pid} named twice");
        }
    }
    m
}

fn kineto_job(dir: &Path, skew: u64) -> Vec<std::path::PathBuf> {
    let spec = JobSpec {
        ranks: 4,
        steps: 3,
        ops_per_step: 6,
        straggler: Some((1, 0.5)),
        shape: Shape::Kineto,
        base_skew_ns: skew,
        ..JobSpec::default()
    };
    synth::write_job(&spec, dir).unwrap()
}

#[test]
fn kineto_ranks_get_their_own_process_groups() {
    let dir = tempfile::tempdir().unwrap();
    let files = kineto_job(dir.path(), 0);
    let out = dir.path().join("merged.json");
    let o = bin().args(["trace", "merge"]).arg(dir.path()).arg("-o").arg(&out).run();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = load(&out);
    let ranks = pid_ranks(&doc);
    let events = doc["traceEvents"].as_array().unwrap();
    // Every event's pid is named, and belongs to exactly one rank.
    let mut per_rank_pids: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
    for e in events {
        let pid = e["pid"].as_u64().expect("numeric pid after merge");
        let rank = *ranks.get(&pid).expect("every pid has a process_name");
        per_rank_pids.entry(rank).or_default().insert(pid);
    }
    assert_eq!(per_rank_pids.len(), 4);
    // Kineto: OS pid, GPU pid 0, "Spans", "Traces", "" → 5 processes per rank.
    for pids in per_rank_pids.values() {
        assert_eq!(pids.len(), 5, "{pids:?}");
    }
    // Original pid and name kept in the process name.
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"rank 2 · pid 4034 · python3"), "{names:?}");
    assert!(names.contains(&"rank 0 · pid Spans · Spans"), "{names:?}");
    // Sort index orders ranks.
    let mut sorts: Vec<(i64, u32)> = events
        .iter()
        .filter(|e| e["name"] == "process_sort_index")
        .map(|e| (e["args"]["sort_index"].as_i64().unwrap(), ranks[&e["pid"].as_u64().unwrap()]))
        .collect();
    sorts.sort();
    assert!(sorts.windows(2).all(|w| w[0].1 <= w[1].1));
    // Thread names kept, per rank.
    let threads = events.iter().filter(|e| e["name"] == "thread_name").count();
    assert_eq!(threads, 8);
    // Flows: every id has one start and one finish, on one rank.
    let mut flows: HashMap<u64, Vec<(String, u32)>> = HashMap::new();
    for e in events.iter().filter(|e| e["ph"] == "s" || e["ph"] == "f") {
        let id = e["id"].as_u64().unwrap();
        let rank = ranks[&e["pid"].as_u64().unwrap()];
        flows.entry(id).or_default().push((e["ph"].as_str().unwrap().into(), rank));
    }
    assert_eq!(flows.len(), 4 * 3 * 6);
    for (id, v) in &flows {
        assert_eq!(v.len(), 2, "flow {id}: {v:?}");
        assert_eq!(v[0].1, v[1].1, "flow {id} joins two ranks");
    }
    // Every input event is there (minus the dropped process metadata, plus ours).
    let input_events: usize =
        files.iter().map(|f| load(f)["traceEvents"].as_array().unwrap().len()).sum();
    let dropped = 4 * 5; // process_name ×3 + process_sort_index ×2 per rank
    let added = 4 * 5 * 2;
    assert_eq!(events.len(), input_events - dropped + added);
    assert_eq!(doc["baseTimeNanoseconds"], 1_700_000_000_000_000_000u64);
    assert_eq!(doc["ranktuneMerge"]["ranks"].as_array().unwrap().len(), 4);
}

fn first_steps(doc: &Value) -> BTreeMap<u32, f64> {
    let ranks = pid_ranks(doc);
    let mut m = BTreeMap::new();
    for e in doc["traceEvents"].as_array().unwrap() {
        if e["name"].as_str().is_some_and(|n| n.starts_with("ProfilerStep#")) {
            let r = ranks[&e["pid"].as_u64().unwrap()];
            let ts = e["ts"].as_f64().unwrap();
            let v = m.entry(r).or_insert(ts);
            *v = v.min(ts);
        }
    }
    m
}

#[test]
fn clocks_absolute_and_first_step() {
    let dir = tempfile::tempdir().unwrap();
    // Each rank's base is 1 ms later than the previous one's.
    kineto_job(dir.path(), 1_000_000);
    let res = analyze::resolve(&[dir.path().display().to_string()], &[]).unwrap();
    let out = dir.path().join("abs.json");
    let rep = analyze::merge(&res.inputs, &out, &MergeOptions::default()).unwrap();
    assert_eq!(rep.base_ns, 1_700_000_000_000_000_000);
    let doc = load(&out);
    let f = first_steps(&doc);
    // In each file the first step is at ts 100 µs relative to its own base.
    for (r, ts) in &f {
        assert!((ts - (100.0 + 1000.0 * f64::from(*r))).abs() < 1e-6, "{f:?}");
    }
    let out = dir.path().join("aligned.json.gz");
    let rep = analyze::merge(
        &res.inputs,
        &out,
        &MergeOptions { align: Align::FirstStep, ..Default::default() },
    )
    .unwrap();
    assert!(rep.warnings.is_empty(), "{:?}", rep.warnings);
    let doc = load(&out);
    let f = first_steps(&doc);
    let v: Vec<f64> = f.values().copied().collect();
    assert!(v.iter().all(|x| (x - v[0]).abs() < 1e-6), "{f:?}");
    assert_eq!(doc["ranktuneMerge"]["align"], "first-step");
}

#[test]
fn ranktune_traces_and_gzip_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let spec = JobSpec { ranks: 3, shape: Shape::Ranktune, ..JobSpec::default() };
    let files = synth::write_job(&spec, dir.path()).unwrap();
    // Gzip rank 1's file (name keeps the rank).
    let raw = std::fs::read(&files[1]).unwrap();
    let gz_path = dir.path().join("trace_1.json.gz");
    {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(
            std::fs::File::create(&gz_path).unwrap(),
            flate2::Compression::default(),
        );
        enc.write_all(&raw).unwrap();
        enc.finish().unwrap();
    }
    std::fs::remove_file(&files[1]).unwrap();
    let out = dir.path().join("m.json");
    let o = bin()
        .args(["trace", "merge"])
        .arg(&files[0])
        .arg(&gz_path)
        .arg(&files[2])
        .arg("-o")
        .arg(&out)
        .run();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = load(&out);
    let ranks = pid_ranks(&doc);
    assert_eq!(ranks.values().copied().collect::<BTreeSet<_>>(), [0, 1, 2].into());
    let names: BTreeSet<&str> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    // The recorder's own "rank N" process name is not repeated.
    assert!(names.contains("rank 1 · pid 1"), "{names:?}");
}

#[test]
fn rank_conflict_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let spec = JobSpec { ranks: 2, shape: Shape::Kineto, ..JobSpec::default() };
    let files = synth::write_job(&spec, dir.path()).unwrap();
    // A copy of rank 1's file under another name claims rank 1 again.
    let copy = dir.path().join("other.pt.trace.json");
    std::fs::copy(&files[1], &copy).unwrap();
    let o = bin().args(["trace", "merge"]).arg(dir.path()).args(["-o", "/dev/null/never"]).run();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("rank 1 is claimed by two files"), "{err}");
    assert!(err.contains("other.pt.trace.json"), "{err}");
    // Naming a rank explicitly resolves it.
    let out = dir.path().join("m.json");
    let o = bin()
        .args(["trace", "merge"])
        .arg(dir.path())
        .arg("--rank")
        .arg(format!("{}=7", copy.display()))
        .arg("-o")
        .arg(&out)
        .run();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ranks = pid_ranks(&load(&out));
    assert_eq!(ranks.values().copied().collect::<BTreeSet<_>>(), [0, 1, 7].into());
}

#[test]
fn files_without_a_rank_need_rank_flags() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    let ev = r#"[{"ph":"X","name":"x","pid":1,"tid":1,"ts":1,"dur":1}]"#;
    std::fs::write(&a, ev).unwrap();
    std::fs::write(&b, ev).unwrap();
    let out = dir.path().join("m.json");
    let o = bin().args(["trace", "merge"]).arg(&a).arg(&b).arg("-o").arg(&out).run();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot tell the rank") && err.contains("--rank"), "{err}");
    let o = bin()
        .args(["trace", "merge"])
        .arg(&a)
        .arg(&b)
        .arg("--rank")
        .arg(format!("{}=0", a.display()))
        .arg("--rank")
        .arg(format!("{}=1", b.display()))
        .arg("-o")
        .arg(&out)
        .run();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = load(&out);
    assert_eq!(pid_ranks(&doc).len(), 2);
    // The output may not overwrite an input.
    let o = bin().args(["trace", "merge"]).arg(&a).arg("-o").arg(&a).run();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("also an input"));
}

#[test]
fn string_and_hex_ids_are_remapped_per_rank() {
    let dir = tempfile::tempdir().unwrap();
    for r in 0..2 {
        let t = format!(
            r#"{{"traceEvents":[{{"ph":"b","cat":"c","name":"a","id":"0x10","pid":1,"tid":1,"ts":1}},{{"ph":"e","cat":"c","name":"a","id":"0x10","pid":1,"tid":1,"ts":2}},{{"ph":"s","name":"f","id":"req-1","pid":1,"tid":1,"ts":1}},{{"ph":"X","name":"x","bind_id":5,"pid":1,"tid":1,"ts":1,"dur":1}}],"distributedInfo":{{"rank":{r}}}}}"#
        );
        std::fs::write(dir.path().join(format!("t{r}.json")), t).unwrap();
    }
    let res = analyze::resolve(&[dir.path().display().to_string()], &[]).unwrap();
    assert!(res.inputs.iter().all(|i| i.source == analyze::RankEvidence::DistributedInfo));
    let out = dir.path().join("m.json");
    analyze::merge(&res.inputs, &out, &MergeOptions::default()).unwrap();
    let doc = load(&out);
    let ids: Vec<String> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] != "M")
        .map(|e| if e["ph"] == "X" { e["bind_id"].to_string() } else { e["id"].to_string() })
        .collect();
    assert_eq!(
        ids,
        [
            "\"0x20\"",
            "\"0x20\"",
            "\"req-1:r0\"",
            "10",
            "\"0x21\"",
            "\"0x21\"",
            "\"req-1:r1\"",
            "11"
        ]
    );
}

#[test]
fn output_is_deterministic_and_can_be_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let spec = JobSpec {
        ranks: 5,
        steps: 25,
        ops_per_step: 200,
        shape: Shape::Kineto,
        ..JobSpec::default()
    };
    synth::write_job(&spec, dir.path()).unwrap();
    let res = analyze::resolve(&[dir.path().display().to_string()], &[]).unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let a = out_dir.path().join("a.json");
    let b = out_dir.path().join("b.json");
    let ra = analyze::merge(&res.inputs, &a, &MergeOptions::default()).unwrap();
    analyze::merge(&res.inputs, &b, &MergeOptions::default()).unwrap();
    let (ba, bb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    // Several MiB per rank: the writer interleaves chunks of several ranks.
    assert!(ba.len() > 4 << 20);
    assert!(ba == bb, "two merges of the same inputs differ");
    // The merged file is itself a trace the reader accepts, warning-free.
    let mut r = analyze::TraceReader::open(&a).unwrap();
    let mut n = 0;
    while r.next_event().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, ra.events + 5 * 5 * 2);
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    assert!(r.meta("ranktuneMerge").is_some());
    // A merged file next to the inputs is not taken for a rank.
    std::fs::copy(&a, dir.path().join("merged.json")).unwrap();
    let again = analyze::resolve(&[dir.path().display().to_string()], &[]).unwrap();
    assert_eq!(again.inputs.len(), 5);
    assert!(again.warnings.iter().any(|w| w.contains("output of `ranktune trace merge`")));
}

#[test]
fn rank_found_in_metadata_after_the_events() {
    let dir = tempfile::tempdir().unwrap();
    for r in [3, 5] {
        let t = format!(
            "{{\"traceEvents\":[{{\"ph\":\"X\",\"name\":\"x\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1}}],\n \"distributedInfo\": {{\"rank\": {r}, \"world_size\": 8}}}}"
        );
        std::fs::write(dir.path().join(format!("t{}.json", r * 11)), t).unwrap();
    }
    let res = analyze::resolve(&[dir.path().display().to_string()], &[]).unwrap();
    let ranks: Vec<u32> = res.inputs.iter().map(|i| i.rank).collect();
    assert_eq!(ranks, [3, 5]);
    assert_eq!(res.inputs[0].world_size, Some(8));
}
