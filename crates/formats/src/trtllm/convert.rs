//! Whole reference documents to and from [`CacheData`].
//!
//! Import is forgiving where the reference is not: an entry whose key,
//! tactic, runner id or time does not parse is skipped with a warning that
//! names it, and every other entry still imports (the reference crashes or
//! silently reuses the previous entry's tactic). Only a document that is not
//! JSON at all, or not a JSON object, is an error — and it is reported, never
//! replaced by an empty cache. A missing `metadata` block or missing sections
//! are ordinary.
//!
//! Imported entries carry [`IMPORTED_CHECKSUM`] as their candidate-set
//! checksum and no candidates (the reference keeps only the winner), and an
//! environment identity built from the file's metadata. This module does no
//! file I/O; the CLI reads and writes files.

use super::key::{format_key, parse_key};
use super::pyliteral;
use super::tactic::{json_to_py, py_to_json};
use crate::json::json_type;
use crate::ordered::{self, OValue, TextLayout};
use crate::{parse_document, Exported, FormatError, Imported};
use ranktune_cache::{CacheData, Entry, Identity, Section};
use serde_json::Value;
use std::collections::BTreeMap;

/// The checksum given to imported entries: the reference records no
/// candidate set, so the tuner treats them as stale (never silently reused
/// for its own candidate sets) while `show`, `diff` and `export` see them.
pub const IMPORTED_CHECKSUM: &str = "trtllm";

/// Prefix of the `lib_version` of identities built from reference metadata.
pub const LIB_VERSION_PREFIX: &str = "trtllm-";

/// True when a JSON document has the reference's shape: no ranktune
/// `format` field, and reference metadata or a section keyed by tuples.
pub fn looks_like_trtllm(doc: &Value) -> bool {
    let Some(obj) = doc.as_object() else { return false };
    if obj.contains_key("format") {
        return false;
    }
    if obj.is_empty() {
        return true;
    }
    let meta = obj.get("metadata").and_then(Value::as_object);
    let ref_meta = meta.is_some_and(|m| {
        m.contains_key("creation_timestamp") || m.contains_key("device_capability")
    });
    let tuple_keys = obj.iter().any(|(name, v)| {
        Section::parse(name).is_some()
            && v.as_object().is_some_and(|s| s.keys().next().is_some_and(|k| k.starts_with('(')))
    });
    ref_meta || tuple_keys
}

/// Imports reference JSON bytes (see [`import`]), and records what the
/// file looked like (member order, `metadata` and every `min_time` and
/// `tactic` exactly as written, indentation) in the cache's metadata, so
/// [`export`] reproduces the file.
pub fn import_bytes(bytes: &[u8]) -> Result<Imported, FormatError> {
    import_parsed(&parse_document(bytes)?, bytes)
}

/// [`import_bytes`] of a document already parsed from `bytes`.
pub(crate) fn import_parsed(doc: &Value, bytes: &[u8]) -> Result<Imported, FormatError> {
    let mut imported = import(doc)?;
    if let Some(origin) = std::str::from_utf8(bytes).ok().and_then(origin_of) {
        imported.data.set_origin(ORIGIN, origin);
    }
    Ok(imported)
}

/// The origin record's name (see `CacheData::origin`).
const ORIGIN: &str = "trtllm";

/// What a reference file looked like, as compact JSON: `{"layout":
/// [indent, final newline], "top": [[name, metadata or [[key, min_time,
/// tactic], …]], …]}` in file order, values as written. `None` when the
/// text does not parse in order (non-finite numbers): the export then
/// writes its own layout.
fn origin_of(text: &str) -> Option<String> {
    let doc = ordered::parse(text).ok()?;
    let layout = TextLayout::of(text);
    let mut top = Vec::new();
    for (name, value) in doc.members()? {
        if name == "metadata" {
            top.push(OValue::Array(vec![OValue::string(name), value.clone()]));
            continue;
        }
        if Section::parse(name).is_none() {
            continue;
        }
        let Some(entries) = value.members() else { continue };
        let rows = entries
            .iter()
            .map(|(key, v)| {
                let field = |f: &str| v.get(f).cloned().unwrap_or(OValue::scalar("null"));
                OValue::Array(vec![OValue::string(key), field("min_time"), field("tactic")])
            })
            .collect();
        top.push(OValue::Array(vec![OValue::string(name), OValue::Array(rows)]));
    }
    let record = OValue::Object(vec![
        ("layout".into(), layout.to_record()),
        ("top".into(), OValue::Array(top)),
    ]);
    Some(ordered::write(&record, TextLayout { indent: None, final_newline: false }))
}

/// One recorded entry: (key text, min_time text, tactic text).
type OriginRow = (String, OValue, OValue);

/// A parsed origin record: layout, and the file's top-level members.
struct Origin {
    layout: TextLayout,
    metadata: Option<OValue>,
    /// Sections in file order, each with its entries in file order:
    /// (key text, min_time text, tactic text).
    sections: Vec<(String, Vec<OriginRow>)>,
    /// Where `metadata` stood among the sections.
    metadata_at: usize,
}

fn read_origin(data: &CacheData) -> Option<Origin> {
    let record = ordered::parse(data.origin(ORIGIN)?).ok()?;
    let as_str = |v: &OValue| match v {
        OValue::Scalar(t) => serde_json::from_str::<String>(t).ok(),
        _ => None,
    };
    let layout = TextLayout::from_record(record.get("layout")?)?;
    let OValue::Array(top) = record.get("top")? else { return None };
    let mut origin = Origin { layout, metadata: None, sections: Vec::new(), metadata_at: 0 };
    for member in top {
        let OValue::Array(pair) = member else { return None };
        let [name, value] = pair.as_slice() else { return None };
        let name = as_str(name)?;
        if name == "metadata" {
            origin.metadata = Some(value.clone());
            origin.metadata_at = origin.sections.len();
            continue;
        }
        let OValue::Array(rows) = value else { return None };
        let mut entries = Vec::with_capacity(rows.len());
        for row in rows {
            let OValue::Array(cells) = row else { return None };
            let [key, min_time, tactic] = cells.as_slice() else { return None };
            entries.push((as_str(key)?, min_time.clone(), tactic.clone()));
        }
        origin.sections.push((name, entries));
    }
    Some(origin)
}

/// Imports a parsed reference document: every entry that parses, and a
/// warning naming each one that does not.
pub fn import(doc: &Value) -> Result<Imported, FormatError> {
    let obj = doc.as_object().ok_or(FormatError::NotAnObject {
        found: Some(json_type(doc)),
        expected: "with \"metadata\" and \"rank_<N>\" sections",
    })?;
    let mut out = Imported::default();
    let (identity, created_unix) = identity_from_metadata(obj.get("metadata"), &mut out.warnings);
    let env = identity.digest();
    out.data.metadata.created_unix = created_unix;
    out.data.metadata.updated_unix = created_unix;
    out.data.metadata.environments.insert(env.clone(), identity);

    for (name, section_value) in obj {
        // ranktune's extras (the drop-in's notes) are not entries.
        if name == "metadata" || name == super::EXTRAS {
            continue;
        }
        let Some(section) = Section::parse(name) else {
            out.warnings.push(format!(
                "ignored top-level field {name:?} (not \"metadata\", \"shared\" or \"rank_<N>\")"
            ));
            continue;
        };
        let Some(entries) = section_value.as_object() else {
            out.warnings.push(format!(
                "section {name} is a JSON {}, not an object; skipped",
                json_type(section_value)
            ));
            out.skipped += 1;
            continue;
        };
        for (key_text, value) in entries {
            match import_entry(key_text, value, &env, created_unix) {
                Ok((key, entry)) => out.data.insert(section, key, entry),
                Err(why) => {
                    out.warnings.push(format!("{name} entry {key_text}: {why}; skipped"));
                    out.skipped += 1;
                }
            }
        }
    }
    Ok(out)
}

fn import_entry(
    key_text: &str,
    value: &Value,
    env: &str,
    created_unix: u64,
) -> Result<(ranktune_cache::EntryKey, Entry), String> {
    let key = parse_key(key_text).map_err(|e| e.to_string())?;
    let obj = value
        .as_object()
        .ok_or_else(|| format!("value is a JSON {}, not an object", json_type(value)))?;
    let runner_id = obj.get("runner_id").ok_or("no \"runner_id\"")?;
    let runner_index = runner_id
        .as_u64()
        .and_then(|r| u32::try_from(r).ok())
        .ok_or_else(|| format!("runner_id {runner_id} is not a small non-negative integer"))?;
    let tactic = match obj.get("tactic").ok_or("no \"tactic\"")? {
        Value::String(repr) => {
            let py = pyliteral::parse_literal(repr).map_err(|e| format!("tactic {repr:?}: {e}"))?;
            py_to_json(&py)
        }
        // Not a repr string: already data, take it as it is.
        other => other.clone(),
    };
    let min_time = obj.get("min_time").ok_or("no \"min_time\"")?;
    let ms =
        min_time.as_f64().filter(|t| t.is_finite() && *t >= 0.0).ok_or_else(|| match min_time {
            Value::Null => "min_time is null (NaN or Infinity in the file?)".to_string(),
            _ => format!("min_time {min_time} is not a finite non-negative number of milliseconds"),
        })?;
    let time_us = ms_to_us(ms);
    if !time_us.is_finite() {
        return Err(format!("min_time {min_time} ms is too large to hold in microseconds"));
    }
    let entry = Entry {
        runner_index,
        tactic,
        time_us,
        candidates: Vec::new(),
        checksum: IMPORTED_CHECKSUM.to_string(),
        env: env.to_string(),
        created_unix,
    };
    Ok((key, entry))
}

/// Builds the environment identity from a reference `metadata` block, and
/// reads its creation time (0 when absent or unreadable).
fn identity_from_metadata(meta: Option<&Value>, warnings: &mut Vec<String>) -> (Identity, u64) {
    let meta = meta.and_then(Value::as_object);
    let field = |name: &str| meta.and_then(|m| m.get(name));
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let lib = text(field("lib_version")).unwrap_or_else(|| "unknown".into());
    let device_name = text(field("device_name")).unwrap_or_else(|| "unknown".into());
    let capability = match field("device_capability") {
        Some(Value::Array(parts)) if !parts.is_empty() && parts.iter().all(Value::is_u64) => {
            parts.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(".")
        }
        Some(Value::String(s)) => s.clone(),
        None => "unknown".into(),
        Some(other) => {
            warnings.push(format!(
                "metadata.device_capability {other} is not like [9, 0]; recorded as unknown"
            ));
            "unknown".into()
        }
    };
    let created = match field("creation_timestamp") {
        None | Some(Value::Null) => 0,
        Some(v) => match parse_timestamp(v) {
            Some(t) => t,
            None => {
                warnings.push(format!(
                    "metadata.creation_timestamp {v} is not a time; entries get time 0"
                ));
                0
            }
        },
    };
    let identity = Identity {
        lib_version: format!("{LIB_VERSION_PREFIX}{lib}"),
        device_kind: "cuda".into(),
        device_name,
        capability,
        cores: 0,
    };
    (identity, created)
}

/// Seconds since the epoch from a number (seconds, fractions dropped), a
/// numeric string, or an ISO 8601 / `YYYY-MM-DD HH:MM:SS` string (UTC unless
/// it carries an offset).
fn parse_timestamp(v: &Value) -> Option<u64> {
    let secs = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => match s.trim().parse::<f64>() {
            Ok(f) => f,
            Err(_) => return parse_iso8601(s.trim()),
        },
        _ => return None,
    };
    (0.0..1e13).contains(&secs).then_some(secs as u64)
}

fn parse_iso8601(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(range)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !(b[10] == b'T' || b[10] == b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d, h, mi, sec) =
        (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[n..];
    }
    let offset = match rest {
        "" | "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let hm = rest[1..].replace(':', "");
            if hm.len() != 4 || !hm.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let oh: i64 = hm[..2].parse().ok()?;
            let om: i64 = hm[2..].parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = ranktune_core::clock::days_from_civil(y, mo, d);
    let t = days * 86_400 + h * 3600 + mi * 60 + sec - offset;
    u64::try_from(t).ok()
}

/// Milliseconds to microseconds by moving the decimal point of the shortest
/// decimal form, so `0.0123` ms becomes exactly `12.3` µs (plain `* 1000.0`
/// gives `12.299999999999999`) and export gives back the same milliseconds.
pub(crate) fn ms_to_us(ms: f64) -> f64 {
    shift_decimal(ms, 3)
}

/// Microseconds to milliseconds (the inverse of [`ms_to_us`]).
pub(crate) fn us_to_ms(us: f64) -> f64 {
    shift_decimal(us, -3)
}

fn shift_decimal(x: f64, by: i32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let sci = format!("{x:e}");
    let shifted = sci
        .split_once('e')
        .and_then(|(m, e)| Some(format!("{m}e{}", e.parse::<i32>().ok()? + by)))
        .and_then(|s| s.parse::<f64>().ok());
    shifted.unwrap_or(x * 10f64.powi(by))
}

/// Converts a cache to the reference's format: `metadata` describing the
/// environment most entries were measured in, `shared` and `rank_<N>`
/// sections with Python `str()` keys and `repr` tactics, times in ms.
///
/// Entries imported from such a file (and not changed since) come out as
/// that file had them: the same `min_time` and `tactic` text, in the
/// file's order, under its `metadata` when the environment is the one it
/// describes, with its indentation; everything else follows, sorted.
pub fn export(data: &CacheData) -> Exported {
    export_ordered(data).1
}

/// [`export`], with the document as JSON as well (for callers that hand
/// the sections on in memory, such as Python's drop-in).
pub fn export_document(data: &CacheData) -> (Exported, Value) {
    let (doc, exported) = export_ordered(data);
    (exported, doc.to_value())
}

fn export_ordered(data: &CacheData) -> (OValue, Exported) {
    let mut warnings = Vec::new();
    let origin = read_origin(data);
    // (runner id, tactic, min_time) per section and key text.
    let mut sections: BTreeMap<String, BTreeMap<String, (u32, OValue, OValue)>> = BTreeMap::new();
    let (mut written, mut skipped) = (0, 0);
    for (section, key, entry) in data.iter() {
        let key_text = format_key(key);
        let tactic = match json_to_py(&entry.tactic) {
            Ok(t) => t.to_string(),
            Err(e) => {
                warnings.push(format!("{section} entry {key}: {e}; left out"));
                skipped += 1;
                continue;
            }
        };
        if !entry.time_us.is_finite() || entry.time_us < 0.0 {
            warnings.push(format!(
                "{section} entry {key}: time {} is not a finite non-negative number; left out",
                entry.time_us
            ));
            skipped += 1;
            continue;
        }
        let min_time = OValue::scalar(pyliteral::repr_float(us_to_ms(entry.time_us)));
        sections
            .entry(section.name())
            .or_default()
            .insert(key_text, (entry.runner_index, OValue::string(&tactic), min_time));
        written += 1;
    }
    let data_tactic = |t: &OValue| -> Option<Value> {
        let OValue::Scalar(text) = t else { return None };
        match serde_json::from_str::<Value>(text).ok()? {
            Value::String(repr) => pyliteral::parse_literal(&repr).ok().map(|p| py_to_json(&p)),
            other => Some(other),
        }
    };

    let metadata = export_metadata(data, origin.as_ref(), &mut warnings);
    let entry_value = |(runner, tactic, min_time): (u32, OValue, OValue)| {
        OValue::Object(vec![
            ("runner_id".into(), OValue::scalar(runner.to_string())),
            ("tactic".into(), tactic),
            ("min_time".into(), min_time),
        ])
    };
    let mut top: Vec<(String, OValue)> = Vec::new();
    let mut metadata = Some(metadata);
    if let Some(origin) = &origin {
        for (i, (name, rows)) in origin.sections.iter().enumerate() {
            if i == origin.metadata_at {
                top.push(("metadata".into(), metadata.take().unwrap_or(OValue::Object(vec![]))));
            }
            let Some(ours) = sections.get_mut(name) else { continue };
            let Some(section) = Section::parse(name) else { continue };
            let mut members = Vec::new();
            for (key_text, min_time, tactic) in rows {
                let Some((runner, mut t, mut m)) = ours.remove(key_text) else { continue };
                let entry = parse_key(key_text).ok().and_then(|k| data.get(section, &k));
                if let Some(entry) = entry {
                    // The file's text, when it still says what the entry holds.
                    let ms = match min_time {
                        OValue::Scalar(text) => text.parse::<f64>().ok(),
                        _ => None,
                    };
                    if ms.is_some_and(|ms| ms_to_us(ms) == entry.time_us) {
                        m = min_time.clone();
                    }
                    if data_tactic(tactic).as_ref() == Some(&entry.tactic) {
                        t = tactic.clone();
                    }
                }
                members.push((key_text.clone(), entry_value((runner, t, m))));
            }
            members.extend(ours.iter().map(|(k, v)| (k.clone(), entry_value(v.clone()))));
            sections.remove(name);
            top.push((name.clone(), OValue::Object(members)));
        }
        if origin.metadata_at >= origin.sections.len() {
            if let Some(metadata) = metadata.take() {
                top.push(("metadata".into(), metadata));
            }
        }
    }
    if let Some(metadata) = metadata {
        top.insert(0, ("metadata".into(), metadata));
    }
    for (name, entries) in sections {
        let members = entries.into_iter().map(|(k, v)| (k, entry_value(v))).collect();
        top.push((name, OValue::Object(members)));
    }
    let layout =
        origin.as_ref().map_or(TextLayout { indent: Some(2), final_newline: true }, |o| o.layout);
    let doc = OValue::Object(top);
    let text = ordered::write(&doc, layout);
    (doc, Exported { files: vec![(String::new(), text)], warnings, written, skipped })
}

/// The document as pretty JSON text with a final newline.
pub fn to_json_text(doc: &Value) -> String {
    let mut text = serde_json::to_string_pretty(doc).unwrap_or_else(|_| doc.to_string());
    text.push('\n');
    text
}

fn export_metadata(
    data: &CacheData,
    origin: Option<&Origin>,
    warnings: &mut Vec<String>,
) -> OValue {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, _, e) in data.iter() {
        *counts.entry(e.env.as_str()).or_default() += 1;
    }
    // Most entries first; ties go to the smaller digest (deterministic).
    let main_env =
        counts.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(env, _)| *env);
    if counts.len() > 1 {
        warnings.push(format!(
            "entries come from {} environments; the TensorRT-LLM format holds one, so metadata describes the most common ({})",
            counts.len(),
            main_env.unwrap_or("?")
        ));
    }
    // The imported file's own block, as written, when it describes the
    // environment of the entries (or there are none).
    if let Some(meta) = origin.and_then(|o| o.metadata.as_ref()) {
        let (identity, _) = identity_from_metadata(Some(&meta.to_value()), &mut Vec::new());
        if main_env.is_none_or(|env| env == identity.digest()) {
            return meta.clone();
        }
    }
    let identity = main_env.and_then(|env| data.metadata.environments.get(env));
    let lib_version = match identity {
        Some(id) => match id.lib_version.strip_prefix(LIB_VERSION_PREFIX) {
            Some(v) => v.to_string(),
            None => format!("ranktune-{}", id.lib_version),
        },
        None => "unknown".to_string(),
    };
    let device_name = identity.map_or("unknown", |id| id.device_name.as_str());
    let capability: Vec<OValue> = identity
        .and_then(|id| {
            let parts: Option<Vec<u64>> =
                id.capability.split('.').map(|p| p.parse().ok()).collect();
            parts
        })
        .map(|p| p.into_iter().map(|n| OValue::scalar(n.to_string())).collect())
        .unwrap_or_default();
    // The earliest entry: for imported entries that is the reference file's
    // own creation time.
    let created = data
        .iter()
        .map(|(_, _, e)| e.created_unix)
        .filter(|t| *t > 0)
        .min()
        .unwrap_or(data.metadata.created_unix);
    OValue::Object(vec![
        ("lib_version".into(), OValue::string(&lib_version)),
        ("creation_timestamp".into(), OValue::scalar(pyliteral::repr_float(created as f64))),
        ("device_name".into(), OValue::string(device_name)),
        ("device_capability".into(), OValue::Array(capability)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn time_conversion_is_decimal_exact() {
        for ms in [0.0123, 1e-06, 0.1, 2.5, 1234.5678, 0.0, 3.0e-5] {
            let us = ms_to_us(ms);
            assert_eq!(us_to_ms(us), ms);
        }
        assert_eq!(ms_to_us(0.0123), 12.3);
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp(&json!(1764480000.75)), Some(1764480000));
        assert_eq!(parse_timestamp(&json!("1764480000")), Some(1764480000));
        assert_eq!(parse_timestamp(&json!("2025-11-30T05:20:00")), Some(1764480000));
        assert_eq!(parse_timestamp(&json!("2025-11-30 05:20:00.123456")), Some(1764480000));
        assert_eq!(parse_timestamp(&json!("2025-11-30T06:20:00+01:00")), Some(1764480000));
        assert_eq!(parse_timestamp(&json!("1970-01-01T00:00:00Z")), Some(0));
        assert_eq!(parse_timestamp(&json!("yesterday")), None);
        assert_eq!(parse_timestamp(&json!(-5)), None);
        assert_eq!(parse_timestamp(&json!([1])), None);
    }

    #[test]
    fn shape_detection() {
        assert!(looks_like_trtllm(&json!({"metadata": {"creation_timestamp": 1}})));
        assert!(looks_like_trtllm(&json!({"rank_0": {"('a', 'b', 'c', ())": {}}})));
        assert!(looks_like_trtllm(&json!({})));
        assert!(!looks_like_trtllm(&json!({"format": "ranktune", "version": 1})));
        assert!(!looks_like_trtllm(&json!([1])));
        assert!(!looks_like_trtllm(&json!({"rank_0": {"op/r": {}}})));
    }
}
