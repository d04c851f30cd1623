//! FlashInfer's autotuner cache (format name `flashinfer`): one JSON object
//! whose keys are the `str()` of a Python tuple `(custom_op,
//! runner_class_name, optimization_profile)` — the profile being the
//! tuned input shapes, a tuple of int tuples — and whose values are
//! `[runner_class_name, tactic]` (an int, or nested arrays for compound
//! tactics). Two special members describe environments: `_metadata` (the
//! one that created the file: `flashinfer_version`, `cuda_version`,
//! `cublas_version`, `cudnn_version`, `gpu_name`) and `_last_updated_by`
//! (the one that last wrote it).
//!
//! FlashInfer compares `_metadata` with the running environment and
//! distrusts the whole file on a mismatch. Here the file's environment
//! becomes its entries' identity instead, so `cache check` marks them
//! stale entry by entry, describing where they were measured, and a file
//! last written by another environment than the one that created it is
//! named in a warning listing the fields that differ.
//!
//! Entries: op `custom_op`, runner the class name, fingerprint
//! [`FINGERPRINT`], bucket the profile's shapes, tactic the JSON tactic,
//! time 0 (the file holds none), checksum [`CHECKSUM`]. An import records
//! the file's layout and member order in the cache's metadata so
//! [`export`] writes the file back as it was. No file I/O here.

use crate::ordered::{self, Layout, OValue};
use crate::trtllm::{parse_literal, repr_str, PyValue};
use crate::{Exported, Format, FormatError, Imported, Input, SourceError, Writer};
use ranktune_cache::{CacheData, Entry, EntryKey, Identity, Section};
use serde_json::Value;
use std::collections::BTreeMap;

/// The fingerprint of imported entries (the format keys by class name).
pub const FINGERPRINT: &str = "flashinfer";
/// The candidate-set checksum of imported entries.
pub const CHECKSUM: &str = "flashinfer";
/// Prefix of the `lib_version` of their identities.
pub const LIB_VERSION_PREFIX: &str = "flashinfer-";
/// The environment fields of `_metadata`, in the order FlashInfer writes
/// them.
pub const ENV_FIELDS: &[&str] =
    &["flashinfer_version", "cuda_version", "cublas_version", "cudnn_version", "gpu_name"];

const ORIGIN: &str = "flashinfer";

/// True when a parsed document looks like FlashInfer's cache: a
/// `_metadata` object with FlashInfer's fields, or members keyed by
/// 3-tuples whose values are `[runner, tactic]`.
pub fn looks_like_flashinfer(doc: &Value) -> bool {
    let Some(obj) = doc.as_object() else { return false };
    if obj
        .get("_metadata")
        .and_then(Value::as_object)
        .is_some_and(|m| m.contains_key("flashinfer_version") || m.contains_key("gpu_name"))
    {
        return true;
    }
    obj.iter().next().is_some_and(|(k, v)| {
        k.starts_with('(') && v.as_array().is_some_and(|a| a.len() == 2 && a[0].is_string())
    })
}

/// The identity an environment object describes.
fn identity_of(env: Option<&Value>) -> Identity {
    let field = |name: &str| match env.and_then(|e| e.get(name)) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "unknown".into(),
    };
    Identity {
        lib_version: format!("{LIB_VERSION_PREFIX}{}", field("flashinfer_version")),
        device_kind: "cuda".into(),
        device_name: field("gpu_name"),
        capability: format!(
            "cuda {}, cublas {}, cudnn {}",
            field("cuda_version"),
            field("cublas_version"),
            field("cudnn_version")
        ),
        cores: 0,
    }
}

/// Imports FlashInfer cache bytes: every member whose key and value parse
/// is an entry; every other one is named in a warning, skipped, and kept
/// for [`export`].
pub fn import_bytes(bytes: &[u8]) -> Result<Imported, FormatError> {
    let text = std::str::from_utf8(bytes).map_err(FormatError::not_utf8_text)?;
    let doc = ordered::parse(text)
        .map_err(|e| FormatError::NotJson { at: None, message: e.to_string() })?;
    let members = doc
        .members()
        .ok_or(FormatError::NotAnObject { found: None, expected: "of tuned configs" })?;
    let mut out = Imported::default();
    let created = doc.get("_metadata").map(OValue::to_value);
    let updated = doc.get("_last_updated_by").map(OValue::to_value);
    if created.is_none() {
        out.warnings.push("no \"_metadata\": the environment is recorded as unknown".into());
    }
    if let (Some(c), Some(u)) = (&created, &updated) {
        let differ: Vec<String> = ENV_FIELDS
            .iter()
            .filter(|f| c.get(**f) != u.get(**f))
            .map(|f| {
                let show = |v: Option<&Value>| v.map_or("-".to_string(), |v| v.to_string());
                format!("{f} {} -> {}", show(c.get(*f)), show(u.get(*f)))
            })
            .collect();
        if !differ.is_empty() {
            out.warnings.push(format!(
                "last updated by another environment than the one that created it ({}); \
                 entries are recorded under the creating one",
                differ.join(", ")
            ));
        }
    }
    let identity = identity_of(created.as_ref());
    let env = identity.digest();
    out.data.metadata.environments.insert(env.clone(), identity);

    let mut order = Vec::new();
    let mut kept = Vec::new();
    for (name, value) in members {
        order.push(OValue::string(name));
        if name == "_metadata" || name == "_last_updated_by" {
            kept.push(OValue::Array(vec![OValue::string(name), value.clone()]));
            continue;
        }
        match import_entry(name, &value.to_value(), &env) {
            Ok((key, entry)) => out.data.insert(Section::Rank(0), key, entry),
            Err(why) => {
                out.warnings.push(format!("entry {name}: {why}; skipped (kept for export)"));
                out.skipped += 1;
                kept.push(OValue::Array(vec![OValue::string(name), value.clone()]));
            }
        }
    }
    let record = OValue::Object(vec![
        ("layout".into(), Layout::of(text).to_record()),
        ("order".into(), OValue::Array(order)),
        ("kept".into(), OValue::Array(kept)),
    ]);
    out.data
        .set_origin(ORIGIN, ordered::write(&record, Layout { indent: None, final_newline: false }));
    Ok(out)
}

fn import_entry(name: &str, value: &Value, env: &str) -> Result<(EntryKey, Entry), String> {
    let key = parse_literal(name).map_err(|e| format!("key is not a Python literal: {e}"))?;
    let PyValue::Tuple(parts) = key else { return Err("key is not a tuple".into()) };
    let [PyValue::Str(op), PyValue::Str(runner), profile] = parts.as_slice() else {
        return Err("key is not (custom_op, runner_class_name, profile)".into());
    };
    let bucket = shapes(profile).ok_or("profile is not a tuple of int tuples")?;
    let pair = value.as_array().filter(|a| a.len() == 2).ok_or("value is not [runner, tactic]")?;
    if pair[0].as_str() != Some(runner.as_str()) {
        return Err(format!("value names runner {} but the key {runner:?}", pair[0]));
    }
    let entry = Entry {
        runner_index: 0,
        tactic: pair[1].clone(),
        time_us: 0.0,
        candidates: Vec::new(),
        checksum: CHECKSUM.into(),
        env: env.to_string(),
        created_unix: 0,
    };
    let key = EntryKey {
        op: op.clone(),
        runner: runner.clone(),
        fingerprint: FINGERPRINT.into(),
        bucket: ranktune_cache::sizes_bucket(&bucket),
    };
    Ok((key, entry))
}

fn shapes(v: &PyValue) -> Option<Vec<Vec<u64>>> {
    let (PyValue::Tuple(items) | PyValue::List(items)) = v else { return None };
    items
        .iter()
        .map(|shape| {
            let (PyValue::Tuple(dims) | PyValue::List(dims)) = shape else { return None };
            dims.iter()
                .map(|d| match d {
                    PyValue::Int(n) => n.parse().ok(),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// The `str()` of the key tuple of an entry.
fn format_key(key: &EntryKey) -> String {
    let shapes: Vec<String> = key
        .bucket
        .iter()
        .map(|dims| match dims.as_slice() {
            [one] => format!("({one},)"),
            _ => format!(
                "({})",
                dims.iter().map(ranktune_cache::Dim::to_string).collect::<Vec<_>>().join(", ")
            ),
        })
        .collect();
    let profile = match shapes.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", shapes.join(", ")),
    };
    format!("({}, {}, {profile})", repr_str(&key.op), repr_str(&key.runner))
}

/// Writes the cache's FlashInfer entries (fingerprint [`FINGERPRINT`]) as
/// a FlashInfer cache: the imported file's `_metadata`, `_last_updated_by`,
/// member order, skipped members and layout when there is one; otherwise
/// `_metadata` from the entries' environment, indent 2.
pub fn export(data: &CacheData) -> Exported {
    let mut out = Exported::default();
    let mut entries: BTreeMap<String, OValue> = BTreeMap::new();
    let mut envs: BTreeMap<&str, usize> = BTreeMap::new();
    for (section, key, entry) in data.iter() {
        if key.fingerprint != FINGERPRINT {
            out.warnings.push(format!("{section} entry {key}: not a FlashInfer entry; left out"));
            out.skipped += 1;
            continue;
        }
        let name = format_key(key);
        let value =
            OValue::Array(vec![OValue::string(&key.runner), OValue::from_value(&entry.tactic)]);
        match entries.get(&name) {
            Some(v) if v != &value => {
                out.warnings.push(format!(
                    "{section} entry {key}: another section holds another tactic; the first is written"
                ));
                out.skipped += 1;
            }
            Some(_) => {}
            None => {
                entries.insert(name, value);
                *envs.entry(entry.env.as_str()).or_default() += 1;
                out.written += 1;
            }
        }
    }
    let record = data.origin(ORIGIN).and_then(|t| ordered::parse(t).ok());
    let text = |v: &OValue| match v.to_value() {
        Value::String(s) => Some(s),
        _ => None,
    };
    let mut kept: BTreeMap<String, OValue> = BTreeMap::new();
    let mut order = Vec::new();
    let mut layout = Layout { indent: Some(2), final_newline: false };
    if let Some(record) = &record {
        if let Some(OValue::Array(items)) = record.get("kept") {
            for item in items {
                if let OValue::Array(p) = item {
                    if let (Some(name), Some(v)) = (p.first().and_then(text), p.get(1)) {
                        kept.insert(name, v.clone());
                    }
                }
            }
        }
        if let Some(OValue::Array(names)) = record.get("order") {
            order = names.iter().filter_map(text).collect();
        }
        if let Some(l) = record.get("layout").and_then(Layout::from_record) {
            layout = l;
        }
    }
    if !kept.contains_key("_metadata") {
        let main = envs.iter().max_by_key(|(_, n)| **n).map(|(e, _)| *e);
        let id = main.and_then(|e| data.metadata.environments.get(e));
        let meta = id.map(|id| {
            let caps: Vec<&str> = id.capability.split(", ").collect();
            let cap = |name: &str| {
                caps.iter()
                    .find_map(|c| c.strip_prefix(name).map(|v| v.trim().to_string()))
                    .unwrap_or_else(|| "unknown".into())
            };
            OValue::Object(vec![
                (
                    "flashinfer_version".into(),
                    OValue::string(
                        id.lib_version.strip_prefix(LIB_VERSION_PREFIX).unwrap_or(&id.lib_version),
                    ),
                ),
                ("cuda_version".into(), OValue::string(&cap("cuda"))),
                ("cublas_version".into(), OValue::string(&cap("cublas"))),
                ("cudnn_version".into(), OValue::string(&cap("cudnn"))),
                ("gpu_name".into(), OValue::string(&id.device_name)),
            ])
        });
        if let Some(meta) = meta {
            kept.insert("_metadata".into(), meta);
            order.insert(0, "_metadata".into());
        }
    }
    let mut members = Vec::new();
    for name in &order {
        if let Some(v) = kept.remove(name).or_else(|| entries.remove(name)) {
            members.push((name.clone(), v));
        }
    }
    members.extend(kept);
    members.extend(entries);
    out.files = vec![(String::new(), ordered::write(&OValue::Object(members), layout))];
    out
}

/// FlashInfer's autotuner cache file.
pub struct Flashinfer;

impl Format for Flashinfer {
    fn name(&self) -> &'static str {
        "flashinfer"
    }

    fn about(&self) -> &'static str {
        "A FlashInfer autotuner cache file"
    }

    fn noun(&self) -> &'static str {
        "a FlashInfer autotuner cache"
    }

    fn sign(&self) -> &'static str {
        "\"_metadata\" with flashinfer_version or gpu_name, or members keyed by \
         tuples holding [runner, tactic]"
    }

    fn detect(&self, doc: &Value) -> bool {
        looks_like_flashinfer(doc)
    }

    fn read(&self, file: &Input<'_>) -> Result<Imported, SourceError> {
        file.document()?;
        import_bytes(file.bytes()).map_err(|source| SourceError::import(file, &Flashinfer, source))
    }

    fn writer(&self) -> Option<Writer> {
        Some(Writer {
            about: "FlashInfer's autotuner cache (one JSON document)",
            lacks: "holds nothing to export",
            export,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_format_as_python_tuples() {
        let key = EntryKey {
            op: "fp4_gemm".into(),
            runner: "CudnnFp4GemmRunner".into(),
            fingerprint: FINGERPRINT.into(),
            bucket: ranktune_cache::sizes_bucket(&[vec![4, 4608], vec![7168]]),
        };
        assert_eq!(format_key(&key), "('fp4_gemm', 'CudnnFp4GemmRunner', ((4, 4608), (7168,)))");
        let one = EntryKey { bucket: ranktune_cache::sizes_bucket(&[vec![4, 4608]]), ..key };
        assert_eq!(format_key(&one), "('fp4_gemm', 'CudnnFp4GemmRunner', ((4, 4608),))");
    }
}
