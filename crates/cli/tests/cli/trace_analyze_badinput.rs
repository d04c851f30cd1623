//! Bad input never panics: each case is skipped with a warning naming the
//! file and what was skipped, the rest is used, and a merge of it is still
//! valid JSON. Also: truncated array and object files, files that are not
//! traces, and random corruption (property test).
use proptest::prelude::*;
use ranktune_testkit::Cli;
use ranktune_trace_analyze::{SkipReason, TraceReader};
use serde_json::Value;
use std::path::{Path, PathBuf};

const GOOD: &str = r#"{"ph":"X","name":"good","pid":1,"tid":1,"ts":10.5,"dur":2}"#;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// An object-form trace of rank 0 with `bad` between two good events.
fn with_bad(bad: &[u8]) -> Vec<u8> {
    let mut v = br#"{"distributedInfo": {"rank": 0}, "traceEvents": ["#.to_vec();
    v.extend_from_slice(GOOD.as_bytes());
    v.extend_from_slice(b",\n");
    v.extend_from_slice(bad);
    v.extend_from_slice(b",\n");
    v.extend_from_slice(GOOD.as_bytes());
    v.extend_from_slice(b"], \"traceName\": \"t\"}");
    v
}

fn read_all(path: &Path) -> (u64, TraceReader) {
    let mut r = TraceReader::open(path).unwrap();
    let mut n = 0;
    while r.next_event().unwrap().is_some() {
        n += 1;
    }
    (n, r)
}

fn merge_cli(inputs: &[&Path], out: &Path) -> (bool, String) {
    let o = ranktune().args(["trace", "merge"]).args(inputs).arg("-o").arg(out).run();
    (o.status.success(), o.stderr_text())
}

fn ranktune() -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_ranktune"))
}

#[test]
fn each_bad_event_is_skipped_with_a_warning_naming_file_and_reason() {
    let cases: Vec<(&str, Vec<u8>, SkipReason, &str)> = vec![
        (
            "utf8",
            b"{\"ph\":\"X\",\"name\":\"bad\xff\xfe\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1}".to_vec(),
            SkipReason::InvalidUtf8,
            "invalid UTF-8",
        ),
        (
            "ctrl",
            b"{\"ph\":\"X\",\"name\":\"bad\x01\nname\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1}".to_vec(),
            SkipReason::ControlChar,
            "control characters",
        ),
        (
            "bigpid",
            br#"{"ph":"X","name":"bad","pid":123456789012345678901234567890,"tid":1,"ts":1,"dur":1}"#.to_vec(),
            SkipReason::BigIntField,
            "beyond 64 bits",
        ),
        (
            "nodur",
            br#"{"ph":"X","name":"bad","pid":1,"tid":1,"ts":1}"#.to_vec(),
            SkipReason::MissingDur,
            "without \"dur\"",
        ),
        (
            "nots",
            br#"{"ph":"i","name":"bad","pid":1,"tid":1}"#.to_vec(),
            SkipReason::MissingTs,
            "no \"ts\"",
        ),
        (
            "noph",
            br#"{"name":"bad","pid":1,"tid":1,"ts":1}"#.to_vec(),
            SkipReason::MissingPh,
            "no \"ph\"",
        ),
        (
            "nopid",
            br#"{"ph":"i","name":"bad","tid":1,"ts":1}"#.to_vec(),
            SkipReason::MissingPid,
            "no \"pid\"",
        ),
        (
            "badts",
            br#"{"ph":"i","name":"bad","pid":1,"tid":1,"ts":"soon"}"#.to_vec(),
            SkipReason::BadFieldType,
            "wrong type",
        ),
        (
            "notobj",
            br#"[1, 2]"#.to_vec(),
            SkipReason::NotObject,
            "not an object",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, bad, reason, text) in cases {
        let file = format!("{name}.json");
        let p = write(dir.path(), &file, &with_bad(&bad));
        let (n, r) = read_all(&p);
        assert_eq!(n, 2, "{name}: both good events kept");
        assert_eq!(r.stats().skipped(reason), 1, "{name}");
        assert_eq!(r.meta("traceName"), Some(&Value::from("t")), "{name}");
        let w = r.warnings();
        assert_eq!(w.len(), 1, "{name}: {w:?}");
        assert!(w[0].contains(&file) && w[0].contains(text), "{name}: {w:?}");
        // Through the CLI: a warning on stderr, a valid merged file.
        let out = dir.path().join(format!("{name}.merged.json"));
        let (ok, err) = merge_cli(&[&p], &out);
        assert!(ok, "{name}: {err}");
        assert!(err.contains(&file) && err.contains(text), "{name}: {err}");
        let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        let goods =
            doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["name"] == "good").count();
        assert_eq!(goods, 2, "{name}");
    }
}

#[test]
fn big_integers_in_args_are_kept_as_strings() {
    let dir = tempfile::tempdir().unwrap();
    let bad = br#"{"ph":"X","name":"big","pid":1,"tid":1,"ts":1,"dur":1,"args":{"External id": 340282366920938463463374607431768211456, "ok": 18446744073709551615}}"#;
    let p = write(dir.path(), "trace_0.json", &with_bad(bad));
    let (n, r) = read_all(&p);
    assert_eq!(n, 3);
    assert!(r.warnings()[0].contains("beyond 64 bits in args"));
    let out = dir.path().join("m.json");
    let (ok, err) = merge_cli(&[&p], &out);
    assert!(ok, "{err}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let e = doc["traceEvents"].as_array().unwrap().iter().find(|e| e["name"] == "big").unwrap();
    assert_eq!(e["args"]["External id"], "340282366920938463463374607431768211456");
    assert_eq!(e["args"]["ok"], 18446744073709551615u64);
}

#[test]
fn truncated_array_file_is_read_to_its_last_whole_event() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = b"[\n".to_vec();
    for i in 0..5 {
        t.extend_from_slice(
            format!("{{\"ph\":\"X\",\"name\":\"ProfilerStep#{i}\",\"pid\":1,\"tid\":1,\"ts\":{},\"dur\":90}},\n", i * 100).as_bytes(),
        );
    }
    t.extend_from_slice(br#"{"ph":"X","name":"cut off he"#);
    let p = write(dir.path(), "trace_0.json", &t);
    let (n, r) = read_all(&p);
    assert_eq!(n, 5);
    assert!(r.stats().truncated);
    // The array form may lack its closing bracket: no warning for that.
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    let out = dir.path().join("m.json");
    let (ok, err) = merge_cli(&[&p], &out);
    assert!(ok, "{err}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["traceEvents"].as_array().unwrap().len(), 5 + 2);
    // Summary works on it.
    let o = ranktune().args(["trace", "summary", "--json"]).arg(&p).run();
    assert!(o.status.success());
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["ranks"][0]["steps"], 5);
    assert_eq!(doc["ranks"][0]["step_mean_us"], 90.0);
}

#[test]
fn truncated_object_file_warns_and_keeps_events() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = with_bad(GOOD.as_bytes());
    t.truncate(t.len() - 40);
    let p = write(dir.path(), "trace_0.json", &t);
    let (n, r) = read_all(&p);
    assert_eq!(n, 2);
    let w = r.warnings();
    assert!(w.iter().any(|w| w.contains("trace_0.json") && w.contains("truncated")), "{w:?}");
}

#[test]
fn broken_structure_stops_the_file_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let t = with_bad(br#"{"ph":"X","name":"x" "pid":1}"#);
    let p = write(dir.path(), "trace_0.json", &t);
    let (n, r) = read_all(&p);
    assert_eq!(n, 1);
    let w = r.warnings();
    assert!(w.iter().any(|w| w.contains("stopped reading at byte")), "{w:?}");
}

#[test]
fn files_that_are_not_traces_are_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "trace_0.json", format!("[{GOOD}]").as_bytes());
    let text = write(dir.path(), "notes_1.json", b"hello, world");
    let cache =
        write(dir.path(), "cache_2.json", br#"{"metadata": {"lib_version": "1"}, "shared": {}}"#);
    let empty = write(dir.path(), "empty_3.json", b"   \n");
    let binary = write(dir.path(), "bin_4.json", &[0xff, 0xfe, 0, 1, 2]);
    let out = dir.path().join("m.json");
    let (ok, err) = merge_cli(&[&good, &text, &cache, &empty, &binary], &out);
    assert!(ok, "{err}");
    for f in ["notes_1.json", "cache_2.json", "empty_3.json", "bin_4.json"] {
        assert!(err.lines().any(|l| l.contains(f) && l.contains("not a trace")), "{f}: {err}");
    }
    // Nothing usable at all is an error, not a panic.
    let (ok, err) = merge_cli(&[&text, &cache], &out);
    assert!(!ok);
    assert!(err.contains("no trace files"), "{err}");
}

fn sample() -> Vec<u8> {
    let spec = ranktune_testkit::synth::JobSpec {
        ranks: 1,
        steps: 2,
        ops_per_step: 3,
        ..Default::default()
    };
    let mut v = Vec::new();
    ranktune_testkit::synth::write_rank(&spec, 0, &mut v).unwrap();
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Random corruption (overwrites, cuts) never panics the reader, the
    /// merge or the summary, and a merge that succeeds is valid JSON.
    #[test]
    fn random_corruption_never_panics(
        edits in proptest::collection::vec((0usize..1 << 20, any::<u8>()), 0..8),
        cut in proptest::option::of(0usize..1 << 20),
    ) {
        let mut bytes = sample();
        for (at, b) in edits {
            let i = at % bytes.len();
            bytes[i] = b;
        }
        if let Some(c) = cut {
            bytes.truncate(c % bytes.len());
        }
        let r = TraceReader::from_reader("fuzz.json", Box::new(std::io::Cursor::new(bytes.clone())));
        if let Ok(mut r) = r {
            while let Ok(Some(_)) = r.next_event() {}
            let _ = r.warnings();
        }
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "trace_0.json", &bytes);
        if let Ok(res) = ranktune_trace_analyze::resolve(&[p.display().to_string()], &[]) {
            let out = dir.path().join("m.json");
            if ranktune_trace_analyze::merge(&res.inputs, &out, &Default::default()).is_ok() {
                let doc: Result<Value, _> = serde_json::from_slice(&std::fs::read(&out).unwrap());
                prop_assert!(doc.is_ok(), "merged output is not JSON");
            }
            let _ = ranktune_trace_analyze::summarize(&res.inputs, &Default::default());
        }
    }
}

#[test]
fn absurd_clock_bases_are_warned_about_not_overflowed() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, base) in
        ["1e300", "-9223372036854775808", "\"999999999999999999999999\""].iter().enumerate()
    {
        let doc = format!(
            r#"{{"distributedInfo": {{"rank": 0}}, "baseTimeNanoseconds": {base}, "traceEvents": [{GOOD},
{{"ph":"X","name":"ProfilerStep#1","pid":1,"tid":1,"ts":20,"dur":5}}]}}"#
        );
        let a = write(tmp.path(), &format!("a{i}_0.json"), doc.as_bytes());
        let b = write(
            tmp.path(),
            &format!("b{i}_1.json"),
            format!(r#"{{"distributedInfo": {{"rank": 1}}, "baseTimeNanoseconds": 1000, "traceEvents": [{GOOD}]}}"#)
                .as_bytes(),
        );
        for align in [false, true] {
            let out = tmp.path().join(format!("m{i}{align}.json"));
            let mut cmd = ranktune().args(["trace", "merge"]).arg(&a).arg(&b).arg("-o").arg(&out);
            if align {
                cmd = cmd.args(["--align", "first-step"]);
            }
            let o = cmd.run();
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "base {base}: {stderr}");
            assert!(stderr.contains("baseTimeNanoseconds"), "base {base} warns: {stderr}");
            let merged: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
            assert!(merged["traceEvents"].as_array().unwrap().len() >= 3);
        }
    }
}
