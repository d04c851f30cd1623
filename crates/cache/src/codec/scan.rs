//! Reading an entry's key from its JSON text without parsing the entry,
//! and compacting JSON text: what lets a fold copy entries as text.
//!
//! [`key_of`] reads the key of an entry as the codec writes it (compact,
//! `op`, `runner`, `fingerprint`, `bucket` first) with a hand scan, and any
//! other layout with serde; [`compact`] removes whitespace outside strings.
//! This module never builds an [`Entry`](crate::Entry).

use crate::entry::EntryKey;
use crate::json_text::Strings;
use serde::Deserialize;

#[derive(Deserialize)]
struct KeyIn {
    op: String,
    runner: String,
    fingerprint: String,
    bucket: Vec<Vec<crate::Dim>>,
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
fn take_bucket(s: &str) -> Option<(Vec<Vec<crate::Dim>>, &str)> {
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
                // An integer, maybe negative (`-1`); a float (`1.5`, `1e3`)
                // is left to serde.
                let sign = usize::from(s.starts_with('-'));
                let digits = &s[sign..];
                let end = digits.bytes().position(|b| !b.is_ascii_digit())?;
                // `-0` is a float to serde_json; leave it to serde too.
                if end == 0 || ((end > 1 || sign == 1) && digits.starts_with('0')) {
                    return None;
                }
                if matches!(digits.as_bytes()[end], b'.' | b'e' | b'E') {
                    return None;
                }
                let dim = if sign == 1 {
                    crate::Dim::from(s[..sign + end].parse::<i64>().ok()?)
                } else {
                    crate::Dim::size(digits[..end].parse().ok()?)
                };
                dims.push(dim);
                s = &digits[end..];
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

/// The key of a compact entry as the codec writes it
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
pub(super) fn compact(raw: &str) -> Box<str> {
    let bytes = raw.as_bytes();
    if !bytes.iter().any(|&b| matches!(b, b' ' | b'\n' | b'\t' | b'\r')) {
        return raw.into();
    }
    let mut strings = Strings::default();
    if !bytes.iter().any(|&b| strings.outside(char::from(b)) && b.is_ascii_whitespace()) {
        return raw.into();
    }
    let mut strings = Strings::default();
    let mut out = String::with_capacity(raw.len());
    out.extend(raw.chars().filter(|&c| !(strings.outside(c) && c.is_ascii_whitespace())));
    out.into_boxed_str()
}

/// The key of an entry from its compact JSON text: by the fast scan when
/// the entry is laid out as the codec writes it, else by serde; `None` when
/// the text has no readable key.
pub(super) fn key_of(text: &str) -> Option<EntryKey> {
    fast_key(text).or_else(|| {
        serde_json::from_str::<KeyIn>(text).ok().map(|k| EntryKey {
            op: k.op,
            runner: k.runner,
            fingerprint: k.fingerprint,
            bucket: k.bucket,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_key_agrees_with_serde_or_declines() {
        for text in [
            r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[1,2],[3]],"x":1}"#,
            r#"{"op":"a\"b","runner":"\u00fc","fingerprint":"","bucket":[],"x":1}"#,
            r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[]],"x":1}"#,
            r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[01]],"x":1}"#,
            r#"{"runner":"b","op":"a","fingerprint":"c","bucket":[[1]]}"#,
            r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[-1,0],[1.5,2e3]],"x":1}"#,
            r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[-1,-0,-01]],"x":1}"#,
            r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[-9223372036854775809]],"x":1}"#,
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
        let neg = fast_key(r#"{"op":"a","runner":"b","fingerprint":"c","bucket":[[-1,0]],"x":1}"#);
        assert_eq!(
            neg.map(|k| k.bucket),
            Some(vec![vec![crate::Dim::from(-1i64), crate::Dim::size(0)]])
        );
    }

    #[test]
    fn compact_strips_only_outside_strings() {
        assert_eq!(&*compact("{ \"a b\" : [1, 2] }"), "{\"a b\":[1,2]}");
        assert_eq!(&*compact(r#"{"a\" b":1}"#), r#"{"a\" b":1}"#);
    }
}
