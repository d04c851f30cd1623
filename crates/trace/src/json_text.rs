//! JSON text encoding for the recorder, the producers and the exporter:
//! string literals, integers, one `"key":value` field, and joining two open
//! objects' fields, under one bound on an event's args ([`MAX_ARGS_BYTES`]).
//!
//! This module owns only turning values into JSON text in a caller's buffer.
//! It sits below everything else in the crate and must never depend on
//! another module of it, record, or do I/O.

use std::fmt::Write as _;

/// Most bytes of args kept per event by the producers (the native API, the
/// `tracing` Layer and Subscriber); fields past it are left out, so one
/// huge value (a `Debug` dump, a long string) cannot defeat the buffer bound.
pub(crate) const MAX_ARGS_BYTES: usize = 1024;

/// Appends `"key":value` (after a comma unless it is the first field) to
/// open JSON object bytes, serialized in place; a field that would pass
/// [`MAX_ARGS_BYTES`] is left out.
pub(crate) fn push_field(args: &mut Vec<u8>, key: &str, value: &impl serde::Serialize) {
    let mark = args.len();
    if args.len() > 1 {
        args.push(b',');
    }
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *args, key);
    args.push(b':');
    let value_at = args.len();
    if let Err(e) = serde_json::to_writer(&mut *args, value) {
        args.truncate(value_at);
        let _ = serde_json::to_writer(&mut *args, &format!("<unserializable: {e}>"));
    }
    if args.len() > MAX_ARGS_BYTES {
        args.truncate(mark);
    }
}

/// Appends the fields of `more` (an open object text `{"k":v,...`) to the
/// open object text `args`, unless that would exceed [`MAX_ARGS_BYTES`].
pub(crate) fn merge_args(args: &mut String, more: &str) {
    let Some(fields) = more.strip_prefix('{').filter(|f| !f.is_empty()) else {
        return;
    };
    if args.is_empty() {
        args.push('{');
    }
    let comma = usize::from(args.len() > 1);
    if args.len() + comma + fields.len() <= MAX_ARGS_BYTES {
        if comma == 1 {
            args.push(',');
        }
        args.push_str(fields);
    }
}

/// Appends `s` as a JSON string literal.
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        // Nothing to escape (the usual field name or value): one copy.
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends the decimal digits of `v` (with `itoa`, not the `fmt`
/// machinery: this is on the path of every `tracing` span with an integer
/// field and of every number in an exported trace).
pub(crate) fn push_u64(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// Appends the decimal digits of `v`, with a `-` when negative.
pub(crate) fn push_i64(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    push_u64(out, v.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_text_helpers_escape() {
        let mut s = b"{".to_vec();
        push_field(&mut s, "a\"b", &"x\ny\u{1}");
        push_field(&mut s, "n", &3);
        s.push(b'}');
        let v: serde_json::Value = serde_json::from_slice(&s).unwrap();
        assert_eq!(v["a\"b"], "x\ny\u{1}");
        assert_eq!(v["n"], 3);
    }

    #[test]
    fn integers_are_written_in_decimal() {
        for v in [0, 1, 9, 10, 42, 1_000_000, i64::MAX, i64::MIN, -1, -10] {
            let mut s = String::new();
            push_i64(&mut s, v);
            assert_eq!(s, v.to_string());
        }
        let mut s = String::new();
        push_u64(&mut s, u64::MAX);
        assert_eq!(s, u64::MAX.to_string());
    }

    #[test]
    fn oversized_args_are_left_out_and_the_rest_stays_valid() {
        let mut s = b"{".to_vec();
        push_field(&mut s, "small", &1);
        push_field(&mut s, "huge", &"x".repeat(5000));
        push_field(&mut s, "after", &2);
        let bad: std::collections::HashMap<Vec<u8>, u8> = [(vec![1], 2)].into();
        push_field(&mut s, "bad", &bad);
        s.push(b'}');
        let v: serde_json::Value = serde_json::from_slice(&s).unwrap();
        assert_eq!(v["small"], 1);
        assert_eq!(v["after"], 2);
        assert!(v.get("huge").is_none());
        assert!(v["bad"].as_str().unwrap().starts_with("<unserializable"), "{v}");
    }
}
