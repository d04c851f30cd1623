//! FlashInfer's autotuner cache (format name `flashinfer`), as
//! `AutoTuner.save_configs` writes it: one JSON object, `indent=2`, no
//! final newline. Members:
//!
//! - `_metadata`: the environment that created the file
//!   (`flashinfer_version`, `cuda_version`, `cublas_version`,
//!   `cudnn_version`, `cudnn_frontend_version`, `cutlass_dsl_version`,
//!   `gpu`; files from ranktune's earlier reading may say `gpu_name`);
//! - `_records` (0.7.x): product records, kept as they are;
//! - entries, sorted by key text: the key is the `str()` of the tuple
//!   `(custom_op, runner_class_name, nearest_profile[, extras])` (see
//!   [`key`]), the value `[runner, tactic]`, in 0.7.x optionally followed
//!   by the measurement policy and the selection record;
//! - `_generation` (0.7.x): a digest of everything else (see
//!   [`generation`]), written afresh on export.
//!
//! Every member whose name starts with `_` is kept, never an entry.
//!
//! Entries: op `custom_op`, runner the class name, fingerprint
//! `flashinfer:` + the key's template (the key text with its profile's
//! dims as `#`, so `-1` dims, extras and quoting are kept exactly), bucket
//! the profile's non-negative dims, tactic the JSON tactic, time the
//! selection record's `time_ms` in microseconds (0 without one, or when it
//! is not a finite non-negative number), checksum
//! [`CHECKSUM`]. The file's environment becomes the entries' identity, so
//! `cache check` marks them stale entry by entry where FlashInfer would
//! distrust the whole file.
//!
//! An import records the layout, member order, every kept member and each
//! entry's value as written (policy, selection and number text included)
//! in the cache's metadata, so [`export`] writes the file back as it was,
//! and an entry ranktune changed as `[runner, tactic]`. No file I/O here.

pub mod generation;
pub mod key;

use crate::ordered::{self, OValue, TextLayout};
use crate::trtllm::repr_str;
use crate::{Exported, Format, FormatError, Imported, Input, SourceError, Writer};
use ranktune_cache::{CacheData, Entry, EntryKey, Identity, Section};
use serde_json::Value;
use std::collections::BTreeMap;

/// The fingerprint of entries made before keys were kept whole (their key
/// is rebuilt from op, runner and bucket as a 3-element tuple).
pub const FINGERPRINT: &str = "flashinfer";
/// The prefix of imported entries' fingerprints: the key's template follows.
pub const FINGERPRINT_PREFIX: &str = "flashinfer:";
/// The candidate-set checksum of imported entries.
pub const CHECKSUM: &str = "flashinfer";
/// Prefix of the `lib_version` of their identities.
pub const LIB_VERSION_PREFIX: &str = "flashinfer-";
/// The environment fields of `_metadata`, in the order FlashInfer 0.7.x
/// writes them.
pub const ENV_FIELDS: &[&str] = &[
    "flashinfer_version",
    "cuda_version",
    "cublas_version",
    "cudnn_version",
    "cudnn_frontend_version",
    "cutlass_dsl_version",
    "gpu",
];
/// The member that holds the digest of the rest (0.7.x).
pub const GENERATION: &str = "_generation";

const ORIGIN: &str = "flashinfer";

/// True when a parsed document looks like FlashInfer's cache: a
/// `_metadata` object with FlashInfer's fields, or members keyed by
/// tuples whose values are `[runner, tactic, …]`.
pub fn looks_like_flashinfer(doc: &Value) -> bool {
    let Some(obj) = doc.as_object() else { return false };
    if obj.get("_metadata").and_then(Value::as_object).is_some_and(|m| {
        m.contains_key("flashinfer_version") || m.contains_key("gpu") || m.contains_key("gpu_name")
    }) {
        return true;
    }
    obj.iter().find(|(k, _)| !k.starts_with('_')).is_some_and(|(k, v)| {
        k.starts_with('(')
            && v.as_array().is_some_and(|a| (2..=4).contains(&a.len()) && a[0].is_string())
    })
}

/// The device name of an environment object (`gpu`, or `gpu_name`).
fn gpu_of(env: Option<&Value>) -> Option<&Value> {
    env.and_then(|e| e.get("gpu").or_else(|| e.get("gpu_name")))
}

/// The identity an environment object describes.
fn identity_of(env: Option<&Value>) -> Identity {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "unknown".into(),
    };
    let field = |name: &str| text(env.and_then(|e| e.get(name)));
    let mut capability = format!(
        "cuda {}, cublas {}, cudnn {}",
        field("cuda_version"),
        field("cublas_version"),
        field("cudnn_version")
    );
    for (name, label) in
        [("cudnn_frontend_version", "cudnn-frontend"), ("cutlass_dsl_version", "cutlass-dsl")]
    {
        if env.and_then(|e| e.get(name)).is_some() {
            capability.push_str(&format!(", {label} {}", field(name)));
        }
    }
    Identity {
        lib_version: format!("{LIB_VERSION_PREFIX}{}", field("flashinfer_version")),
        device_kind: "cuda".into(),
        device_name: text(gpu_of(env)),
        capability,
        cores: 0,
    }
}

/// Imports FlashInfer cache bytes: every member whose key is a tuple
/// starting with the op and runner names and whose value is `[runner,
/// tactic, …]` is an entry; every other one is named in a warning, skipped,
/// and kept for [`export`], as are all members named `_…`.
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
        let differ: Vec<String> =
            ["flashinfer_version", "cuda_version", "cublas_version", "cudnn_version"]
                .iter()
                .map(|f| (f.to_string(), c.get(*f), u.get(*f)))
                .chain(std::iter::once(("gpu_name".to_string(), gpu_of(Some(c)), gpu_of(Some(u)))))
                .filter(|(_, a, b)| a != b)
                .map(|(f, a, b)| {
                    let show = |v: Option<&Value>| v.map_or("-".to_string(), |v| v.to_string());
                    format!("{f} {} -> {}", show(a), show(b))
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
    let mut values = Vec::new();
    for (name, value) in members {
        order.push(OValue::string(name));
        if name.starts_with('_') {
            kept.push(OValue::Array(vec![OValue::string(name), value.clone()]));
            continue;
        }
        match import_entry(name, value, &env) {
            Ok((key, entry)) => {
                out.data.insert(Section::Rank(0), key, entry);
                values.push(OValue::Array(vec![OValue::string(name), value.clone()]));
            }
            Err(why) => {
                out.warnings.push(format!("entry {name}: {why}; skipped (kept for export)"));
                out.skipped += 1;
                kept.push(OValue::Array(vec![OValue::string(name), value.clone()]));
            }
        }
    }
    let record = OValue::Object(vec![
        ("layout".into(), TextLayout::of(text).to_record()),
        ("order".into(), OValue::Array(order)),
        ("kept".into(), OValue::Array(kept)),
        ("values".into(), OValue::Array(values)),
    ]);
    out.data.set_origin(
        ORIGIN,
        ordered::write(&record, TextLayout { indent: None, final_newline: false }),
    );
    Ok(out)
}

fn import_entry(name: &str, value: &OValue, env: &str) -> Result<(EntryKey, Entry), String> {
    let parsed = key::parse(name)?;
    let OValue::Array(items) = value else {
        return Err("value is not [runner, tactic, …]".into());
    };
    let (Some(runner), Some(tactic)) = (items.first(), items.get(1)) else {
        return Err("value is not [runner, tactic, …]".into());
    };
    let Value::String(runner) = runner.to_value() else {
        return Err("value does not start with the runner's name".into());
    };
    if runner != parsed.runner {
        return Err(format!("value names runner {runner:?} but the key {:?}", parsed.runner));
    }
    let time_us = items
        .get(3)
        .and_then(|sel| sel.get("time_ms"))
        .and_then(|t| t.to_value().as_f64())
        .map(|ms| ms * 1000.0)
        .filter(|us| us.is_finite() && *us >= 0.0)
        .unwrap_or(0.0);
    let entry = Entry {
        runner_index: 0,
        tactic: tactic.to_value(),
        time_us,
        candidates: Vec::new(),
        checksum: CHECKSUM.into(),
        env: env.to_string(),
        created_unix: 0,
    };
    let key = EntryKey {
        op: parsed.op,
        runner: parsed.runner,
        fingerprint: format!("{FINGERPRINT_PREFIX}{}", parsed.template),
        bucket: ranktune_cache::sizes_bucket(&parsed.dims),
    };
    Ok((key, entry))
}

/// The key text of an entry: its template filled with its bucket, or for
/// an entry of the old fingerprint, the 3-element tuple of op, runner and
/// bucket. `None` for another format's entry, or a template that does not
/// match the bucket.
fn format_key(key: &EntryKey) -> Option<String> {
    if let Some(template) = key.fingerprint.strip_prefix(FINGERPRINT_PREFIX) {
        return key::render(template, &key.bucket);
    }
    if key.fingerprint != FINGERPRINT {
        return None;
    }
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
    Some(format!("({}, {}, {profile})", repr_str(&key.op), repr_str(&key.runner)))
}

/// Pairs `[name, value]` of an origin record's list member.
fn record_pairs(record: Option<&OValue>, member: &str) -> BTreeMap<String, OValue> {
    let mut out = BTreeMap::new();
    if let Some(OValue::Array(items)) = record.and_then(|r| r.get(member)) {
        for item in items {
            if let OValue::Array(p) = item {
                if let (Some(Value::String(name)), Some(v)) =
                    (p.first().map(OValue::to_value), p.get(1))
                {
                    out.insert(name, v.clone());
                }
            }
        }
    }
    out
}

/// `_metadata` from an identity, for a cache with no imported file.
fn metadata_of(id: &Identity) -> OValue {
    let caps: Vec<&str> = id.capability.split(", ").collect();
    let cap = |name: &str| {
        caps.iter()
            .find_map(|c| c.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
            .unwrap_or("unknown")
            .to_string()
    };
    let mut meta = vec![
        (
            "flashinfer_version".into(),
            OValue::string(
                id.lib_version.strip_prefix(LIB_VERSION_PREFIX).unwrap_or(&id.lib_version),
            ),
        ),
        ("cuda_version".into(), OValue::string(&cap("cuda"))),
        ("cublas_version".into(), OValue::string(&cap("cublas"))),
        ("cudnn_version".into(), OValue::string(&cap("cudnn"))),
    ];
    // Written only when the identity has them, so the identity reads back
    // the same (FlashInfer treats a missing field like "unknown").
    for (name, label) in
        [("cudnn_frontend_version", "cudnn-frontend"), ("cutlass_dsl_version", "cutlass-dsl")]
    {
        if caps.iter().any(|c| c.starts_with(&format!("{label} "))) {
            meta.push((name.into(), OValue::string(&cap(label))));
        }
    }
    meta.push(("gpu".into(), OValue::string(&id.device_name)));
    OValue::Object(meta)
}

/// Writes the cache's FlashInfer entries as a FlashInfer cache. With an
/// imported file: its layout, its `_…` members and skipped members, each
/// unchanged entry's value as it was written, and its member order (entries
/// sorted by key text, as FlashInfer writes them, when the file had them
/// so); `_generation` recomputed when the file had one. Without: `_metadata`
/// from the entries' main environment, entries sorted, indent 2.
pub fn export(data: &CacheData) -> Exported {
    let mut out = Exported::default();
    let record = data.origin(ORIGIN).and_then(|t| ordered::parse(t).ok());
    let mut kept = record_pairs(record.as_ref(), "kept");
    let originals = record_pairs(record.as_ref(), "values");
    let mut entries: BTreeMap<String, OValue> = BTreeMap::new();
    let mut envs: BTreeMap<&str, usize> = BTreeMap::new();
    for (section, key, entry) in data.iter() {
        let Some(name) = format_key(key) else {
            out.warnings.push(format!("{section} entry {key}: not a FlashInfer entry; left out"));
            out.skipped += 1;
            continue;
        };
        let tactic = OValue::from_value(&entry.tactic);
        let value = match originals.get(&name) {
            Some(OValue::Array(v))
                if v.first().map(OValue::to_value) == Some(Value::String(key.runner.clone()))
                    && v.get(1).map(OValue::to_value) == Some(entry.tactic.clone()) =>
            {
                OValue::Array(v.clone())
            }
            _ => OValue::Array(vec![OValue::string(&key.runner), tactic]),
        };
        match entries.get(&name) {
            Some(v) if v.to_value() != value.to_value() => {
                out.warnings.push(format!(
                    "{section} entry {key}: another section holds another tactic; the first is written"
                ));
                out.skipped += 1;
            }
            Some(_) => {}
            None => {
                kept.remove(&name);
                entries.insert(name, value);
                *envs.entry(entry.env.as_str()).or_default() += 1;
                out.written += 1;
            }
        }
    }
    let text = |v: &OValue| match v.to_value() {
        Value::String(s) => Some(s),
        _ => None,
    };
    let order: Vec<String> = match record.as_ref().and_then(|r| r.get("order")) {
        Some(OValue::Array(names)) => names.iter().filter_map(text).collect(),
        _ => Vec::new(),
    };
    let layout = record
        .as_ref()
        .and_then(|r| r.get("layout"))
        .and_then(TextLayout::from_record)
        .unwrap_or(TextLayout { indent: Some(2), final_newline: false });
    let had_generation = kept.remove(GENERATION).is_some();
    if !kept.contains_key("_metadata") && record.is_none() {
        let main = envs.iter().max_by_key(|(_, n)| **n).map(|(e, _)| *e);
        if let Some(id) = main.and_then(|e| data.metadata.environments.get(e)) {
            kept.insert("_metadata".into(), metadata_of(id));
        }
    }
    // Members named `_…` first, in file order (`_metadata` leading when
    // made here), then the entries and skipped members.
    let mut members: Vec<(String, OValue)> = Vec::new();
    if record.is_none() {
        if let Some(meta) = kept.remove("_metadata") {
            members.push(("_metadata".into(), meta));
        }
    }
    for name in order.iter().filter(|n| n.starts_with('_')) {
        if let Some(v) = kept.remove(name) {
            members.push((name.clone(), v));
        }
    }
    let file_entries: Vec<&String> = order.iter().filter(|n| !n.starts_with('_')).collect();
    let sorted = file_entries.windows(2).all(|w| w[0] <= w[1]);
    let mut body: Vec<(String, OValue)> = Vec::new();
    if sorted {
        let mut all: BTreeMap<String, OValue> = std::mem::take(&mut kept);
        all.append(&mut entries);
        body.extend(all);
    } else {
        for name in file_entries {
            if let Some(v) = kept.remove(name).or_else(|| entries.remove(name)) {
                body.push((name.clone(), v));
            }
        }
        body.extend(std::mem::take(&mut kept));
        body.extend(std::mem::take(&mut entries));
    }
    members.extend(body);
    if had_generation {
        let digest = generation::of(&members);
        members.push((GENERATION.into(), OValue::string(&digest)));
    }
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
        "\"_metadata\" with flashinfer_version or gpu, or members keyed by \
         tuples holding [runner, tactic, …]"
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
    fn old_keys_format_as_python_tuples() {
        let key = EntryKey {
            op: "fp4_gemm".into(),
            runner: "CudnnFp4GemmRunner".into(),
            fingerprint: FINGERPRINT.into(),
            bucket: ranktune_cache::sizes_bucket(&[vec![4, 4608], vec![7168]]),
        };
        assert_eq!(
            format_key(&key).unwrap(),
            "('fp4_gemm', 'CudnnFp4GemmRunner', ((4, 4608), (7168,)))"
        );
        let one =
            EntryKey { bucket: ranktune_cache::sizes_bucket(&[vec![4, 4608]]), ..key.clone() };
        assert_eq!(format_key(&one).unwrap(), "('fp4_gemm', 'CudnnFp4GemmRunner', ((4, 4608),))");
        let other = EntryKey { fingerprint: "blocked".into(), ..key };
        assert_eq!(format_key(&other), None);
    }
}
