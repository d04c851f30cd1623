//! Triton's autotune cache (format name `triton`): with
//! `@triton.autotune(..., cache_results=True)` (or `TRITON_CACHE_AUTOTUNING=1`)
//! Triton writes, for each tuning key of a kernel, one file
//! `<cache dir>/<hash>/<kernel>.autotune.json` holding one line of
//! `json.dumps` (default separators, no final newline):
//! `{"key": [<each key argument's value, then str() of each tensor
//! argument's dtype>], "configs_timings": [[<Config.__dict__>, <timing>],
//! …]}`. Releases 3.4-3.9 write the key's values raw (ints stay ints);
//! newer Triton writes `str()` of each; both are read, a value standing for
//! its `str()` (`true` as `True`, `null` as `None`), and an export writes each value the way
//! the imported file did. A config is `{"kwargs": {…}, "num_warps": …, "num_ctas": …,
//! "num_stages": …, "maxnreg": …, "pre_hook": null, "ir_override": …}`; a
//! timing is what the benchmarker returned for the quantiles `(0.5, 0.2,
//! 0.8)`, in milliseconds — a list of three floats, `[Infinity, Infinity,
//! Infinity]` for a config that failed to compile or ran out of resources
//! (Python writes the bare token), or one float from a custom `do_bench`.
//!
//! In ranktune's model one file is one entry: op the kernel's name (from
//! the file name), runner [`RUNNER`], fingerprint the key with each
//! number written `#` (`#,#,#,torch.float16,torch.float16`; see
//! [`fingerprint_of`]), bucket `[[the key's numbers]]`. Every config is a
//! candidate with its timing as statistics (median the first value, the
//! 0.5 quantile; min and p90 the lowest and highest value the file holds,
//! its 0.2 and 0.8 quantiles; no sample count) or, when it has no time, an
//! error; the choice is the config Triton itself would take (the lowest
//! timing, compared as Python compares the lists, the first on ties),
//! time its median. Checksum [`CHECKSUM`], so the tuner never reuses these
//! entries as its own.
//!
//! An import records the file's path and its text in the cache's metadata,
//! so [`export`] writes the same bytes back while the entry still says
//! what the file said, and a file in Triton's layout from the entry
//! otherwise. This module does no file I/O: callers hand it paths and
//! text, it hands back text.

use crate::ordered::{self, OValue, TextLayout};
use crate::trtllm::{ms_to_us, repr_float, us_to_ms};
use crate::{Exported, Format, FormatError, Imported, Input, SourceError, Writer};
use ranktune_cache::{
    bucket_label, read_cache_bytes, CacheData, CacheError, Candidate, Entry, EntryKey, Identity,
    Section, Stats,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The runner of imported entries.
pub const RUNNER: &str = "triton";
/// The candidate-set checksum of imported entries.
pub const CHECKSUM: &str = "triton-autotune";
/// The `lib_version` of their identity (the files name no version or device).
pub const LIB_VERSION: &str = "triton";
/// How the files' names end.
pub const SUFFIX: &str = ".autotune.json";
/// The members of a config in the order `Config.__init__` sets them (the
/// order `__dict__` has); other members follow, sorted.
pub const CONFIG_FIELDS: &[&str] =
    &["kwargs", "num_warps", "num_ctas", "num_stages", "maxnreg", "pre_hook", "ir_override"];

/// The kernel a file name (without directories) names: `matmul_kernel`
/// for `matmul_kernel.autotune.json`. `None` when it is not such a name.
pub fn kernel_name(file_name: &str) -> Option<&str> {
    let stem = file_name.strip_suffix(SUFFIX)?;
    (!stem.is_empty() && !stem.contains(['/', '\\', '\0']) && stem != "." && stem != "..")
        .then_some(stem)
}

/// True when `name` (a file name without directories) is named like a
/// Triton autotune file: what `--format auto` recognises by name.
pub fn looks_like_triton_name(name: &str) -> bool {
    kernel_name(name).is_some()
}

/// True when a parsed document looks like a Triton autotune file: an
/// object with a `key` list and a `configs_timings` list.
pub fn looks_like_triton(doc: &Value) -> bool {
    doc.get("key").is_some_and(Value::is_array)
        && doc.get("configs_timings").is_some_and(Value::is_array)
}

/// The fingerprint of a tuning key and the bucket's dims: each value that
/// is a plain non-negative integer is a dim and written `#`; every other
/// value is written as it is, with `%`, `,` (and a lone `#`) escaped as
/// `%25`, `%2C`, `%23`; values joined by `,`.
///
/// ```
/// use ranktune_formats::triton::{fingerprint_of, key_of};
/// let key: Vec<String> =
///     ["1024", "512", "torch.float16", "True"].iter().map(|s| s.to_string()).collect();
/// let (fp, dims) = fingerprint_of(&key);
/// assert_eq!((fp.as_str(), dims.as_slice()), ("#,#,torch.float16,True", &[1024, 512][..]));
/// assert_eq!(key_of(&fp, &dims), Some(key));
/// ```
pub fn fingerprint_of(key: &[String]) -> (String, Vec<u64>) {
    let mut dims = Vec::new();
    let parts: Vec<String> = key
        .iter()
        .map(|v| match as_dim(v) {
            Some(d) => {
                dims.push(d);
                "#".to_string()
            }
            None => {
                let e = v.replace('%', "%25").replace(',', "%2C");
                if e == "#" {
                    "%23".into()
                } else {
                    e
                }
            }
        })
        .collect();
    (parts.join(","), dims)
}

/// The tuning key a fingerprint and dims stand for (the inverse of
/// [`fingerprint_of`]); `None` when they are not such a pair.
pub fn key_of(fingerprint: &str, dims: &[u64]) -> Option<Vec<String>> {
    let mut dims = dims.iter();
    let mut out = Vec::new();
    for part in fingerprint.split(',') {
        if part == "#" {
            out.push(dims.next()?.to_string());
            continue;
        }
        let mut value = String::new();
        let mut rest = part;
        while let Some(at) = rest.find('%') {
            value.push_str(&rest[..at]);
            let code = rest.get(at..at + 3)?;
            value.push(match code {
                "%25" => '%',
                "%2C" => ',',
                "%23" if part == "%23" => '#',
                _ => return None,
            });
            rest = &rest[at + 3..];
        }
        value.push_str(rest);
        if as_dim(&value).is_some() {
            return None;
        }
        out.push(value);
    }
    dims.next().is_none().then_some(out)
}

fn as_dim(v: &str) -> Option<u64> {
    let plain = !v.is_empty()
        && v.bytes().all(|b| b.is_ascii_digit())
        && (v.len() == 1 || !v.starts_with('0'));
    plain.then(|| v.parse().ok())?
}

/// The identity of imported entries: the files say nothing of the device.
fn identity() -> Identity {
    Identity {
        lib_version: LIB_VERSION.into(),
        device_kind: "gpu".into(),
        device_name: "unknown".into(),
        capability: "unknown".into(),
        cores: 0,
    }
}

/// Python's `json.dumps` writes non-finite floats as bare `Infinity`,
/// `-Infinity` and `NaN`; JSON has no such tokens. This parses the text
/// with each of them (outside strings) as a scalar of that text.
fn parse_python_json(text: &str) -> Result<OValue, String> {
    let fixed = ordered::replace_bare_non_finite(text, &|t| format!("\"\\u0000{t}\""));
    let v = ordered::parse(fixed.as_deref().unwrap_or(text)).map_err(|e| e.to_string())?;
    fn unmark(v: OValue) -> OValue {
        match v {
            OValue::Scalar(t) => {
                match t.strip_prefix("\"\\u0000").and_then(|s| s.strip_suffix('"')) {
                    Some(token) if ordered::NON_FINITE_TOKENS.contains(&token) => {
                        OValue::scalar(token)
                    }
                    _ => OValue::Scalar(t),
                }
            }
            OValue::Array(items) => OValue::Array(items.into_iter().map(unmark).collect()),
            OValue::Object(m) => {
                OValue::Object(m.into_iter().map(|(k, v)| (k, unmark(v))).collect())
            }
        }
    }
    Ok(if fixed.is_some() { unmark(v) } else { v })
}

/// A number scalar's value (Python's non-finite tokens included).
fn number(v: &OValue) -> Option<f64> {
    match v {
        OValue::Scalar(t) if !t.starts_with('"') && !matches!(&**t, "true" | "false" | "null") => {
            t.parse().ok()
        }
        _ => None,
    }
}

/// Imports one autotune file: `path` is where it lies ('/'-separated,
/// relative to the folder imported, or its folder's name and its own name;
/// the last part is the file name, which names the kernel), `bytes` its
/// content. Configs whose pair or timing does not parse are named in a
/// warning, skipped, and kept for [`export`] (the whole file is).
pub fn import_file(path: &str, bytes: &[u8]) -> Result<Imported, FormatError> {
    let file_name = path.rsplit('/').next().unwrap_or(path);
    let kernel = kernel_name(file_name).ok_or_else(|| FormatError::Name {
        name: file_name.into(),
        convention: "<kernel>.autotune.json",
    })?;
    let text = std::str::from_utf8(bytes).map_err(FormatError::not_utf8_text)?;
    let doc =
        parse_python_json(text).map_err(|message| FormatError::NotJson { at: None, message })?;
    let members = doc.members().ok_or(FormatError::NotAnObject {
        found: None,
        expected: "with \"key\" and \"configs_timings\"",
    })?;
    let mut out = Imported::default();
    for (name, _) in members {
        if name != "key" && name != "configs_timings" {
            out.warnings
                .push(format!("member {name:?} is not Triton's; skipped (kept for export)"));
            out.skipped += 1;
        }
    }
    let key = match doc.get("key") {
        Some(OValue::Array(items)) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                key_value(v).ok_or_else(|| {
                    FormatError::Shape(format!(
                        "\"key\"[{i}] is {}, not a string, number, bool or null (Triton's \
                         tuning keys hold the values of scalar arguments); fix or remove the file",
                        ordered::write(v, TextLayout { indent: None, final_newline: false })
                    ))
                })
            })
            .collect::<Result<Vec<String>, FormatError>>()?,
        Some(OValue::Array(_)) => return Err(FormatError::Shape("\"key\" is empty".into())),
        Some(_) => return Err(FormatError::Shape("\"key\" is not a list".into())),
        None => return Err(FormatError::Shape("no \"key\"".into())),
    };
    let pairs = match doc.get("configs_timings") {
        Some(OValue::Array(pairs)) => pairs,
        Some(_) => return Err(FormatError::Shape("\"configs_timings\" is not a list".into())),
        None => return Err(FormatError::Shape("no \"configs_timings\"".into())),
    };
    // (candidate, the timing values in ms) for each config that parsed.
    let mut candidates: Vec<(Candidate, Option<Vec<f64>>)> = Vec::new();
    for (i, pair) in pairs.iter().enumerate() {
        match candidate(pair) {
            Ok(c) => candidates.push(c),
            Err(why) => {
                out.warnings
                    .push(format!("configs_timings[{i}]: {why}; skipped (kept for export)"));
                out.skipped += 1;
            }
        }
    }
    // Triton's choice: min(timings, key=timings.get), the first on ties.
    let mut best: Option<(usize, &Vec<f64>)> = None;
    for (i, (_, ms)) in candidates.iter().enumerate() {
        if let Some(ms) = ms {
            if best.is_none_or(|(_, b)| lexically_less(ms, b)) {
                best = Some((i, ms));
            }
        }
    }
    let Some((best, _)) = best else {
        return Err(FormatError::Shape(format!(
            "no config has a time ({} configs: {} failed to compile or run, {} did not parse); \
             there is no choice to import",
            pairs.len(),
            candidates.len(),
            pairs.len() - candidates.len()
        )));
    };
    let (chosen, _) = &candidates[best];
    let (tactic, time_us) =
        (chosen.tactic.clone(), chosen.stats.as_ref().map_or(0.0, |s| s.median_us));
    let identity = identity();
    let env = identity.digest();
    out.data.metadata.environments.insert(env.clone(), identity);
    let (fingerprint, dims) = fingerprint_of(&key);
    let key = EntryKey {
        op: kernel.into(),
        runner: RUNNER.into(),
        fingerprint,
        bucket: ranktune_cache::sizes_bucket(&[dims]),
    };
    let entry = Entry {
        runner_index: 0,
        tactic,
        time_us,
        candidates: candidates.into_iter().map(|(c, _)| c).collect(),
        checksum: CHECKSUM.into(),
        env,
        created_unix: 0,
    };
    let record = OValue::Object(vec![
        ("path".into(), OValue::string(path)),
        ("text".into(), OValue::string(text)),
    ]);
    out.data.set_origin(
        &origin_name(&key),
        ordered::write(&record, TextLayout { indent: None, final_newline: false }),
    );
    out.data.insert(Section::Rank(0), key, entry);
    Ok(out)
}

/// One tuning-key value as the string `str()` gives in Python: newer
/// Triton writes that string; releases 3.4-3.9 write the raw value, so a
/// number stays as written (`1024`, `0.1`: Python wrote its `repr`, which
/// is its `str`), `true`/`false`/`null` are `True`/`False`/`None` and the
/// bare `Infinity`, `-Infinity`, `NaN` are `inf`, `-inf`, `nan`. `None`
/// for a list or an object.
fn key_value(v: &OValue) -> Option<String> {
    let OValue::Scalar(t) = v else { return None };
    Some(match &**t {
        t if t.starts_with('"') => serde_json::from_str::<String>(t).ok()?,
        "true" => "True".into(),
        "false" => "False".into(),
        "null" => "None".into(),
        "Infinity" => "inf".into(),
        "-Infinity" => "-inf".into(),
        "NaN" => "nan".into(),
        t => t.to_string(),
    })
}

/// The key a file holds as written, when a recorded file's text has one
/// that stands for `tuning_key`: each raw (not string) value whose `str()`
/// is the tuning key's value stays raw, so a file from Triton 3.4-3.9
/// exports as it was; every other value is its string.
fn key_as_written(tuning_key: &[String], recorded: Option<&str>) -> Vec<OValue> {
    let recorded = match recorded.map(parse_python_json) {
        Some(Ok(OValue::Object(members))) => members.into_iter().find(|(k, _)| k == "key"),
        _ => None,
    };
    let raw = match recorded {
        Some((_, OValue::Array(items))) if items.len() == tuning_key.len() => items,
        _ => Vec::new(),
    };
    tuning_key
        .iter()
        .enumerate()
        .map(|(i, k)| match raw.get(i) {
            Some(v) if key_value(v).as_ref() == Some(k) => v.clone(),
            _ => OValue::string(k),
        })
        .collect()
}

/// `a < b` as Python compares two lists of floats.
fn lexically_less(a: &[f64], b: &[f64]) -> bool {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x < y;
        }
    }
    a.len() < b.len()
}

/// One `[config, timing]` pair as a candidate, with its timing values in
/// milliseconds when it has a time.
fn candidate(pair: &OValue) -> Result<(Candidate, Option<Vec<f64>>), String> {
    let OValue::Array(parts) = pair else { return Err("not a [config, timing] pair".into()) };
    let [config, timing] = parts.as_slice() else {
        return Err(format!("{} items, not a [config, timing] pair", parts.len()));
    };
    if config.get("kwargs").is_none_or(|k| k.members().is_none()) {
        return Err("the config is not an object with a \"kwargs\" object".into());
    }
    let tactic = config.try_to_value().ok_or(
        "the config holds a value JSON cannot carry (NaN, Infinity or a number out of range)",
    )?;
    let values: Vec<&OValue> = match timing {
        OValue::Array(items) if !items.is_empty() => items.iter().collect(),
        OValue::Scalar(_) => vec![timing],
        _ => return Err("the timing is not a number or a list of numbers".into()),
    };
    let ms = values
        .iter()
        .map(|v| number(v))
        .collect::<Option<Vec<f64>>>()
        .ok_or("the timing is not a number or a list of numbers")?;
    let shown = || ordered::write(timing, TextLayout { indent: None, final_newline: false });
    let mut c =
        Candidate { runner: RUNNER.into(), runner_index: 0, tactic, stats: None, error: None };
    if ms.iter().any(|t| !t.is_finite()) {
        c.error = Some(format!(
            "no time ({}): the config failed to compile or ran out of resources",
            shown()
        ));
        return Ok((c, None));
    }
    if ms.iter().any(|t| *t < 0.0) {
        return Err(format!("the timing {} is negative", shown()));
    }
    let us = |t: f64| Some(ms_to_us(t)).filter(|u| u.is_finite());
    let (low, high) = ms.iter().fold((f64::INFINITY, 0f64), |(l, h), t| (l.min(*t), h.max(*t)));
    let (Some(median_us), Some(min_us), Some(p90_us)) = (us(ms[0]), us(low), us(high)) else {
        return Err(format!("the timing {} ms is too large to hold in microseconds", shown()));
    };
    // (A spread too wide for a double, from absurd timings, is the widest
    // one: the cache holds finite numbers only.)
    let spread = if median_us > 0.0 { (p90_us - min_us) / median_us } else { 0.0 };
    let spread = if spread.is_finite() { spread } else { f64::MAX };
    c.stats = Some(Stats { min_us, median_us, p90_us, spread, samples: 0 });
    Ok((c, Some(ms)))
}

/// The origin record's name for an entry: `triton/<op>/<fingerprint>/<bucket>`
/// (an op has no `/`, a bucket label neither, so the name is unambiguous).
fn origin_name(key: &EntryKey) -> String {
    format!("triton/{}/{}/{}", key.op, key.fingerprint, bucket_label(&key.bucket))
}

/// What an import recorded about an entry's file: (path, text).
fn read_origin(data: &CacheData, key: &EntryKey) -> Option<(String, String)> {
    let record = ordered::parse(data.origin(&origin_name(key))?).ok()?;
    let text = |name: &str| match record.get(name)?.to_value() {
        Value::String(s) => Some(s),
        _ => None,
    };
    Some((text("path")?, text("text")?))
}

/// A path an export may write under its folder: relative, each part a
/// plain name.
fn safe_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != ".." && !p.contains(['\\', '\0']))
}

/// Writes every Triton entry of `data` (runner [`RUNNER`], checksum
/// [`CHECKSUM`]) as an autotune file: (path relative to the output folder,
/// content), sorted by path. An entry imported from a file, and
/// unchanged since, is that file, byte for byte, at the path it was
/// imported from (when that is a plain relative path; otherwise in the
/// digest folder below); any other is written the way Triton writes it (one line,
/// configs in the candidates' order, each with `[median, min, p90]` in
/// milliseconds, `[Infinity, Infinity, Infinity]` for a config without a
/// time; a timing the imported file held for the same config and
/// statistics as it was written) into the folder of the file it came from,
/// or one named by a digest of its key, `ranktune-<hex>`
/// (Triton looks files up under hashes of its own; such folders are for
/// reading and comparing).
pub fn export(data: &CacheData) -> Exported {
    let mut out = Exported::default();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for (section, key, entry) in data.iter() {
        if key.runner != RUNNER || entry.checksum != CHECKSUM {
            out.warnings
                .push(format!("{section} entry {key}: not a Triton autotune entry; left out"));
            out.skipped += 1;
            continue;
        }
        let tuning_key = match key.bucket.as_slice() {
            [dims] => ranktune_cache::bucket_sizes(std::slice::from_ref(dims))
                .and_then(|d| key_of(&key.fingerprint, &d[0])),
            _ => None,
        };
        let (Some(tuning_key), Some(_)) = (tuning_key, kernel_name(&format!("{}{SUFFIX}", key.op)))
        else {
            out.warnings.push(format!(
                "{section} entry {key}: its op, fingerprint or bucket is not a kernel name and \
                 a Triton tuning key; left out"
            ));
            out.skipped += 1;
            continue;
        };
        let origin = read_origin(data, key);
        // A recorded path that is not a plain relative one (a cache edited
        // by hand) is not written to: the digest folder is.
        let recorded_path =
            origin.as_ref().map(|(p, _)| p.as_str()).filter(|p| safe_path(p)).map(str::to_string);
        let verbatim = origin.as_ref().filter(|(path, text)| {
            import_file(path, text.as_bytes()).is_ok_and(|i| {
                i.data.get(Section::Rank(0), key).is_some_and(|e| {
                    e.tactic == entry.tactic
                        && e.time_us == entry.time_us
                        && e.candidates == entry.candidates
                        && e.runner_index == entry.runner_index
                })
            })
        });
        let digest_path = || {
            let mut h = ranktune_core::hash::StableHasher::default();
            h.write_str(&key.op);
            h.write_str(&key.fingerprint);
            h.write_str(&bucket_label(&key.bucket));
            format!("ranktune-{}/{}{SUFFIX}", h.hex(), key.op)
        };
        let (path, text) = match verbatim {
            Some((_, text)) => (recorded_path.unwrap_or_else(digest_path), text.clone()),
            None => {
                let dir = recorded_path.as_deref().and_then(|p| p.rsplit_once('/').map(|(d, _)| d));
                let path = match dir {
                    Some(dir) => format!("{dir}/{}{SUFFIX}", key.op),
                    None => digest_path(),
                };
                let recorded = origin.as_ref().map(|(_, t)| t.as_str());
                (path, write_file(&tuning_key, entry, recorded))
            }
        };
        let path = if files.get(&path).is_some_and(|t| t != &text) { digest_path() } else { path };
        match files.get(&path) {
            Some(t) if t != &text => {
                out.warnings.push(format!(
                    "{section} entry {key}: another entry is already written to {path}; left out"
                ));
                out.skipped += 1;
            }
            Some(_) => {}
            None => {
                files.insert(path, text);
                out.written += 1;
            }
        }
    }
    out.files = files.into_iter().collect();
    out
}

/// The `[config, timing]` pairs of a recorded file's text that import as
/// candidates: (candidate, the timing as written).
fn recorded_timings(text: Option<&str>) -> Vec<(Candidate, OValue)> {
    let Some(Ok(OValue::Object(members))) = text.map(parse_python_json) else { return Vec::new() };
    let Some((_, OValue::Array(pairs))) = members.into_iter().find(|(k, _)| k == "configs_timings")
    else {
        return Vec::new();
    };
    pairs
        .into_iter()
        .filter_map(|pair| {
            let (c, _) = candidate(&pair).ok()?;
            let OValue::Array(mut parts) = pair else { return None };
            Some((c, parts.pop()?))
        })
        .collect()
}

/// Milliseconds for `us` microseconds that import as exactly `us` again:
/// the decimal shift of its shortest form, or, where that reads back off
/// (some 17-digit values), the shortest shift of `us` rounded to fewer or
/// more digits that does, else the double within a few ulps of the shift
/// that does; where none does, the one that reads back closest.
fn ms_of(us: f64) -> f64 {
    let ms = us_to_ms(us);
    if !us.is_finite() || ms_to_us(ms) == us {
        return ms;
    }
    let rounded = (1..=17).filter_map(|digits| {
        let sci = format!("{us:.*e}", digits - 1);
        let (m, e) = sci.split_once('e')?;
        format!("{m}e{}", e.parse::<i32>().ok()? - 3).parse::<f64>().ok()
    });
    let near = (1..=4u64)
        .flat_map(|k| [ms.to_bits().wrapping_add(k), ms.to_bits().wrapping_sub(k)])
        .map(f64::from_bits)
        .filter(|m| m.is_finite());
    // The first of the closest: the shortest when several read back exactly.
    rounded
        .chain(std::iter::once(ms))
        .chain(near)
        .min_by_key(|m| ms_to_us(*m).to_bits().abs_diff(us.to_bits()))
        .unwrap_or(ms)
}

/// An entry as Triton writes the file (see [`export`]). A candidate whose
/// config and timing the recorded file (`recorded`, its text) holds gets
/// that timing as the file wrote it, numbers and all.
fn write_file(tuning_key: &[String], entry: &Entry, recorded: Option<&str>) -> String {
    let recorded_text = recorded;
    let recorded = recorded_timings(recorded);
    let config = |tactic: &Value| {
        let Value::Object(map) = tactic else { return OValue::from_value(tactic) };
        let mut members: Vec<(String, OValue)> = CONFIG_FIELDS
            .iter()
            .filter_map(|f| map.get(*f).map(|v| (f.to_string(), OValue::from_value(v))))
            .collect();
        members.extend(
            map.iter()
                .filter(|(k, _)| !CONFIG_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), OValue::from_value(v))),
        );
        OValue::Object(members)
    };
    let ms = |us: f64| OValue::scalar(repr_float(ms_of(us)));
    let timing = |stats: Option<&Stats>| match stats {
        Some(s) => OValue::Array(vec![ms(s.median_us), ms(s.min_us), ms(s.p90_us)]),
        None => OValue::Array(vec![OValue::scalar("Infinity"); 3]),
    };
    let pairs: Vec<OValue> = if entry.candidates.is_empty() {
        let t = ms(entry.time_us);
        vec![OValue::Array(vec![
            config(&entry.tactic),
            OValue::Array(vec![t.clone(), t.clone(), t]),
        ])]
    } else {
        entry
            .candidates
            .iter()
            .map(|c| {
                let t = recorded
                    .iter()
                    .find(|(r, _)| r == c)
                    .map_or_else(|| timing(c.stats.as_ref()), |(_, t)| t.clone());
                OValue::Array(vec![config(&c.tactic), t])
            })
            .collect()
    };
    let doc = OValue::Object(vec![
        ("key".into(), OValue::Array(key_as_written(tuning_key, recorded_text))),
        ("configs_timings".into(), OValue::Array(pairs)),
    ]);
    ordered::write(&doc, TextLayout { indent: None, final_newline: false })
}

/// How deep [`read_source`](crate::read_source) looks for autotune files in a folder: Triton's
/// cache directory holds them one level down (`<hash>/<kernel>.autotune.json`);
/// a folder of such caches (one per GPU) two.
pub const MAX_FOLDER_DEPTH: usize = 4;

/// The path a single autotune file is recorded under: its folder's name
/// too when that looks like one of Triton's cache folders (a hash: 16 or
/// more letters and digits), so an export puts it back there.
fn triton_path(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let parent = path.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str());
    match parent {
        Some(dir) if dir.len() >= 16 && dir.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            format!("{dir}/{name}")
        }
        _ => name.to_string(),
    }
}

/// The `*.autotune.json` files under `dir`, as (path, path relative to
/// `dir` with `/` between parts), sorted; at most [`MAX_FOLDER_DEPTH`]
/// folders deep, never following links to folders. Unreadable folders
/// are passed over.
fn autotune_files(dir: &Path) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, rel: &str, depth: usize, out: &mut Vec<(PathBuf, String)>) {
        let Ok(listing) = std::fs::read_dir(dir) else { return };
        for e in listing.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_string) else { continue };
            let Ok(kind) = e.file_type() else { continue };
            let rel = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            if kind.is_dir() {
                if depth < MAX_FOLDER_DEPTH {
                    walk(&e.path(), &rel, depth + 1, out);
                }
            } else if looks_like_triton_name(&name) {
                out.push((e.path(), rel));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", 1, &mut out);
    out.sort();
    out
}

/// Reads every autotune file under a folder (see [`autotune_files`]);
/// other files (a Triton cache holds many compiled kernels) are passed
/// over in silence. A file that does not import, or that holds the same
/// kernel and key as one read before, is named in a warning and skipped
/// (counted as one skipped entry).
fn read_folder(dir: &Path) -> Result<Imported, SourceError> {
    if let Err(e) = std::fs::read_dir(dir) {
        return Err(SourceError::Read(CacheError::Io {
            action: "listing",
            path: dir.to_path_buf(),
            source: e,
        }));
    }
    let files = autotune_files(dir);
    if files.is_empty() {
        return Err(SourceError::NoFiles {
            path: dir.to_path_buf(),
            what: format!(
                "Triton autotune files (<kernel>.autotune.json, looked {MAX_FOLDER_DEPTH} folders \
                 deep)"
            ),
        });
    }
    let mut out = Imported::default();
    let mut read_from: std::collections::BTreeMap<EntryKey, PathBuf> = Default::default();
    for (path, rel) in files {
        let imported = read_cache_bytes(&path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| import_file(&rel, &bytes).map_err(|e| e.to_string()));
        let imported = match imported {
            Ok(i) => i,
            Err(why) => {
                out.warnings.push(format!("{}: {why}; skipped", path.display()));
                out.skipped += 1;
                continue;
            }
        };
        let keys: Vec<EntryKey> = imported.data.iter().map(|(_, k, _)| k.clone()).collect();
        if let Some(first) = keys.iter().find_map(|k| read_from.get(k)) {
            out.warnings.push(format!(
                "{}: the same kernel and tuning key as {} (another build of the kernel); \
                 skipped",
                path.display(),
                first.display()
            ));
            out.skipped += 1;
            continue;
        }
        for k in keys {
            read_from.insert(k, path.clone());
        }
        out.warnings.extend(imported.warnings.iter().map(|w| format!("{}: {w}", path.display())));
        out.skipped += imported.skipped;
        out.data.apply(imported.data);
    }
    Ok(out)
}

/// Triton's autotune files (a file, or a folder such as Triton's cache
/// directory).
pub struct Triton;

/// What a cache lacks when it holds no Triton entries.
const LACKS: &str = "holds no Triton autotune entries (runner triton, checksum triton-autotune)";

impl Format for Triton {
    fn name(&self) -> &'static str {
        "triton"
    }

    fn about(&self) -> &'static str {
        "Triton autotune files (`<kernel>.autotune.json`; a file, or a folder such as Triton's \
         cache directory)"
    }

    fn noun(&self) -> &'static str {
        "a Triton autotune file"
    }

    fn sign(&self) -> &'static str {
        "a file named <kernel>.autotune.json, a folder holding such files, or \
         \"key\" and \"configs_timings\" lists"
    }

    fn layout(&self) -> crate::Layout {
        crate::Layout::Folder { holds: "autotune files" }
    }

    /// A folder holding autotune files, or a file so named.
    fn detect_path(&self, path: &Path) -> bool {
        if path.is_dir() {
            !autotune_files(path).is_empty()
        } else {
            looks_like_triton_name(path.file_name().and_then(|n| n.to_str()).unwrap_or(""))
        }
    }

    /// Triton's shape, in a document without ranktune's `format` field
    /// (a ranktune cache is told by that field, whatever else it holds).
    fn detect(&self, doc: &Value) -> bool {
        doc.get("format").is_none() && looks_like_triton(doc)
    }

    /// The file as it is: Python's `Infinity` stays what it is (the
    /// shared parse would make it null), so there is no JSON check first.
    fn read(&self, file: &Input<'_>) -> Result<Imported, SourceError> {
        import_file(&triton_path(file.path()), file.bytes())
            .map_err(|source| SourceError::import(file, &Triton, source))
    }

    fn read_folder(&self, dir: &Path) -> Result<Imported, SourceError> {
        read_folder(dir)
    }

    fn writer(&self) -> Option<Writer> {
        Some(Writer {
            about: "Triton autotune files, into the folder OUT (`<hash>/<kernel>.autotune.json`)",
            lacks: LACKS,
            export,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_fingerprints() {
        assert_eq!(kernel_name("_fwd_kernel.autotune.json"), Some("_fwd_kernel"));
        for bad in [".autotune.json", "x.json", "a/b.autotune.json", "...autotune.json"] {
            assert_eq!(kernel_name(bad), None, "{bad}");
        }
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for key in [
            s(&["1024", "0", "007", "-3", "1.5", "a,b", "#", "%2C", "", "None"]),
            s(&["18446744073709551616"]),
        ] {
            let (fp, dims) = fingerprint_of(&key);
            assert_eq!(key_of(&fp, &dims).as_ref(), Some(&key), "{fp}");
        }
        assert_eq!(fingerprint_of(&s(&["007", "#"])).0, "007,%23");
        assert_eq!(key_of("#", &[]), None);
        assert_eq!(key_of("#", &[1, 2]), None);
        assert_eq!(key_of("%zz", &[]), None);
        assert_eq!(key_of("12", &[]), None);
    }

    #[test]
    fn python_tokens() {
        let v = parse_python_json("[Infinity, -Infinity, NaN, \"Infinity\", 1.5]").unwrap();
        let OValue::Array(items) = v else { panic!() };
        assert_eq!(items[0], OValue::scalar("Infinity"));
        assert_eq!(items[1], OValue::scalar("-Infinity"));
        assert_eq!(number(&items[2]).map(f64::is_nan), Some(true));
        assert_eq!(items[3], OValue::scalar("\"Infinity\""));
        assert_eq!(number(&items[4]), Some(1.5));
        assert!(parse_python_json("[Infinityx]").is_err());
        assert!(lexically_less(&[1.0, 5.0], &[1.0, 6.0]));
        assert!(!lexically_less(&[1.0, 5.0], &[1.0, 5.0]));
    }

    #[test]
    fn raw_key_values_read_as_python_str() {
        let v = parse_python_json(
            "[4096, 0.1, true, false, null, Infinity, -Infinity, NaN, \"x\", 1e-05, [1], {}]",
        )
        .unwrap();
        let OValue::Array(items) = v else { panic!() };
        let read: Vec<Option<String>> = items.iter().map(key_value).collect();
        let want = ["4096", "0.1", "True", "False", "None", "inf", "-inf", "nan", "x", "1e-05"];
        let want: Vec<Option<String>> =
            want.iter().map(|s| Some(s.to_string())).chain([None, None]).collect();
        assert_eq!(read, want);
        let key: Vec<String> = ["4096", "x", "7"].iter().map(|s| s.to_string()).collect();
        let written = key_as_written(&key, Some("{\"key\": [4096, \"x\", \"7\"]}"));
        assert_eq!(written, [OValue::scalar("4096"), OValue::string("x"), OValue::string("7")]);
        // A recorded key of another length, or none: every value a string.
        for recorded in [Some("{\"key\": [4096]}"), None, Some("not json")] {
            let written = key_as_written(&key, recorded);
            assert!(written.iter().all(|v| matches!(v, OValue::Scalar(t) if t.starts_with('"'))));
        }
    }

    #[test]
    fn lacks_names_the_runner_and_checksum() {
        assert_eq!(
            LACKS,
            format!("holds no Triton autotune entries (runner {RUNNER}, checksum {CHECKSUM})")
        );
    }
}
