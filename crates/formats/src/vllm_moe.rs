//! vLLM's and SGLang's tuned fused-MoE configs (format name `vllm-moe`):
//! files named `E=<experts>,N=<n>,device_name=<GPU>[,dtype=<dtype>]
//! [,block_shape=[<a>,<b>]][,<selector>=<value>…][_down].json` (the GPU's
//! name with spaces as `_`; SGLang writes the block shape `[a, b]` and adds
//! `per_channel_quant=True` and `_down`, vLLM `backend=flydsl` and `_down`),
//! each mapping a batch size (a string) to a Triton config object
//! (`BLOCK_SIZE_M`, `BLOCK_SIZE_N`, `BLOCK_SIZE_K`, `GROUP_SIZE_M`,
//! `num_warps`, `num_stages`, and whatever else a file adds), sometimes
//! with a top-level `triton_version`.
//!
//! In ranktune's model one file is one [`EntryKey`] family: op
//! [`OP`], runner [`RUNNER`], fingerprint the file name's selectors after
//! `N` exactly as written (`device_name=…[,dtype=…][,block_shape=…]…[_down]`),
//! bucket `[[M], [E, N]]`;
//! the tactic is the config object. The files hold no timings: entries
//! carry time 0 and [`CHECKSUM`], so the tuner never reuses them as its
//! own. The environment records the device and the Triton version.
//!
//! An import also records what the file looked like (member order, key
//! order of every config, indentation, members that are not configs, and
//! the text itself when its layout is one the writer does not reproduce) in the
//! cache's metadata, so [`export`] writes the same file back. This module
//! does no file I/O: callers hand it names and text, it hands back text.

use crate::ordered::{self, OValue, TextLayout};
use crate::{Exported, Format, FormatError, Imported, Input, SourceError, Writer};
use ranktune_cache::{read_cache_bytes, CacheData, CacheError, Entry, EntryKey, Identity, Section};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The op of imported entries.
pub const OP: &str = "fused_moe";
/// The runner of imported entries.
pub const RUNNER: &str = "triton";
/// The candidate-set checksum of imported entries (see the module docs).
pub const CHECKSUM: &str = "vllm-moe";
/// Prefix of the `lib_version` of their identities.
pub const LIB_VERSION_PREFIX: &str = "vllm-moe-triton-";

/// The parts of a config file's name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileName {
    /// Number of experts (`E`).
    pub experts: u64,
    /// The intermediate size per shard (`N`).
    pub n: u64,
    /// The GPU as the name spells it (spaces as `_`).
    pub device: String,
    /// The dtype selector, if any (`fp8_w8a8`, `int4_w4a16`, …).
    pub dtype: Option<String>,
    /// The block shape selector, if any (`[128,128]` as vLLM writes it,
    /// `[128, 128]` as SGLang does).
    pub block_shape: Option<String>,
    /// Further selectors after those, as written, in order (SGLang's
    /// `per_channel_quant=True`, vLLM's `backend=flydsl`).
    pub extra: Vec<String>,
    /// The name ends in `_down` (a down-projection config).
    pub down: bool,
}

impl FileName {
    /// Parses a file name (without directories). `None` when it is not
    /// such a config's name.
    pub fn parse(name: &str) -> Option<FileName> {
        let stem = name.strip_suffix(".json")?;
        let rest = stem.strip_prefix("E=")?;
        let (experts, rest) = rest.split_once(",N=")?;
        let (n, rest) = rest.split_once(",device_name=")?;
        let number = |s: &str| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
        };
        let (experts, n) = (number(experts)?, number(n)?);
        let (rest, down) = match rest.strip_suffix("_down") {
            Some(r) => (r, true),
            None => (rest, false),
        };
        // Selectors: `,<word>=<value>` after the device; a block shape's
        // `, ` inside brackets is no boundary.
        let mut parts = selectors(rest).into_iter();
        // The device may be empty when a selector follows: SGLang ships
        // files tuned where the device query answered "" (`device_name=,dtype=…`).
        let device = parts.next()?;
        if device.contains('/') || device.contains('=') || (device.is_empty() && parts.len() == 0) {
            return None;
        }
        let mut out = FileName {
            experts,
            n,
            device: device.to_string(),
            dtype: None,
            block_shape: None,
            extra: Vec::new(),
            down,
        };
        for part in parts {
            let (word, value) = part.split_once('=')?;
            match word {
                "dtype"
                    if out.dtype.is_none() && out.block_shape.is_none() && out.extra.is_empty() =>
                {
                    out.dtype = Some(value.to_string())
                }
                "block_shape" if out.block_shape.is_none() && out.extra.is_empty() => {
                    if !is_block_shape(value) {
                        return None;
                    }
                    out.block_shape = Some(value.to_string())
                }
                // dtype and block shape out of their place, or twice.
                "dtype" | "block_shape" => return None,
                _ if !value.is_empty() => out.extra.push(part.to_string()),
                _ => return None,
            }
        }
        if out.dtype.as_deref() == Some("") {
            return None;
        }
        // Only names this gives back exactly are accepted.
        (out.file_name() == name).then_some(out)
    }

    /// The fingerprint of its entries: the name's selectors after `N`.
    pub fn fingerprint(&self) -> String {
        let mut out = format!("device_name={}", self.device);
        if let Some(d) = &self.dtype {
            out.push_str(&format!(",dtype={d}"));
        }
        if let Some(b) = &self.block_shape {
            out.push_str(&format!(",block_shape={b}"));
        }
        for e in &self.extra {
            out.push(',');
            out.push_str(e);
        }
        if self.down {
            out.push_str("_down");
        }
        out
    }

    /// Reads a fingerprint and the bucket's `[E, N]` back into a name.
    pub fn from_key(fingerprint: &str, experts: u64, n: u64) -> Option<FileName> {
        FileName::parse(&format!("E={experts},N={n},{fingerprint}.json"))
    }

    /// The file name: `E=<E>,N=<N>,` and the selectors as parsed.
    pub fn file_name(&self) -> String {
        format!("E={},N={},{}.json", self.experts, self.n, self.fingerprint())
    }
}

/// Splits `text` at each `,<word>=` (word: ASCII letters and `_`) outside
/// brackets.
fn selectors(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut depth) = (0, 0usize);
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'[' => depth += 1,
            b']' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                let word: &[u8] = &bytes[i + 1..];
                let len = word.iter().take_while(|c| c.is_ascii_lowercase() || **c == b'_').count();
                if len > 0 && word.get(len) == Some(&b'=') {
                    out.push(&text[start..i]);
                    start = i + 1;
                }
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn is_block_shape(s: &str) -> bool {
    let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) else {
        return false;
    };
    inner.split(',').all(|p| {
        let p = p.trim();
        !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
    })
}

/// True when `name` (a file name without directories) is a fused-MoE
/// config's name: what `--format auto` recognises.
pub fn looks_like_vllm_moe(name: &str) -> bool {
    FileName::parse(name).is_some()
}

/// Imports one config file: `name` is its file name (without
/// directories), `bytes` its content. Every batch size whose value is a
/// config object becomes an entry; any other member is named in a warning
/// and kept for [`export`] (`triton_version` is recorded quietly).
pub fn import_file(name: &str, bytes: &[u8]) -> Result<Imported, FormatError> {
    let file = FileName::parse(name).ok_or_else(|| FormatError::Name {
        name: name.to_string(),
        convention:
            "E=<experts>,N=<n>,device_name=<GPU>[,dtype=<dtype>][,block_shape=[<a>,<b>]].json",
    })?;
    let text = std::str::from_utf8(bytes).map_err(FormatError::not_utf8_text)?;
    let doc = ordered::parse(text)
        .map_err(|e| FormatError::NotJson { at: None, message: e.to_string() })?;
    let members = doc.members().ok_or(FormatError::NotAnObject {
        found: None,
        expected: "mapping batch sizes to configs",
    })?;
    let mut out = Imported::default();
    let triton = doc.get("triton_version").and_then(|v| match v.to_value() {
        Value::String(s) => Some(s),
        _ => None,
    });
    let identity = Identity {
        lib_version: format!("{LIB_VERSION_PREFIX}{}", triton.as_deref().unwrap_or("unknown")),
        device_kind: "gpu".into(),
        device_name: file.device.clone(),
        capability: "unknown".into(),
        cores: 0,
    };
    let env = identity.digest();
    out.data.metadata.environments.insert(env.clone(), identity);

    let mut order = Vec::new();
    let mut key_orders = Vec::new();
    let mut kept = Vec::new();
    for (member, value) in members {
        order.push(OValue::string(member));
        let batch =
            member.parse::<u64>().ok().filter(|_| member.bytes().all(|b| b.is_ascii_digit()));
        // A config holds scalars JSON can carry (not Python's NaN).
        let config = value
            .members()
            .filter(|m| m.iter().all(|(_, v)| matches!(v, OValue::Scalar(_))))
            .and_then(|m| Some((m, value.try_to_value()?)));
        match (batch, config) {
            (Some(m), Some((config, tactic))) => {
                let key = EntryKey {
                    op: OP.into(),
                    runner: RUNNER.into(),
                    fingerprint: file.fingerprint(),
                    bucket: ranktune_cache::sizes_bucket(&[vec![m], vec![file.experts, file.n]]),
                };
                let entry = Entry {
                    runner_index: 0,
                    tactic,
                    time_us: 0.0,
                    candidates: Vec::new(),
                    checksum: CHECKSUM.into(),
                    env: env.clone(),
                    created_unix: 0,
                };
                out.data.insert(Section::Rank(0), key, entry);
                let keys = config.iter().map(|(k, _)| OValue::string(k)).collect();
                key_orders.push(OValue::Array(vec![OValue::string(member), OValue::Array(keys)]));
            }
            _ => {
                if member != "triton_version" {
                    out.warnings.push(format!(
                        "member {member:?} is not a batch size with a config object; skipped \
                         (kept for export)"
                    ));
                    out.skipped += 1;
                }
                kept.push(OValue::Array(vec![OValue::string(member), value.clone()]));
            }
        }
    }
    let layout = TextLayout::of(text);
    let mut record = vec![
        ("layout".into(), layout.to_record()),
        ("order".into(), OValue::Array(order)),
        ("keys".into(), OValue::Array(key_orders)),
        ("kept".into(), OValue::Array(kept)),
    ];
    // A file laid out in a way the writer does not reproduce (vLLM ships
    // hand-edited ones, e.g. a closing brace indented 2 in a file indented
    // 4): its text is recorded, and written while the configs are unchanged.
    if ordered::write(&doc, layout) != text {
        record.push(("text".into(), OValue::string(text)));
    }
    let record = OValue::Object(record);
    out.data.set_origin(
        &origin_name(&file.file_name()),
        ordered::write(&record, TextLayout { indent: None, final_newline: false }),
    );
    Ok(out)
}

fn origin_name(file_name: &str) -> String {
    format!("vllm-moe/{file_name}")
}

/// What an import recorded about one file.
#[derive(Default)]
struct Origin {
    layout: Option<TextLayout>,
    order: Vec<String>,
    keys: BTreeMap<String, Vec<String>>,
    kept: BTreeMap<String, OValue>,
    /// The file's text, when the writer does not reproduce its layout.
    text: Option<String>,
}

fn read_origin(data: &CacheData, file_name: &str) -> Origin {
    let mut origin = Origin::default();
    let Some(record) = data.origin(&origin_name(file_name)).and_then(|t| ordered::parse(t).ok())
    else {
        return origin;
    };
    let text = |v: &OValue| match v.to_value() {
        Value::String(s) => Some(s),
        _ => None,
    };
    if let Some(l) = record.get("layout").and_then(TextLayout::from_record) {
        origin.layout = Some(l);
    }
    if let Some(OValue::Array(names)) = record.get("order") {
        origin.order = names.iter().filter_map(text).collect();
    }
    let pairs = |name: &str| match record.get(name) {
        Some(OValue::Array(items)) => items
            .iter()
            .filter_map(|item| match item {
                OValue::Array(p) if p.len() == 2 => Some((text(&p[0])?, p[1].clone())),
                _ => None,
            })
            .collect::<Vec<_>>(),
        _ => Vec::new(),
    };
    for (member, keys) in pairs("keys") {
        if let OValue::Array(keys) = keys {
            origin.keys.insert(member, keys.iter().filter_map(text).collect());
        }
    }
    origin.kept = pairs("kept").into_iter().collect();
    origin.text = record.get("text").and_then(text);
    origin
}

/// The order vLLM's tuner writes a config's keys in; other keys follow,
/// sorted.
const KEY_ORDER: &[&str] =
    &["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"];

/// Writes every fused-MoE entry of `data` (op [`OP`], runner [`RUNNER`])
/// as config files, (file name, content) sorted by name, one per expert count, N, device, dtype and block shape,
/// named by vLLM's convention. A file imported earlier comes back as it
/// was: its member and key order, indentation and non-config members;
/// batch sizes it did not have follow in numeric order, keys of a config
/// the file did not have in vLLM's order.
pub fn export(data: &CacheData) -> Exported {
    let mut out = Exported::default();
    let mut files: BTreeMap<String, BTreeMap<u64, Value>> = BTreeMap::new();
    for (section, key, entry) in data.iter() {
        let sizes = ranktune_cache::bucket_sizes(&key.bucket).unwrap_or_default();
        let parsed = match (key.op == OP && key.runner == RUNNER, sizes.as_slice()) {
            (true, [m, en]) if m.len() == 1 && en.len() == 2 => {
                FileName::from_key(&key.fingerprint, en[0], en[1]).map(|f| (f, m[0]))
            }
            _ => None,
        };
        let Some((file, m)) = parsed else {
            out.warnings.push(format!("{section} entry {key}: not a fused-MoE config; left out"));
            out.skipped += 1;
            continue;
        };
        if !entry.tactic.is_object() {
            out.warnings.push(format!(
                "{section} entry {key}: tactic {} is not a config object; left out",
                entry.tactic
            ));
            out.skipped += 1;
            continue;
        }
        let configs = files.entry(file.file_name()).or_default();
        match configs.get(&m) {
            Some(other) if other != &entry.tactic => {
                out.warnings.push(format!(
                    "{section} entry {key}: another section holds another config for batch \
                     size {m}; the first is written"
                ));
                out.skipped += 1;
            }
            Some(_) => {}
            None => {
                configs.insert(m, entry.tactic.clone());
                out.written += 1;
            }
        }
    }
    for (name, configs) in files {
        let origin = read_origin(data, &name);
        let written = write_file(&origin, configs);
        // The recorded text when it says the same as what is written.
        let same = origin.text.as_deref().filter(|t| {
            ordered::parse(t)
                .is_ok_and(|doc| origin.layout.is_some_and(|l| ordered::write(&doc, l) == written))
        });
        out.files.push((name, same.map_or(written, str::to_string)));
    }
    out
}

fn write_file(origin: &Origin, mut configs: BTreeMap<u64, Value>) -> String {
    let config_value = |member: &str, config: &Value| {
        let Value::Object(map) = config else { return OValue::from_value(config) };
        let recorded = origin
            .keys
            .get(member)
            .filter(|keys| keys.len() == map.len() && keys.iter().all(|k| map.contains_key(k)));
        let keys: Vec<&str> = match recorded {
            Some(keys) => keys.iter().map(String::as_str).collect(),
            None => {
                let mut keys: Vec<&str> =
                    KEY_ORDER.iter().copied().filter(|k| map.contains_key(*k)).collect();
                keys.extend(map.keys().map(String::as_str).filter(|k| !KEY_ORDER.contains(k)));
                keys
            }
        };
        OValue::Object(
            keys.into_iter().map(|k| (k.to_string(), OValue::from_value(&map[k]))).collect(),
        )
    };
    let mut members = Vec::new();
    for member in &origin.order {
        if let Some(kept) = origin.kept.get(member) {
            members.push((member.clone(), kept.clone()));
        } else if let Some(config) = member.parse::<u64>().ok().and_then(|m| configs.remove(&m)) {
            members.push((member.clone(), config_value(member, &config)));
        }
    }
    for (m, config) in configs {
        let member = m.to_string();
        let value = config_value(&member, &config);
        members.push((member, value));
    }
    let layout = origin.layout.unwrap_or(TextLayout { indent: Some(4), final_newline: true });
    ordered::write(&OValue::Object(members), layout)
}

/// For comparing the configs of two GPUs: when `a` and `b` each hold the
/// fused-MoE configs of one device, and the devices differ, both with the
/// device left out of their fingerprints (so batch sizes meet), and the
/// two device names. `None` otherwise.
pub fn align_devices(
    a: &CacheData,
    b: &CacheData,
) -> Option<(CacheData, CacheData, String, String)> {
    let device = |d: &CacheData| -> Option<String> {
        let mut found: Option<String> = None;
        for (_, key, _) in d.iter() {
            if key.op != OP || key.runner != RUNNER {
                return None;
            }
            let dev = key.fingerprint.strip_prefix("device_name=")?;
            let dev = dev.split(",dtype=").next()?.split(",block_shape=").next()?;
            match &found {
                Some(f) if f != dev => return None,
                _ => found = Some(dev.to_string()),
            }
        }
        found
    };
    let (da, db) = (device(a)?, device(b)?);
    if da == db {
        return None;
    }
    let strip = |d: &CacheData, dev: &str| {
        let mut out = CacheData::default();
        out.metadata = d.metadata.clone();
        let prefix = format!("device_name={dev}");
        for (section, key, entry) in d.iter() {
            let mut key = key.clone();
            let rest = key.fingerprint.strip_prefix(&prefix).unwrap_or("").trim_start_matches(',');
            key.fingerprint = if rest.is_empty() {
                "device_name=*".into()
            } else {
                format!("device_name=*,{rest}")
            };
            // The devices differ by design: compare the configs, not where
            // they were measured.
            let entry = Entry { env: "devices-aligned".into(), ..entry.clone() };
            out.insert(section, key, entry);
        }
        out
    };
    Some((strip(a, &da), strip(b, &db), da, db))
}

/// Reads every fused-MoE config file of a folder (sorted by name). Other
/// files, and config files that do not parse, are named in warnings and
/// skipped (a bad file counts as one skipped entry).
fn read_folder(dir: &Path) -> Result<Imported, SourceError> {
    let read_err = |e: std::io::Error| {
        SourceError::Read(CacheError::Io { action: "listing", path: dir.to_path_buf(), source: e })
    };
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    names.sort();
    let mut out = Imported::default();
    let mut found = 0;
    for path in names {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !looks_like_vllm_moe(name) || path.is_dir() {
            out.warnings
                .push(format!("{}: not named like a fused-MoE config; skipped", path.display()));
            continue;
        }
        found += 1;
        let imported = read_cache_bytes(&path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| import_file(name, &bytes).map_err(|e| e.to_string()));
        match imported {
            Ok(imported) => {
                out.warnings
                    .extend(imported.warnings.iter().map(|w| format!("{}: {w}", path.display())));
                out.skipped += imported.skipped;
                out.data.apply(imported.data);
            }
            Err(why) => {
                out.warnings.push(format!("{}: {why}; skipped", path.display()));
                out.skipped += 1;
            }
        }
    }
    if found == 0 {
        return Err(SourceError::NoFiles {
            path: dir.to_path_buf(),
            what: "fused-MoE config files (named E=<experts>,N=<n>,device_name=<GPU>….json)".into(),
        });
    }
    Ok(out)
}

/// vLLM's and SGLang's fused-MoE config files (a file or a folder).
pub struct VllmMoe;

/// What a cache lacks when it holds no fused-MoE entries.
const LACKS: &str = "holds no fused-MoE configs (op fused_moe, runner triton)";

impl Format for VllmMoe {
    fn name(&self) -> &'static str {
        "vllm-moe"
    }

    fn about(&self) -> &'static str {
        "vLLM/SGLang fused-MoE config files (a file or a folder of them)"
    }

    fn noun(&self) -> &'static str {
        "a fused-MoE config file"
    }

    fn sign(&self) -> &'static str {
        "a folder, or a file named E=<experts>,N=<n>,device_name=<GPU>\
         [,dtype=…][,block_shape=[…]].json"
    }

    fn layout(&self) -> crate::Layout {
        crate::Layout::Folder { holds: "config files" }
    }

    /// Any folder, or a file named like a config.
    fn detect_path(&self, path: &Path) -> bool {
        path.is_dir()
            || looks_like_vllm_moe(path.file_name().and_then(|n| n.to_str()).unwrap_or(""))
    }

    fn read(&self, file: &Input<'_>) -> Result<Imported, SourceError> {
        file.document()?;
        import_file(file.file_name(), file.bytes())
            .map_err(|source| SourceError::import(file, &VllmMoe, source))
    }

    fn read_folder(&self, dir: &Path) -> Result<Imported, SourceError> {
        read_folder(dir)
    }

    fn writer(&self) -> Option<Writer> {
        Some(Writer {
            about: "vLLM/SGLang fused-MoE config files, into the folder OUT",
            lacks: LACKS,
            export,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        let f = FileName::parse(
            "E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json",
        )
        .unwrap();
        assert_eq!((f.experts, f.n, f.device.as_str()), (128, 384, "NVIDIA_H200"));
        assert_eq!(f.dtype.as_deref(), Some("fp8_w8a8"));
        assert_eq!(f.block_shape.as_deref(), Some("[128,128]"));
        assert_eq!(
            f.file_name(),
            "E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
        );
        let g = FileName::parse("E=10,N=512,device_name=Intel(R)_Arc(TM)_Pro_B60_Graphics.json")
            .unwrap();
        assert_eq!(g.device, "Intel(R)_Arc(TM)_Pro_B60_Graphics");
        assert_eq!(g.dtype, None);
        let h = FileName::parse(
            "E=8,N=14336,device_name=NVIDIA_A100-SXM4-80GB,block_shape=[128, 128].json",
        )
        .unwrap();
        assert_eq!(h.block_shape.as_deref(), Some("[128, 128]"));
        // SGLang's and vLLM's further selectors, kept exactly.
        for name in [
            "E=257,N=256,device_name=NVIDIA_H20,dtype=fp8_w8a8,block_shape=[128, 128]_down.json",
            "E=20,N=1536,device_name=NVIDIA_H200,dtype=fp8_w8a8,per_channel_quant=True.json",
            "E=128,N=1024,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8_down.json",
            "E=384,N=128,device_name=,dtype=int4_w4a16_down.json",
            "E=64,N=512,device_name=AMD_Instinct_MI355X,dtype=int4_w4a16,backend=flydsl.json",
        ] {
            let f = FileName::parse(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(f.file_name(), name);
        }
        let d = FileName::parse("E=128,N=1024,device_name=X,dtype=fp8_w8a8_down.json").unwrap();
        assert_eq!((d.dtype.as_deref(), d.down), (Some("fp8_w8a8"), true));
        let p =
            FileName::parse("E=1,N=2,device_name=X,dtype=a,per_channel_quant=True.json").unwrap();
        assert_eq!(p.extra, ["per_channel_quant=True"]);
        for bad in [
            "E=8,N=14336.json",
            "E=x,N=1,device_name=A.json",
            "E=8,N=1,device_name=A",
            "E=8,N=1,device_name=.json",
            "E=8,N=1,device_name=A,block_shape=[a].json",
            "E=8,N=1,device_name=A,dtype=.json",
            "E=8,N=1,device_name=A,block_shape=[1,2],dtype=x.json",
            "E=8,N=1,device_name=A,extra=.json",
            "cache.json",
        ] {
            assert!(FileName::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn lacks_names_the_op_and_runner() {
        assert_eq!(LACKS, format!("holds no fused-MoE configs (op {OP}, runner {RUNNER})"));
    }
}
