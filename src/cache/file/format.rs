//! The on-disk JSON schema of a cache file, to and from [`CacheData`].
//!
//! This module owns the bytes: [`to_bytes`] writes a document in one
//! canonical form (the same content always gives the same bytes), and
//! [`parse`] reads one back, skipping bad entries with a warning that names
//! them. It never touches the filesystem and never panics on input.
//!
//! Layout (version 1.0):
//!
//! ```text
//! {
//!   "format": "ranktune-cache",
//!   "version": "1.0",
//!   "metadata": { "lib_version": …, "host": …, "created_unix": …, "updated_unix": …,
//!                 "environments": { "<digest>": { identity }, … } },
//!   "shared": [
//!     {"op":…,"runner":…,"fingerprint":…,"bucket":[[…]],"runner_index":…,"tactic":…,
//!      "time_us":…,"checksum":…,"env":…,"created_unix":…,"candidates":[…]},
//!     …
//!   ],
//!   "rank_0": [ … ],
//!   …
//! }
//! ```
//!
//! Each section is an array of entries sorted by key, **one entry per line**,
//! so a changed decision is a one-line diff. Sections appear as `shared`,
//! then ranks in numeric order; empty sections are left out.

use crate::cache::document::{CacheData, Metadata};
use crate::cache::entry::{Candidate, Entry, EntryKey, Identity, Section};
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::fmt;

/// The `format` field of every ranktune cache file.
pub const FORMAT_NAME: &str = "ranktune-cache";
/// The major version this build reads and writes; files with another major
/// version are refused, never rewritten.
pub const FORMAT_MAJOR: u32 = 1;
/// The minor version this build writes; newer minors (extra fields) load.
pub const FORMAT_MINOR: u32 = 0;

/// Why a document could not be read at all.
#[derive(Clone, Debug, PartialEq)]
pub enum ParseError {
    /// Not a JSON object (truncated, not UTF-8, not JSON, …): the file is
    /// damaged and may be set aside.
    Unparseable(String),
    /// A well-formed file this build must not touch: another format, a
    /// future major version, or a TensorRT-LLM cache.
    Unsupported(String),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Unparseable(s) | ParseError::Unsupported(s) => f.write_str(s),
        }
    }
}

/// A document that parsed, with what had to be skipped.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// Everything that loaded.
    pub data: CacheData,
    /// One line per skipped part, each naming it.
    pub warnings: Vec<String>,
    /// Number of entries skipped as malformed.
    pub bad_entries: usize,
}

// ---------------------------------------------------------------- writing

#[derive(Serialize)]
struct EntryOut<'a> {
    op: &'a str,
    runner: &'a str,
    fingerprint: &'a str,
    bucket: &'a [Vec<u64>],
    runner_index: u32,
    tactic: &'a serde_json::Value,
    time_us: f64,
    checksum: &'a str,
    env: &'a str,
    created_unix: u64,
    candidates: &'a [Candidate],
}

fn json_str(s: &str) -> String {
    // Serializing a &str cannot fail.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn push_json<T: Serialize>(out: &mut Vec<u8>, value: &T) {
    // Our types hold no maps with non-string keys, so this cannot fail;
    // a failure would only drop the value, never write a broken document.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Serializes a whole document in canonical form: the same content always
/// gives byte-identical output.
pub fn to_bytes(data: &CacheData) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + data.len() * 256);
    let m = &data.metadata;
    out.extend_from_slice(b"{\n");
    out.extend_from_slice(format!("  \"format\": {},\n", json_str(FORMAT_NAME)).as_bytes());
    out.extend_from_slice(
        format!("  \"version\": \"{FORMAT_MAJOR}.{FORMAT_MINOR}\",\n").as_bytes(),
    );
    out.extend_from_slice(b"  \"metadata\": {\n");
    out.extend_from_slice(
        format!("    \"lib_version\": {},\n", json_str(&m.lib_version)).as_bytes(),
    );
    out.extend_from_slice(format!("    \"host\": {},\n", json_str(&m.host)).as_bytes());
    out.extend_from_slice(format!("    \"created_unix\": {},\n", m.created_unix).as_bytes());
    out.extend_from_slice(format!("    \"updated_unix\": {},\n", m.updated_unix).as_bytes());
    out.extend_from_slice(b"    \"environments\": {");
    for (i, (digest, id)) in m.environments.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"\n      " } else { b",\n      " });
        out.extend_from_slice(json_str(digest).as_bytes());
        out.extend_from_slice(b": ");
        push_json(&mut out, id);
    }
    if !m.environments.is_empty() {
        out.extend_from_slice(b"\n    ");
    }
    out.extend_from_slice(b"}\n  }");
    for (section, entries) in &data.sections {
        if entries.is_empty() {
            continue;
        }
        out.extend_from_slice(format!(",\n  {}: [", json_str(&section.name())).as_bytes());
        for (i, (k, e)) in entries.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b"\n    " } else { b",\n    " });
            push_json(
                &mut out,
                &EntryOut {
                    op: &k.op,
                    runner: &k.runner,
                    fingerprint: &k.fingerprint,
                    bucket: &k.bucket,
                    runner_index: e.runner_index,
                    tactic: &e.tactic,
                    time_us: e.time_us,
                    checksum: &e.checksum,
                    env: &e.env,
                    created_unix: e.created_unix,
                    candidates: &e.candidates,
                },
            );
        }
        out.extend_from_slice(b"\n  ]");
    }
    out.extend_from_slice(b"\n}\n");
    out
}

// ---------------------------------------------------------------- reading

/// The top-level object as written, keys in file order, duplicates kept.
struct TopLevel<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for TopLevel<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = TopLevel<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                    fields.push((k, v));
                }
                Ok(TopLevel(fields))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct EntryIn {
    op: String,
    runner: String,
    fingerprint: String,
    bucket: Vec<Vec<u64>>,
    runner_index: u32,
    tactic: serde_json::Value,
    time_us: f64,
    checksum: String,
    env: String,
    created_unix: u64,
    #[serde(default)]
    candidates: Vec<Candidate>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct MetadataIn {
    lib_version: String,
    host: String,
    created_unix: u64,
    updated_unix: u64,
    environments: BTreeMap<String, Box<RawValue>>,
}

/// Checks what JSON cannot express and serde does not check: times must be
/// finite and non-negative, names non-empty.
pub fn validate_entry(key: &EntryKey, entry: &Entry) -> Result<(), String> {
    fn time(what: &str, v: f64) -> Result<(), String> {
        if v.is_finite() && v >= 0.0 {
            Ok(())
        } else {
            Err(format!("{what} is {v}, expected a finite time >= 0"))
        }
    }
    if key.op.is_empty() {
        return Err("op is empty".into());
    }
    if key.runner.is_empty() {
        return Err("runner is empty".into());
    }
    time("time_us", entry.time_us)?;
    for (i, c) in entry.candidates.iter().enumerate() {
        if let Some(s) = &c.stats {
            time(&format!("candidates[{i}].min_us"), s.min_us)?;
            time(&format!("candidates[{i}].median_us"), s.median_us)?;
            time(&format!("candidates[{i}].p90_us"), s.p90_us)?;
            if !s.spread.is_finite() {
                return Err(format!("candidates[{i}].spread is {}", s.spread));
            }
        }
    }
    Ok(())
}

/// A short name for an entry that failed to load: its op/runner if those
/// fields are readable, else just its position.
fn describe_raw(section: &str, index: usize, raw: &RawValue) -> String {
    let mut name = format!("{section}[{index}]");
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(raw.get())
    {
        let field = |k: &str| map.get(k).and_then(|v| v.as_str()).map(str::to_string);
        if let (Some(op), Some(runner)) = (field("op"), field("runner")) {
            name.push_str(&format!(" ({op}/{runner}"));
            if let Some(b) = map.get("bucket") {
                name.push_str(&format!(" {b}"));
            }
            name.push(')');
        }
    }
    name
}

fn parse_version(v: &RawValue) -> Result<(u32, u32), ParseError> {
    let s: String = serde_json::from_str(v.get()).map_err(|_| {
        ParseError::Unparseable(format!(
            "\"version\" is {}, expected a string like \"1.0\"",
            v.get()
        ))
    })?;
    let parsed =
        s.split_once('.').and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    parsed.ok_or_else(|| {
        ParseError::Unparseable(format!(
            "\"version\" is \"{s}\", expected MAJOR.MINOR like \"1.0\""
        ))
    })
}

fn parse_metadata(raw: &RawValue, warnings: &mut Vec<String>) -> Metadata {
    let m: MetadataIn = match serde_json::from_str(raw.get()) {
        Ok(m) => m,
        Err(e) => {
            warnings.push(format!("metadata block ignored: {e}"));
            return Metadata::default();
        }
    };
    let mut environments = BTreeMap::new();
    for (digest, raw_id) in m.environments {
        match serde_json::from_str::<Identity>(raw_id.get()) {
            Ok(id) => {
                environments.insert(digest, id);
            }
            Err(e) => warnings.push(format!("metadata.environments[{digest}] ignored: {e}")),
        }
    }
    Metadata {
        lib_version: m.lib_version,
        host: m.host,
        created_unix: m.created_unix,
        updated_unix: m.updated_unix,
        environments,
    }
}

/// Parses a cache document. Empty input is an empty cache; bad entries are
/// skipped (counted, each named in a warning); a file that is not a JSON
/// object is [`ParseError::Unparseable`]; another format or a future major
/// version is [`ParseError::Unsupported`].
pub fn parse(bytes: &[u8]) -> Result<Parsed, ParseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Parsed::default());
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        ParseError::Unparseable(format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    let top: TopLevel<'_> = serde_json::from_str(text).map_err(|e| {
        let what = if e.is_eof() { "truncated JSON" } else { "not valid JSON" };
        ParseError::Unparseable(format!("{what}: {e}"))
    })?;

    let mut parsed = Parsed::default();
    let mut seen_format = false;
    let mut seen_version = false;
    let mut seen_metadata = false;
    let mut sections: Vec<(Section, &RawValue)> = Vec::new();
    for (name, value) in &top.0 {
        match name.as_str() {
            "format" => {
                let f: Option<String> = serde_json::from_str(value.get()).ok();
                if f.as_deref() != Some(FORMAT_NAME) {
                    return Err(ParseError::Unsupported(format!(
                        "\"format\" is {}, not \"{FORMAT_NAME}\": not a ranktune cache",
                        value.get()
                    )));
                }
                if seen_format {
                    parsed.warnings.push("duplicate \"format\" field".into());
                }
                seen_format = true;
            }
            "version" => {
                let (major, minor) = parse_version(value)?;
                if major != FORMAT_MAJOR {
                    return Err(ParseError::Unsupported(format!(
                        "format version {major}.{minor} is not supported by this ranktune (reads {FORMAT_MAJOR}.x); \
                         upgrade ranktune, or use another cache file"
                    )));
                }
                if seen_version {
                    parsed.warnings.push("duplicate \"version\" field".into());
                }
                seen_version = true;
            }
            "metadata" => {
                if seen_metadata {
                    parsed
                        .warnings
                        .push("duplicate \"metadata\" block; the last one is used".into());
                }
                seen_metadata = true;
                parsed.data.metadata = parse_metadata(value, &mut parsed.warnings);
            }
            other => match Section::parse(other) {
                Some(section) => sections.push((section, value)),
                // A newer minor version may add top-level fields: ignore them.
                None => tracing::debug!("ignoring unknown top-level field {other:?}"),
            },
        }
    }

    let mut seen_sections = BTreeMap::new();
    for (section, raw) in sections {
        let name = section.name();
        let entries: Vec<&RawValue> = match serde_json::from_str(raw.get()) {
            Ok(v) => v,
            Err(_) => {
                if !seen_format && raw.get().trim_start().starts_with('{') {
                    return Err(ParseError::Unsupported(format!(
                        "section \"{name}\" is an object, not an array: this looks like a TensorRT-LLM cache; \
                         convert it with `ranktune cache import NEW.json THIS_FILE --format trtllm`"
                    )));
                }
                parsed.bad_entries += 1;
                parsed
                    .warnings
                    .push(format!("section {name} skipped: expected an array of entries"));
                continue;
            }
        };
        if seen_sections.insert(section, ()).is_some() {
            parsed.warnings.push(format!("section {name} appears twice; both are loaded"));
        }
        for (i, raw_entry) in entries.into_iter().enumerate() {
            let e: EntryIn = match serde_json::from_str(raw_entry.get()) {
                Ok(e) => e,
                Err(err) => {
                    parsed.bad_entries += 1;
                    parsed.warnings.push(format!(
                        "bad entry {} skipped: {err}",
                        describe_raw(&name, i, raw_entry)
                    ));
                    continue;
                }
            };
            let key = EntryKey {
                op: e.op,
                runner: e.runner,
                fingerprint: e.fingerprint,
                bucket: e.bucket,
            };
            let entry = Entry {
                runner_index: e.runner_index,
                tactic: e.tactic,
                time_us: e.time_us,
                candidates: e.candidates,
                checksum: e.checksum,
                env: e.env,
                created_unix: e.created_unix,
            };
            if let Err(why) = validate_entry(&key, &entry) {
                parsed.bad_entries += 1;
                parsed.warnings.push(format!("bad entry {name}[{i}] ({key}) skipped: {why}"));
                continue;
            }
            let slot = parsed.data.sections.entry(section).or_default();
            match slot.get(&key) {
                Some(old) => {
                    parsed
                        .warnings
                        .push(format!("duplicate entry {name} {key}; kept the newer one"));
                    if entry.created_unix >= old.created_unix {
                        slot.insert(key, entry);
                    }
                }
                None => {
                    slot.insert(key, entry);
                }
            }
        }
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CacheData {
        let mut d = CacheData::default();
        d.metadata.lib_version = "0.1.0".into();
        d.metadata.environments.insert(
            "abc".into(),
            Identity {
                lib_version: "0.1.0".into(),
                device_kind: "cpu".into(),
                device_name: "X".into(),
                capability: "x86_64".into(),
                cores: 2,
            },
        );
        for s in [Section::Rank(10), Section::Shared, Section::Rank(2)] {
            d.insert(
                s,
                EntryKey {
                    op: "gemm".into(),
                    runner: "r".into(),
                    fingerprint: "f".into(),
                    bucket: vec![vec![1, 2]],
                },
                Entry {
                    runner_index: 0,
                    tactic: serde_json::json!({"b": 1, "a": [1, 2]}),
                    time_us: 1.5,
                    candidates: vec![],
                    checksum: "c".into(),
                    env: "abc".into(),
                    created_unix: 7,
                },
            );
        }
        d
    }

    #[test]
    fn round_trip_and_order() {
        let d = sample();
        let bytes = to_bytes(&d);
        let text = String::from_utf8(bytes.clone()).unwrap();
        let shared = text.find("\"shared\"").unwrap();
        let r2 = text.find("\"rank_2\"").unwrap();
        let r10 = text.find("\"rank_10\"").unwrap();
        assert!(shared < r2 && r2 < r10, "{text}");
        let back = parse(&bytes).unwrap();
        assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        assert_eq!(back.data, d);
        assert_eq!(to_bytes(&back.data), bytes);
    }

    #[test]
    fn empty_inputs_are_ordinary() {
        assert!(parse(b"").unwrap().data.is_empty());
        assert!(parse(b"  \n").unwrap().data.is_empty());
        assert!(parse(b"{}").unwrap().data.is_empty());
        assert!(parse(to_bytes(&CacheData::default()).as_slice()).unwrap().data.is_empty());
    }
}
