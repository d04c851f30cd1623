//! `merge` to Perfetto's protobuf format, decoded with the crate's prost
//! messages and checked against the JSON merge of the same inputs; and the
//! same bytes for any number of workers, for both formats and the summary.
use ranktune_testkit::synth::{write_job, write_rank, JobSpec, Shape};
use ranktune_trace_analyze::perfetto_proto::{NameField, TracePacket, TYPE_SLICE_BEGIN};
use ranktune_trace_analyze::{
    decode_pftrace, merge, merge_to, resolve, resolve_with, summarize, MergeOptions, OutputFormat,
    ResolveOptions, SummaryOptions,
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

/// Five ranks of very different lengths (one without events), written one
/// by one, resolved by their names.
fn uneven(dir: &Path) -> Vec<ranktune_trace_analyze::RankedInput> {
    for (rank, steps) in [(0u32, 300u32), (1, 2), (3, 120), (4, 40)] {
        let spec = JobSpec {
            ranks: 5,
            steps,
            ops_per_step: 30,
            collectives: true,
            shape: Shape::Kineto,
            base_skew_ns: 1_234,
            ..JobSpec::default()
        };
        let mut f = std::fs::File::create(dir.join(format!("trace_{rank}.json"))).unwrap();
        write_rank(&spec, rank, &mut f).unwrap();
    }
    std::fs::write(dir.join("trace_2.json"), "{\"traceEvents\":[]}").unwrap();
    // The empty file names no run, so keep every run.
    let all = ResolveOptions { all_runs: true };
    let inputs = resolve_with(&[dir.display().to_string()], &[], &all).unwrap().inputs;
    assert_eq!(inputs.iter().map(|i| i.rank).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    inputs
}

#[test]
fn the_same_bytes_for_any_number_of_workers() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    let inputs = uneven(&traces);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for name in ["m.json", "m.pftrace"] {
        let (r1, one) = merged_report(&inputs, &out.join(format!("1-{name}")), 1);
        assert!(one.len() > 5_000_000, "{name}: {} bytes", one.len());
        for jobs in [2, 3, 8] {
            let (r, other) = merged_report(&inputs, &out.join(format!("{jobs}-{name}")), jobs);
            assert!(one == other, "{name} differs between --jobs 1 and --jobs {jobs}");
            assert_eq!(r.events, r1.events);
            assert_eq!(r.warnings, r1.warnings);
        }
        assert_eq!(r1.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        assert_eq!(r1.ranks[2].events, 0);
    }
    // Nothing but the outputs was written beside them.
    let mut left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left.len(), 8, "{left:?}");
    let s1 = summarize(&inputs, &SummaryOptions { jobs: 1, ..Default::default() }).unwrap();
    let s2 = summarize(&inputs, &SummaryOptions { jobs: 2, ..Default::default() }).unwrap();
    assert_eq!(s1.to_json(), s2.to_json());
}

/// The ranks are interleaved in chunks (so two workers never wait for each
/// other's rank), each rank's events keep their order, and the JSON and
/// `.pftrace` of an interleaved merge hold the same slices.
#[test]
fn ranks_interleave_in_chunks_and_keep_their_own_order() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    let inputs = job(&traces, 3, 400);
    let json = merged(&inputs, &dir.path().join("m.json"), 2);
    let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    // The rank of each event (pid = rank * 1000 + k), in output order.
    let ranks: Vec<i64> = events.iter().map(|e| e["pid"].as_i64().unwrap() / 1000).collect();
    let switches = ranks.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches > 6, "{switches} changes of rank: not interleaved");
    let first_of_2 = ranks.iter().position(|&r| r == 2).unwrap();
    let last_of_0 = ranks.iter().rposition(|&r| r == 0).unwrap();
    assert!(first_of_2 < last_of_0, "rank 2 starts after rank 0 ended");
    // Each rank's events in the order of its input (the generator writes
    // its step spans in time order).
    for rank in 0..3 {
        let steps: Vec<f64> = events
            .iter()
            .filter(|e| {
                e["pid"].as_i64().unwrap() / 1000 == rank
                    && e["name"].as_str().is_some_and(|n| n.starts_with("ProfilerStep#"))
            })
            .map(|e| e["ts"].as_f64().unwrap())
            .collect();
        assert_eq!(steps.len(), 400, "rank {rank}");
        assert!(steps.windows(2).all(|w| w[0] < w[1]), "rank {rank}'s steps out of order");
    }
    let pf = merged(&inputs, &dir.path().join("m.pftrace"), 2);
    let (mut js, jnames) = json_slices(&json);
    let (mut ps, pnames) = pftrace_slices(&pf);
    for v in js.values_mut().chain(ps.values_mut()) {
        v.sort();
    }
    assert_eq!(pnames, jnames);
    assert_eq!(ps, js);
}

/// More ranks than one group: the groups follow each other, and the bytes
/// stay the same for any number of workers.
#[test]
fn many_ranks_span_several_groups() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    let n = ranktune_trace_analyze::MERGE_GROUP as u32 + 5;
    let inputs = job(&traces, n, 2);
    for name in ["m.json", "m.pftrace"] {
        let one = merged(&inputs, &dir.path().join(format!("1-{name}")), 1);
        let three = merged(&inputs, &dir.path().join(format!("3-{name}")), 3);
        assert!(one == three, "{name} differs between --jobs 1 and --jobs 3");
    }
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("1-m.json")).unwrap()).unwrap();
    let ranks: Vec<i64> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pid"].as_i64().unwrap() / 1000)
        .collect();
    // Small ranks are one chunk each: in rank order, the last group after
    // the first.
    let mut seen = ranks.clone();
    seen.dedup();
    assert_eq!(seen, (0..i64::from(n)).collect::<Vec<_>>());
    assert_eq!(doc["ranktuneMerge"]["ranks"].as_array().unwrap().len(), n as usize);
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

/// A writer that fails once `left` bytes have been written.
struct FailingAfter {
    left: usize,
}

impl std::io::Write for FailingAfter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if b.len() > self.left {
            return Err(std::io::Error::other("disk full (test)"));
        }
        self.left -= b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_rank_or_output_stops_every_worker_with_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    let inputs = uneven(&traces);
    // The output fails part way: every worker count returns the write error.
    for jobs in [1, 2, 3] {
        for format in [OutputFormat::Json, OutputFormat::Perfetto] {
            let opts = MergeOptions { jobs, format, ..Default::default() };
            let err = merge_to(&inputs, &mut FailingAfter { left: 3 << 20 }, &opts).unwrap_err();
            let cause = std::error::Error::source(&err).map(|s| s.to_string()).unwrap_or_default();
            assert_eq!(cause, "disk full (test)", "jobs {jobs}: {err}");
        }
    }
    // A rank that cannot be read (its file replaced by a folder after the
    // inputs were resolved): the merge names it, every worker stops, and
    // the output that existed before is left as it was.
    std::fs::remove_file(&inputs[3].path).unwrap();
    std::fs::create_dir(&inputs[3].path).unwrap();
    let out = dir.path().join("m.json");
    std::fs::write(&out, "before").unwrap();
    for jobs in [1, 2, 3] {
        let err = merge(&inputs, &out, &MergeOptions { jobs, ..Default::default() }).unwrap_err();
        assert!(err.to_string().contains("trace_3.json"), "jobs {jobs}: {err}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "before");
    }
}
