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

use crate::document::{CacheData, Metadata};
use crate::entry::{Candidate, Entry, EntryKey, Identity, Section};
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
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

fn write_header(out: &mut Vec<u8>, m: &Metadata) {
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
        push_json(out, id);
    }
    if !m.environments.is_empty() {
        out.extend_from_slice(b"\n    ");
    }
    out.extend_from_slice(b"}\n  }");
}

/// Writes one section with one entry per line; empty sections are left out.
fn write_section<'a>(out: &mut Vec<u8>, section: Section, lines: impl Iterator<Item = &'a [u8]>) {
    let mut lines = lines.peekable();
    if lines.peek().is_none() {
        return;
    }
    out.extend_from_slice(format!(",\n  {}: [", json_str(&section.name())).as_bytes());
    for (i, line) in lines.enumerate() {
        out.extend_from_slice(if i == 0 { b"\n    " } else { b",\n    " });
        out.extend_from_slice(line);
    }
    out.extend_from_slice(b"\n  ]");
}

/// One entry as its compact one-line JSON.
pub(crate) fn entry_line(k: &EntryKey, e: &Entry) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
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
    out
}

/// Serializes a whole document in canonical form: the same content always
/// gives byte-identical output.
pub fn to_bytes(data: &CacheData) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024 + data.len() * 256);
    write_header(&mut out, &data.metadata);
    for (section, entries) in &data.sections {
        let lines: Vec<Vec<u8>> = entries.iter().map(|(k, e)| entry_line(k, e)).collect();
        write_section(&mut out, *section, lines.iter().map(Vec::as_slice));
    }
    out.extend_from_slice(b"\n}\n");
    out
}

// ---------------------------------------------------------------- reading

/// The top-level object as written, keys in file order, duplicates kept.
struct TopLevel<'a>(Vec<(String, TopValue<'a>)>);

/// A top-level value: sections are split into raw entries in the same
/// single pass over the text; everything else stays raw.
enum TopValue<'a> {
    Raw(&'a RawValue),
    Section(SectionValue<'a>),
}

/// What a section name held.
enum SectionValue<'a> {
    /// An array: its elements, unparsed.
    Entries(Vec<&'a RawValue>),
    /// An object (the TensorRT-LLM layout).
    Object,
    /// Anything else.
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for SectionValue<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = SectionValue<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(e) = seq.next_element::<&'de RawValue>()? {
                    v.push(e);
                }
                Ok(SectionValue::Entries(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(SectionValue::Object)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(SectionValue::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

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
                while let Some(k) = map.next_key::<String>()? {
                    let v = if Section::parse(&k).is_some() {
                        TopValue::Section(map.next_value::<SectionValue<'de>>()?)
                    } else {
                        TopValue::Raw(map.next_value::<&'de RawValue>()?)
                    };
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

/// The top level of a document: metadata parsed, sections still raw.
struct Top<'a> {
    metadata: Metadata,
    /// Each section's entries as raw JSON, in file order (duplicates kept).
    sections: Vec<(Section, Vec<&'a RawValue>)>,
    warnings: Vec<String>,
    bad_entries: usize,
}

fn parse_top(bytes: &[u8]) -> Result<Option<Top<'_>>, ParseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
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

    let mut out = Top {
        metadata: Metadata::default(),
        sections: Vec::new(),
        warnings: Vec::new(),
        bad_entries: 0,
    };
    let mut seen_format = false;
    let mut seen_version = false;
    let mut seen_metadata = false;
    let mut raw_sections: Vec<(Section, SectionValue<'_>)> = Vec::new();
    for (name, value) in top.0 {
        let value = match value {
            TopValue::Section(v) => {
                if let Some(section) = Section::parse(&name) {
                    raw_sections.push((section, v));
                }
                continue;
            }
            TopValue::Raw(v) => v,
        };
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
                    out.warnings.push("duplicate \"format\" field".into());
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
                    out.warnings.push("duplicate \"version\" field".into());
                }
                seen_version = true;
            }
            "metadata" => {
                if seen_metadata {
                    out.warnings.push("duplicate \"metadata\" block; the last one is used".into());
                }
                seen_metadata = true;
                out.metadata = parse_metadata(value, &mut out.warnings);
            }
            // A newer minor version may add top-level fields: ignore them.
            other => tracing::debug!("ignoring unknown top-level field {other:?}"),
        }
    }
    let mut seen_sections = std::collections::BTreeSet::new();
    for (section, raw) in raw_sections {
        let name = section.name();
        let entries: Vec<&RawValue> = match raw {
            SectionValue::Entries(v) => v,
            other => {
                if !seen_format && matches!(other, SectionValue::Object) {
                    return Err(ParseError::Unsupported(format!(
                        "section \"{name}\" is an object, not an array: this looks like a TensorRT-LLM cache; \
                         convert it with `ranktune cache import NEW.json THIS_FILE --format trtllm`"
                    )));
                }
                out.bad_entries += 1;
                out.warnings.push(format!("section {name} skipped: expected an array of entries"));
                continue;
            }
        };
        if !seen_sections.insert(section) {
            out.warnings.push(format!("section {name} appears twice; both are loaded"));
        }
        out.sections.push((section, entries));
    }
    Ok(Some(out))
}

/// Parses one entry fully and validates it.
fn parse_entry(section: &str, index: usize, raw: &RawValue) -> Result<(EntryKey, Entry), String> {
    let e: EntryIn = serde_json::from_str(raw.get())
        .map_err(|err| format!("bad entry {} skipped: {err}", describe_raw(section, index, raw)))?;
    let key = EntryKey { op: e.op, runner: e.runner, fingerprint: e.fingerprint, bucket: e.bucket };
    let entry = Entry {
        runner_index: e.runner_index,
        tactic: e.tactic,
        time_us: e.time_us,
        candidates: e.candidates,
        checksum: e.checksum,
        env: e.env,
        created_unix: e.created_unix,
    };
    validate_entry(&key, &entry)
        .map_err(|why| format!("bad entry {section}[{index}] ({key}) skipped: {why}"))?;
    Ok((key, entry))
}

/// One entry from its JSON text (as kept in a [`RawDoc`]), fully parsed
/// and validated; `None` when it is malformed.
pub(crate) fn entry_from_text(text: &str) -> Option<Entry> {
    let raw: &RawValue = serde_json::from_str(text).ok()?;
    parse_entry("", 0, raw).ok().map(|(_, e)| e)
}

/// Parses a cache document. Empty input is an empty cache; bad entries are
/// skipped (counted, each named in a warning); a file that is not a JSON
/// object is [`ParseError::Unparseable`]; another format or a future major
/// version is [`ParseError::Unsupported`].
pub fn parse(bytes: &[u8]) -> Result<Parsed, ParseError> {
    let Some(top) = parse_top(bytes)? else { return Ok(Parsed::default()) };
    let mut parsed = Parsed {
        data: CacheData { metadata: top.metadata, sections: BTreeMap::new() },
        warnings: top.warnings,
        bad_entries: top.bad_entries,
    };
    for (section, entries) in top.sections {
        let name = section.name();
        for (i, raw_entry) in entries.into_iter().enumerate() {
            let (key, entry) = match parse_entry(&name, i, raw_entry) {
                Ok(ke) => ke,
                Err(msg) => {
                    parsed.bad_entries += 1;
                    parsed.warnings.push(msg);
                    continue;
                }
            };
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

// ------------------------------------------------ raw documents (folding)

/// One section of a [`RawDoc`]: entries kept as their JSON text.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RawSection {
    /// Entries whose key could be read, by key, as compact one-line JSON.
    pub keyed: BTreeMap<EntryKey, Box<str>>,
    /// Entries whose key could not be read at all, kept verbatim (compact).
    pub unkeyed: std::collections::BTreeSet<Box<str>>,
}

/// A document for folding: entries are kept as text and only their keys
/// are parsed, so a fold costs a scan and a copy rather than a full parse
/// and re-serialization. Entries this version does not fully understand
/// (newer fields, bad values) pass through untouched unless `strict`.
#[derive(Clone, Debug, Default)]
pub(crate) struct RawDoc {
    pub metadata: Metadata,
    pub sections: BTreeMap<Section, RawSection>,
    pub warnings: Vec<String>,
    pub bad_entries: usize,
}

#[derive(Deserialize)]
struct KeyIn {
    op: String,
    runner: String,
    fingerprint: String,
    bucket: Vec<Vec<u64>>,
}

/// Reads a JSON string token at the start of `s`; returns it and the rest.
fn take_json_string(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('"')?;
    let bytes = body.as_bytes();
    let mut i = 0;
    let mut escaped = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                // Rare in keys: let serde_json decode escapes.
                escaped = true;
                i += 2;
                continue;
            }
            b'"' => break,
            _ => i += 1,
        }
    }
    if i >= bytes.len() {
        return None;
    }
    let token = &s[..i + 2];
    let value = if escaped { serde_json::from_str(token).ok()? } else { body[..i].to_string() };
    Some((value, &s[i + 2..]))
}

/// Reads a bucket `[[1,2],[3]]` (no spaces) at the start of `s`.
fn take_bucket(s: &str) -> Option<(Vec<Vec<u64>>, &str)> {
    let mut s = s.strip_prefix('[')?;
    let mut out = Vec::new();
    if let Some(rest) = s.strip_prefix(']') {
        return Some((out, rest));
    }
    loop {
        s = s.strip_prefix('[')?;
        let mut dims = Vec::new();
        if let Some(rest) = s.strip_prefix(']') {
            s = rest;
        } else {
            loop {
                let end = s.bytes().position(|b| !b.is_ascii_digit())?;
                if end == 0 || (end > 1 && s.starts_with('0')) {
                    return None;
                }
                dims.push(s[..end].parse().ok()?);
                s = &s[end..];
                if let Some(rest) = s.strip_prefix(',') {
                    s = rest;
                } else {
                    s = s.strip_prefix(']')?;
                    break;
                }
            }
        }
        out.push(dims);
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else {
            return Some((out, s.strip_prefix(']')?));
        }
    }
}

/// The key of a compact entry as this module writes it
/// (`{"op":…,"runner":…,"fingerprint":…,"bucket":…,…`), without a full
/// parse; `None` for any other layout.
fn fast_key(raw: &str) -> Option<EntryKey> {
    let (op, s) = take_json_string(raw.strip_prefix("{\"op\":")?)?;
    let (runner, s) = take_json_string(s.strip_prefix(",\"runner\":")?)?;
    let (fingerprint, s) = take_json_string(s.strip_prefix(",\"fingerprint\":")?)?;
    let (bucket, s) = take_bucket(s.strip_prefix(",\"bucket\":")?)?;
    (s.starts_with(',') || s.starts_with('}')).then_some(EntryKey {
        op,
        runner,
        fingerprint,
        bucket,
    })
}

/// `raw` without whitespace outside strings (a no-op on what we write).
fn compact(raw: &str) -> Box<str> {
    let bytes = raw.as_bytes();
    if !bytes.iter().any(|&b| matches!(b, b' ' | b'\n' | b'\t' | b'\r')) {
        return raw.into();
    }
    let mut in_string = false;
    let mut escaped = false;
    let mut needs = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if b.is_ascii_whitespace() {
            needs = true;
            break;
        }
    }
    if !needs {
        return raw.into();
    }
    let mut out = String::with_capacity(raw.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in raw.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            out.push(c);
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_ascii_whitespace() {
            out.push(c);
        }
    }
    out.into_boxed_str()
}

/// Parses a document for folding (see [`RawDoc`]). With `strict`, every
/// entry is also fully parsed and validated, and bad ones are dropped with a
/// warning naming them (`cache prune` cleans up this way).
pub(crate) fn parse_raw(bytes: &[u8], strict: bool) -> Result<RawDoc, ParseError> {
    let Some(top) = parse_top(bytes)? else { return Ok(RawDoc::default()) };
    let mut doc = RawDoc {
        metadata: top.metadata,
        sections: BTreeMap::new(),
        warnings: top.warnings,
        bad_entries: top.bad_entries,
    };
    for (section, entries) in top.sections {
        let name = section.name();
        let slot = doc.sections.entry(section).or_default();
        for (i, raw) in entries.into_iter().enumerate() {
            if strict {
                if let Err(msg) = parse_entry(&name, i, raw) {
                    doc.bad_entries += 1;
                    doc.warnings.push(msg.replace(" skipped:", " dropped:"));
                    continue;
                }
            }
            let text = compact(raw.get());
            let key = fast_key(&text).or_else(|| {
                serde_json::from_str::<KeyIn>(&text).ok().map(|k| EntryKey {
                    op: k.op,
                    runner: k.runner,
                    fingerprint: k.fingerprint,
                    bucket: k.bucket,
                })
            });
            match key {
                // Later entries win, as later saves do.
                Some(key) => {
                    slot.keyed.insert(key, text);
                }
                None => {
                    slot.unkeyed.insert(text);
                }
            }
        }
    }
    Ok(doc)
}

/// Serializes a [`RawDoc`] in the same canonical layout as [`to_bytes`]:
/// for content written by [`to_bytes`] the output is byte-identical.
pub(crate) fn raw_to_bytes(doc: &RawDoc) -> Vec<u8> {
    let size: usize = doc
        .sections
        .values()
        .flat_map(|s| s.keyed.values().chain(s.unkeyed.iter()))
        .map(|t| t.len() + 6)
        .sum();
    let mut out = Vec::with_capacity(1024 + size);
    write_header(&mut out, &doc.metadata);
    for (section, entries) in &doc.sections {
        let lines = entries.keyed.values().chain(entries.unkeyed.iter());
        write_section(&mut out, *section, lines.map(|t| t.as_bytes()));
    }
    out.extend_from_slice(b"\n}\n");
    out
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

    #[test]
    fn raw_fold_reproduces_canonical_bytes() {
        let mut d = sample();
        d.insert(
            Section::Rank(2),
            EntryKey {
                op: "we\"ird \\ op\n".into(),
                runner: "r ü".into(),
                fingerprint: "".into(),
                bucket: vec![vec![], vec![0, 18446744073709551615]],
            },
            d.get(Section::Shared, &d.sections[&Section::Shared].keys().next().unwrap().clone())
                .unwrap()
                .clone(),
        );
        let bytes = to_bytes(&d);
        let raw = parse_raw(&bytes, false).unwrap();
        assert_eq!(raw_to_bytes(&raw), bytes);
        for (section, entries) in &raw.sections {
            assert!(entries.unkeyed.is_empty());
            let keys: Vec<_> = entries.keyed.keys().collect();
            let want: Vec<_> = d.sections[section].keys().collect();
            assert_eq!(keys, want);
        }
    }

    #[test]
    fn fast_key_agrees_with_serde_or_declines() {
        for text in [
            r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[1,2],[3]],"x":1}"#,
            r#"{"op":"a\"b","runner":"\u00fc","fingerprint":"","bucket":[],"x":1}"#,
            r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[]],"x":1}"#,
            r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[01]],"x":1}"#,
            r#"{"runner":"b","op":"a","fingerprint":"c","bucket":[[1]]}"#,
        ] {
            let serde = serde_json::from_str::<KeyIn>(text).ok().map(|k| EntryKey {
                op: k.op,
                runner: k.runner,
                fingerprint: k.fingerprint,
                bucket: k.bucket,
            });
            if let Some(fast) = fast_key(text) {
                assert_eq!(Some(fast), serde, "{text}");
            }
        }
        assert!(fast_key(
            r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[1,2],[3]],"x":1}"#
        )
        .is_some());
    }

    #[test]
    fn compact_strips_only_outside_strings() {
        assert_eq!(&*compact("{ \"a b\" : [1, 2] }"), "{\"a b\":[1,2]}");
        assert_eq!(&*compact(r#"{"a\" b":1}"#), r#"{"a\" b":1}"#);
    }
}
