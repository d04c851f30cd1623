//! `merge` to Perfetto's protobuf format, decoded with the crate's prost
//! messages and checked against the JSON merge of the same inputs; and the
//! same bytes for any number of workers, for both formats and the summary.
use ranktune_trace_analyze::perfetto_proto::{NameField, TracePacket, TYPE_SLICE_BEGIN};
use ranktune_trace_analyze::{
    decode_pftrace, merge, resolve, summarize, write_job, JobSpec, MergeOptions, Shape,
    SummaryOptions,
};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

fn job(dir: &Path, ranks: u32, steps: u32) -> Vec<ranktune_trace_analyze::RankedInput> {
    let spec = JobSpec {
        ranks,
        steps,
        ops_per_step: 30,
        straggler: Some((1, 0.3)),
        collectives: true,
        shape: Shape::Kineto,
        base_skew_ns: 1_234,
        ..JobSpec::default()
    };
    write_job(&spec, dir).unwrap();
    resolve(&[dir.display().to_string()], &[]).unwrap().inputs
}

fn merged(inputs: &[ranktune_trace_analyze::RankedInput], out: &Path, jobs: usize) -> Vec<u8> {
    merged_report(inputs, out, jobs).1
}

fn merged_report(
    inputs: &[ranktune_trace_analyze::RankedInput],
    out: &Path,
    jobs: usize,
) -> (ranktune_trace_analyze::MergeReport, Vec<u8>) {
    let r = merge(inputs, out, &MergeOptions { jobs, ..Default::default() }).unwrap();
    (r, std::fs::read(out).unwrap())
}

/// Per merged pid: (name, start ns) of every slice.
type Slices = BTreeMap<i64, Vec<(String, i64)>>;

fn json_slices(bytes: &[u8]) -> (Slices, BTreeMap<i64, String>) {
    let doc: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    let mut out = Slices::new();
    let mut names = BTreeMap::new();
    for e in doc["traceEvents"].as_array().unwrap() {
        let pid = e["pid"].as_i64().unwrap();
        match e["ph"].as_str().unwrap() {
            "X" | "B" => out.entry(pid).or_default().push((
                e["name"].as_str().unwrap().to_string(),
                (e["ts"].as_f64().unwrap() * 1000.0).round() as i64,
            )),
            "M" if e["name"] == "process_name" => {
                names.insert(pid, e["args"]["name"].as_str().unwrap().to_string());
            }
            _ => {}
        }
    }
    (out, names)
}

fn pftrace_slices(bytes: &[u8]) -> (Slices, BTreeMap<i64, String>) {
    let trace = decode_pftrace(bytes).unwrap();
    let packets: &[TracePacket] = &trace.packet;
    let mut parent = HashMap::new();
    let mut pid_of_track = HashMap::new();
    let mut names = BTreeMap::new();
    let mut interned = HashMap::new();
    for p in packets {
        if let Some(d) = &p.track_descriptor {
            if let Some(proc_) = &d.process {
                pid_of_track.insert(d.uuid.unwrap(), i64::from(proc_.pid.unwrap()));
                names.insert(i64::from(proc_.pid.unwrap()), d.name.clone().unwrap());
            }
            if let Some(up) = d.parent_uuid {
                parent.insert(d.uuid.unwrap(), up);
            }
        }
        if let Some(i) = &p.interned_data {
            for n in &i.event_names {
                interned.insert((p.trusted_packet_sequence_id, n.iid), n.name.clone().unwrap());
            }
        }
    }
    let pid = |mut u: u64| loop {
        if let Some(p) = pid_of_track.get(&u) {
            return *p;
        }
        u = parent[&u];
    };
    let mut out = Slices::new();
    for p in packets {
        let Some(e) = &p.track_event else { continue };
        if e.r#type != Some(TYPE_SLICE_BEGIN) {
            continue;
        }
        let name = match &e.name_field {
            Some(NameField::NameIid(i)) => {
                interned[&(p.trusted_packet_sequence_id, Some(*i))].clone()
            }
            Some(NameField::Name(n)) => n.clone(),
            None => String::new(),
        };
        out.entry(pid(e.track_uuid.unwrap()))
            .or_default()
            .push((name, p.timestamp.unwrap() as i64));
    }
    (out, names)
}

#[test]
fn pftrace_holds_the_json_merges_slices_pids_and_times() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    let inputs = job(&traces, 3, 4);
    let json = merged(&inputs, &dir.path().join("m.json"), 0);
    let pf = merged(&inputs, &dir.path().join("m.pftrace"), 0);
    let (mut js, jnames) = json_slices(&json);
    let (mut ps, pnames) = pftrace_slices(&pf);
    for v in js.values_mut().chain(ps.values_mut()) {
        v.sort();
    }
    assert_eq!(pnames, jnames);
    assert_eq!(ps.keys().collect::<Vec<_>>(), js.keys().collect::<Vec<_>>());
    assert_eq!(ps, js);
    let n: usize = ps.values().map(Vec::len).sum();
    assert!(n > 3 * 4 * 30, "{n} slices");
    assert!(pf.len() * 2 < json.len(), "pftrace {} B, json {} B", pf.len(), json.len());
}

#[test]
fn the_same_bytes_for_one_or_two_workers() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    // Ranks large enough (about 8 MB of JSON each) that a second worker
    // fills its queue and spills while the writer is on the first rank.
    let inputs = job(&traces, 3, 400);
    for name in ["m.json", "m.pftrace"] {
        let (_, one) = merged_report(&inputs, &dir.path().join(format!("1-{name}")), 1);
        let (r2, two) = merged_report(&inputs, &dir.path().join(format!("2-{name}")), 2);
        assert!(one.len() > 1_000_000, "{name}: {} bytes", one.len());
        assert!(one == two, "{name} differs between --jobs 1 and --jobs 2");
        if name == "m.json" {
            assert!(r2.spilled_bytes > 0, "no rank spilled: the test does not cover spilling");
        }
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
        .collect();
    assert!(left.is_empty(), "spill files left behind: {left:?}");
    let s1 = summarize(&inputs, &SummaryOptions { jobs: 1, ..Default::default() }).unwrap();
    let s2 = summarize(&inputs, &SummaryOptions { jobs: 2, ..Default::default() }).unwrap();
    assert_eq!(s1.to_json(), s2.to_json());
    assert_eq!(s1.straggler.map(|s| s.rank), Some(1));
}

/// Slices that cannot nest (out of order beyond the window, or overlapping
/// their parent) still arrive whole, on an "overlapping" track, and every
/// track's begins and ends balance.
#[test]
fn slices_that_cannot_nest_go_to_an_overlapping_track() {
    let dir = tempfile::tempdir().unwrap();
    let mut events = vec![];
    // 3000 back-to-back slices, written newest first: most are too late for
    // the window; plus one that overlaps its parent.
    for i in (0..3000).rev() {
        events.push(format!(
            r#"{{"ph":"X","name":"op{}","pid":1,"tid":1,"ts":{},"dur":1}}"#,
            i % 7,
            i * 2
        ));
    }
    events.push(r#"{"ph":"X","name":"parent","pid":1,"tid":2,"ts":0,"dur":10}"#.into());
    events.push(r#"{"ph":"X","name":"straddles","pid":1,"tid":2,"ts":5,"dur":10}"#.into());
    let text = format!("{{\"traceEvents\":[{}]}}", events.join(",\n"));
    std::fs::write(dir.path().join("trace_0.json"), text).unwrap();
    let inputs =
        resolve(&[dir.path().join("trace_0.json").display().to_string()], &[]).unwrap().inputs;
    let out = dir.path().join("m.pftrace");
    let report = merge(&inputs, &out, &MergeOptions::default()).unwrap();
    let w = report.warnings.join("\n");
    assert!(w.contains("overlap their parent without nesting"), "{w}");
    assert!(w.contains("too far out of start order"), "{w}");
    let trace = decode_pftrace(&std::fs::read(&out).unwrap()).unwrap();
    let mut balance: HashMap<u64, i64> = HashMap::new();
    let mut begins = 0;
    let mut overlapping = None;
    for p in &trace.packet {
        if let Some(d) = &p.track_descriptor {
            if d.name.as_deref() == Some("overlapping") {
                overlapping = d.uuid;
            }
        }
        if let Some(e) = &p.track_event {
            let b = balance.entry(e.track_uuid.unwrap()).or_default();
            match e.r#type {
                Some(1) => {
                    *b += 1;
                    begins += 1;
                }
                Some(2) => *b -= 1,
                _ => {}
            }
        }
    }
    assert_eq!(begins, 3002);
    assert!(balance.values().all(|b| *b == 0), "{balance:?}");
    assert!(overlapping.is_some_and(|u| balance.contains_key(&u)));
}
