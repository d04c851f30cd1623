//! The drop-in's saves as the cache store sees them: [`NativeFormat`], the
//! [`ForeignFormat`] of TensorRT-LLM's own cache file, so that
//! `ranktune.trtllm` saves and loads through the store's
//! [`ForeignFile`](ranktune_cache::ForeignFile) (its trust checks, locks,
//! spool, group commit and set-aside) and keeps none of its own.
//!
//! A save's spool file is one [`NativeUpdate`] as JSON:
//! `{"metadata": [[name, value]], "sections": [[name, [[key, runner_id,
//! tactic, min_time bits]]]]}` (bits, so `inf` and every float survive
//! exactly). The fold merges the waiting saves in save order as
//! TensorRT-LLM's saver merges one ([`splice_native`]), with ranktune's
//! note of the environment that saved each section.
//!
//! Like the rest of `trtllm`, this module does no I/O.

use super::native::{native_entries, splice_native, NativeEntry, NativeUpdate};
use ranktune_cache::ForeignFormat;
use serde_json::{json, Value};

/// TensorRT-LLM's cache file as the store folds it (see the module docs).
///
/// ```
/// use ranktune_cache::ForeignFormat;
/// use ranktune_formats::trtllm::{spool_bytes, NativeEntry, NativeFormat, NativeUpdate};
/// let mut update = NativeUpdate::default();
/// let e = NativeEntry { key: "('op', 'R', '0', ((8,),))".into(), runner_id: 0,
///     tactic: "3".into(), min_time: 0.5 };
/// update.sections.push(("rank_0".into(), vec![e]));
/// let (text, total) = NativeFormat.fold(None, &[spool_bytes(&update)]).unwrap();
/// assert_eq!(total, 1);
/// assert!(String::from_utf8(text).unwrap().contains("\"rank_0\""));
/// ```
pub struct NativeFormat;

/// The spool file of one save.
pub fn spool_bytes(update: &NativeUpdate) -> Vec<u8> {
    let sections: Vec<Value> = update
        .sections
        .iter()
        .map(|(name, es)| {
            let es: Vec<Value> = es
                .iter()
                .map(|e| json!([e.key, e.runner_id, e.tactic, e.min_time.to_bits()]))
                .collect();
            json!([name, es])
        })
        .collect();
    let metadata: Vec<Value> = update.metadata.iter().map(|(k, v)| json!([k, v])).collect();
    json!({"metadata": metadata, "sections": sections}).to_string().into_bytes()
}

/// A spool file's save; `Err` says why it is not one.
fn parse_spool(bytes: &[u8]) -> Result<NativeUpdate, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let bad = |what: &str| format!("not a TensorRT-LLM drop-in save: {what}");
    let mut update = NativeUpdate::default();
    for m in v.get("metadata").and_then(Value::as_array).ok_or_else(|| bad("no metadata list"))? {
        let name = m.get(0).and_then(Value::as_str).ok_or_else(|| bad("a metadata name"))?;
        let value = m.get(1).ok_or_else(|| bad("a metadata value"))?;
        update.metadata.push((name.to_string(), value.clone()));
    }
    for s in v.get("sections").and_then(Value::as_array).ok_or_else(|| bad("no sections"))? {
        let name = s.get(0).and_then(Value::as_str).ok_or_else(|| bad("a section name"))?;
        let mut es = Vec::new();
        for e in s.get(1).and_then(Value::as_array).ok_or_else(|| bad("a section's entries"))? {
            let entry = (|| {
                Some(NativeEntry {
                    key: e.get(0)?.as_str()?.to_string(),
                    runner_id: e.get(1)?.as_i64()?,
                    tactic: e.get(2)?.as_str()?.to_string(),
                    min_time: f64::from_bits(e.get(3)?.as_u64()?),
                })
            })();
            es.push(entry.ok_or_else(|| bad("an entry"))?);
        }
        update.sections.push((name.to_string(), es));
    }
    Ok(update)
}

/// ranktune's notes for a save of `sections` from this machine.
fn extras<'a>(sections: impl Iterator<Item = &'a str>) -> Value {
    let identity = ranktune_cache::Identity::current();
    let digest = identity.digest();
    let now = ranktune_core::clock::unix_now();
    let saved: serde_json::Map<String, Value> = sections
        .map(|name| (name.to_string(), json!({"env": digest, "saved_unix": now})))
        .collect();
    json!({"environments": {digest.clone(): identity}, "sections": saved})
}

/// The file's text; a file that is not UTF-8 is not a TensorRT-LLM cache.
fn text(old: Option<&[u8]>) -> Result<&str, String> {
    std::str::from_utf8(old.unwrap_or_default())
        .map_err(|e| format!("not UTF-8 text (byte {})", e.valid_up_to()))
}

impl ForeignFormat for NativeFormat {
    fn spool_suffix(&self) -> &'static str {
        "trtllm-spool"
    }

    fn check_spool(&self, bytes: &[u8]) -> Result<(), String> {
        parse_spool(bytes).map(|_| ())
    }

    fn fold(&self, old: Option<&[u8]>, spools: &[Vec<u8>]) -> Result<(Vec<u8>, usize), String> {
        let old_text = text(old)?;
        if spools.is_empty() {
            // A load with nothing waiting: the file as it is, once the whole
            // of it scans (every rank's sections, not only the reader's).
            let total = native_entries(old_text).map_err(|e| e.to_string())?;
            return Ok((old.unwrap_or_default().to_vec(), total));
        }
        let mut update = NativeUpdate::default();
        for bytes in spools {
            let u = parse_spool(bytes)?;
            if update.metadata.is_empty() {
                update.metadata = u.metadata;
            }
            for (section, es) in u.sections {
                match update.sections.iter_mut().find(|(n, _)| *n == section) {
                    Some((_, all)) => all.extend(es),
                    None => update.sections.push((section, es)),
                }
            }
        }
        update.extras = extras(update.sections.iter().map(|(n, _)| n.as_str()));
        let spliced = splice_native(old_text, &update).map_err(|e| e.to_string())?;
        Ok((spliced.text.into_bytes(), spliced.total))
    }
}

#[cfg(test)]
mod tests {
    use super::super::native::read_native;
    use super::*;

    fn entry(key: &str, min_time: f64) -> NativeEntry {
        NativeEntry { key: key.into(), runner_id: 1, tactic: "(2, 'x')".into(), min_time }
    }

    #[test]
    fn a_spool_round_trips_every_float_exactly() {
        let mut u = NativeUpdate::default();
        u.metadata.push(("lib_version".into(), json!("1.2")));
        u.sections.push(("rank_3".into(), vec![entry("k", f64::INFINITY), entry("j", 1e-300)]));
        let back = parse_spool(&spool_bytes(&u)).unwrap();
        assert_eq!(back.metadata, u.metadata);
        assert_eq!(back.sections[0].1[0].min_time, f64::INFINITY);
        assert_eq!(back.sections[0].1[1].min_time.to_bits(), 1e-300f64.to_bits());
    }

    #[test]
    fn damaged_spools_and_foreign_files_are_refused_with_a_reason() {
        assert!(NativeFormat.check_spool(b"{\"metadata\": [], \"sections\": [[1]]}").is_err());
        assert!(NativeFormat.check_spool(b"not json").is_err());
        let mut u = NativeUpdate::default();
        u.sections.push(("rank_0".into(), vec![entry("k", 1.0)]));
        let e = NativeFormat.fold(Some(b"[1, 2]"), &[spool_bytes(&u)]).unwrap_err();
        assert!(e.contains("not a TensorRT-LLM cache"), "{e}");
        let e = NativeFormat.fold(Some(&[0xff, 0xfe]), &[]).unwrap_err();
        assert!(e.contains("not UTF-8"), "{e}");
    }

    #[test]
    fn later_saves_of_a_key_win_and_a_load_leaves_the_text_alone() {
        let save = |t: f64| {
            let mut u = NativeUpdate::default();
            u.sections.push(("rank_0".into(), vec![entry("k", t)]));
            spool_bytes(&u)
        };
        let (text, total) = NativeFormat.fold(None, &[save(2.0), save(1.0)]).unwrap();
        assert_eq!(total, 1);
        let loaded = read_native(std::str::from_utf8(&text).unwrap(), 0).unwrap();
        assert_eq!(loaded.rank[0].min_time, 1.0);
        assert_eq!(NativeFormat.fold(Some(&text), &[]).unwrap(), (text.clone(), 1));
        // A load checks the whole file, every rank's sections: a document
        // that is not a cache is refused (then set aside by the store).
        let e = NativeFormat.fold(Some(b"[1, 2]"), &[]).unwrap_err();
        assert!(e.contains("not a TensorRT-LLM cache"), "{e}");
        let mut other = NativeUpdate::default();
        other.sections.push(("rank_3".into(), vec![entry("j", 1.0), entry("i", 2.0)]));
        let (both, _) = NativeFormat.fold(Some(&text), &[spool_bytes(&other)]).unwrap();
        assert_eq!(NativeFormat.fold(Some(&both), &[]).unwrap().1, 3);
    }
}
