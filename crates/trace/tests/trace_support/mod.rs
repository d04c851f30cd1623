//! Helpers shared by the trace tests: reading a trace file back and
//! checking the things every trace file must satisfy.
#![allow(dead_code)]

use serde_json::Value;
use std::io::Read;
use std::path::Path;

/// The file's text (gunzipped when it ends in `.gz`).
pub fn read_text(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if path.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut s).unwrap();
        s
    } else {
        String::from_utf8(bytes).unwrap()
    }
}

/// What Holistic Trace Analysis does: the first match of `"rank":\s+(\d+)`.
pub fn hta_rank(text: &str) -> Option<u64> {
    let mut rest = text;
    while let Some(at) = rest.find("\"rank\":") {
        let after = &rest[at + 7..];
        let ws = after.len() - after.trim_start().len();
        let digits: String = after[ws..].chars().take_while(char::is_ascii_digit).collect();
        if ws > 0 && !digits.is_empty() {
            return digits.parse().ok();
        }
        rest = &rest[at + 1..];
    }
    None
}

/// Parses and checks a trace file of `rank` of `world`: valid JSON object
/// form, header fields, `pid` = rank on every event, metadata present, and
/// the HTA regex finds the rank. Returns the document.
pub fn check_trace(path: &Path, rank: u64, world: u64) -> Value {
    let text = read_text(path);
    let doc: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}\n{text}", path.display()));
    assert_eq!(hta_rank(&text), Some(rank), "HTA regex in {}", path.display());
    assert!(
        text.contains(&format!("\"distributedInfo\": {{\"rank\": {rank}, \"world_size\": {world}"))
    );
    assert_eq!(doc["distributedInfo"]["rank"], rank);
    assert_eq!(doc["distributedInfo"]["world_size"], world);
    assert!(doc["baseTimeNanoseconds"].as_u64().unwrap() > 1_600_000_000_000_000_000);
    assert!(doc["otherData"]["pid"].as_u64().is_some());
    assert_eq!(doc["otherData"]["ranktune_version"], env!("CARGO_PKG_VERSION"));
    let events = doc["traceEvents"].as_array().expect("traceEvents array");
    for e in events {
        assert_eq!(e["pid"], rank, "pid = rank: {e}");
        if e["ph"] != "M" {
            assert!(e["ts"].as_f64().is_some(), "ts: {e}");
        }
        if e["ph"] == "X" {
            assert!(e["dur"].as_f64().unwrap() >= 0.0, "dur: {e}");
        }
    }
    let meta = |name: &str| events.iter().find(|e| e["ph"] == "M" && e["name"] == name).cloned();
    assert_eq!(meta("process_name").unwrap()["args"]["name"], format!("rank {rank}"));
    assert_eq!(meta("process_sort_index").unwrap()["args"]["sort_index"], rank);
    doc
}

/// The non-metadata events named `name`.
pub fn named<'a>(doc: &'a Value, name: &str) -> Vec<&'a Value> {
    doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] != "M" && e["name"] == name)
        .collect()
}

/// Names of the `ProfilerStep#N` events, in order of N.
pub fn steps(doc: &Value) -> Vec<u64> {
    let mut v: Vec<u64> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str()?.strip_prefix("ProfilerStep#")?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn hta_regex_helper_matches_like_the_regex() {
    assert_eq!(hta_rank(r#"{"rank":5, "x": {"rank": 3}}"#), Some(3));
    assert_eq!(hta_rank(r#"{"rank":  12}"#), Some(12));
    assert_eq!(hta_rank(r#"{"rank":"3"}"#), None);
}
