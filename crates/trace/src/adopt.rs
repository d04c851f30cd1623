//! Publishing a trace another profiler wrote — `torch.profiler`'s Chrome
//! trace, exported by Kineto to a temp file — as this rank's trace file:
//! ranktune's header first (`distributedInfo` naming the rank even without
//! `torch.distributed`, `otherData` with the run id), the profiler's own
//! members after it in their order, their text as the profiler wrote it,
//! published atomically and durably (gzip-compressed for a `.gz` target),
//! as [`export`](crate::export) publishes ranktune's own traces. And the
//! file name of a later profiling cycle ([`cycle_path`]), so a second
//! cycle never overwrites the first.
//!
//! Owns the file's header and its publication; never reads the events
//! (their text is copied as it is) and never decides when to publish.

use crate::TraceError;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// The file of profiling cycle `cycle` (from 0) of the rank's file `path`:
/// `path` itself for the first, `<stem>.cycle<N><ext>` (N from 2) after it.
///
/// ```
/// use ranktune_trace::cycle_path;
/// use std::path::Path;
/// assert_eq!(cycle_path(Path::new("t_0.json.gz"), 0), Path::new("t_0.json.gz"));
/// assert_eq!(cycle_path(Path::new("t_0.json.gz"), 1), Path::new("t_0.cycle2.json.gz"));
/// assert_eq!(cycle_path(Path::new("t_0"), 2), Path::new("t_0.cycle3"));
/// ```
pub fn cycle_path(path: &Path, cycle: u32) -> PathBuf {
    if cycle == 0 {
        return path.to_path_buf();
    }
    let text = path.to_string_lossy();
    let n = cycle + 1;
    for ext in [".json.gz", ".json", ".gz"] {
        if let Some(stem) = text.strip_suffix(ext) {
            return PathBuf::from(format!("{stem}.cycle{n}{ext}"));
        }
    }
    PathBuf::from(format!("{text}.cycle{n}"))
}

/// The top-level members of a JSON object, in their order, each value's
/// text as it is.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Chrome trace (a JSON object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Members, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Box<RawValue>>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Publishes the Chrome trace at `raw` (another profiler's) as `target`:
/// `distributedInfo` first (the profiler's members, then `defaults` for
/// those it lacks: the rank, world size, local rank, backend), `otherData`
/// (the profiler's, updated with `other`: the run id, versions, the cycle),
/// `baseTimeNanoseconds` when it has one, then every other member in its
/// order. The header's members are written `"name": value`, a space after
/// each colon, so Holistic Trace Analysis's rank regex finds the rank.
pub fn publish_adopted(
    raw: &Path,
    target: &Path,
    defaults: &Map<String, Value>,
    other: &Map<String, Value>,
) -> Result<(), TraceError> {
    let write_err = |source| TraceError::Write { path: target.to_path_buf(), source };
    let text = std::fs::read_to_string(raw).map_err(write_err)?;
    let members: Members = serde_json::from_str(&text)
        .map_err(|e| write_err(io::Error::new(io::ErrorKind::InvalidData, e)))?;
    let object = |name: &str| -> Map<String, Value> {
        members
            .0
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| serde_json::from_str(v.get()).ok())
            .unwrap_or_default()
    };
    let mut info = object("distributedInfo");
    for (k, v) in defaults {
        info.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let mut extra = object("otherData");
    extra.extend(other.iter().map(|(k, v)| (k.clone(), v.clone())));
    crate::export::publish(target, &mut |w| {
        write!(w, "{{\"distributedInfo\": {}, \"otherData\": {}", spaced(&info), spaced(&extra))?;
        let base = members.0.iter().find(|(k, _)| k == "baseTimeNanoseconds");
        let rest = members.0.iter().filter(|(k, _)| {
            !matches!(k.as_str(), "distributedInfo" | "otherData" | "baseTimeNanoseconds")
        });
        for (k, v) in base.into_iter().chain(rest) {
            write!(w, ", {}: {}", Value::from(k.as_str()), v.get())?;
        }
        w.write_all(b"}")
    })
}

/// A JSON object with a space after each colon and comma: `{"rank": 3}`.
fn spaced(m: &Map<String, Value>) -> String {
    let items: Vec<String> =
        m.iter().map(|(k, v)| format!("{}: {v}", Value::from(k.as_str()))).collect();
    format!("{{{}}}", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_comes_first_and_the_rest_keeps_its_order_and_text() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("raw.json");
        std::fs::write(
            &raw,
            r#"{"schemaVersion": 1, "traceEvents": [ {"ph":"X", "ts": 1.50} ], "distributedInfo": {"backend": "nccl"}, "baseTimeNanoseconds": 7}"#,
        )
        .unwrap();
        let target = dir.path().join("t_3.json");
        let defaults: Map<String, Value> =
            serde_json::from_str(r#"{"rank": 3, "backend": "torch.profiler"}"#).unwrap();
        let other: Map<String, Value> = serde_json::from_str(r#"{"cycle": 1}"#).unwrap();
        publish_adopted(&raw, &target, &defaults, &other).unwrap();
        let text = std::fs::read_to_string(&target).unwrap();
        assert!(text.starts_with(r#"{"distributedInfo": {"backend": "nccl", "rank": 3}, "otherData": {"cycle": 1}, "baseTimeNanoseconds": 7, "schemaVersion": 1, "traceEvents": [ {"ph":"X", "ts": 1.50} ]}"#), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["traceEvents"][0]["ts"], 1.5);
    }

    #[test]
    fn a_file_that_is_not_a_trace_is_an_error_and_nothing_is_published() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("raw.json");
        std::fs::write(&raw, "[1, 2]").unwrap();
        let target = dir.path().join("t.json");
        assert!(publish_adopted(&raw, &target, &Map::new(), &Map::new()).is_err());
        assert!(!target.exists());
    }
}
