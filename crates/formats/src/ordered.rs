//! JSON that keeps what other tools' files look like: object members in
//! file order and every scalar as the exact text the file had (so
//! `0.0123240234375` or `1e-06` is written back character for character),
//! and a writer that lays documents out the way Python's `json.dump` does
//! (`indent=N`, `ensure_ascii`), the writer of every format imported here.
//!
//! The importers of outside formats parse with [`parse`] to learn order
//! and number text; the exporters write with [`write`]. This module owns
//! only that syntax: it never interprets values and does no I/O.

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

/// A JSON value with its members in file order and scalars as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OValue {
    /// A string, number, boolean or null: its exact JSON text (strings
    /// with their quotes and escapes).
    Scalar(Box<str>),
    /// An array.
    Array(Vec<OValue>),
    /// An object: (decoded name, value) in file order.
    Object(Vec<(String, OValue)>),
}

impl OValue {
    /// A scalar from JSON text the caller knows is valid (a number
    /// written by Rust, a JSON string literal).
    pub fn scalar(text: impl Into<Box<str>>) -> OValue {
        OValue::Scalar(text.into())
    }

    /// A string scalar.
    pub fn string(s: &str) -> OValue {
        OValue::Scalar(python_str(s).into())
    }

    /// The object's members, if it is one.
    pub fn members(&self) -> Option<&[(String, OValue)]> {
        match self {
            OValue::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The member `name` of an object; of an object that holds it more
    /// than once, the last, as Python's `json.load` and
    /// [`to_value`](Self::to_value) read it (so a check made on this value
    /// holds for the value an export writes and a tool reads back).
    pub fn get(&self, name: &str) -> Option<&OValue> {
        self.members()?.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// This value as a [`serde_json::Value`] (members sorted, numbers
    /// parsed): for code that reads values rather than layout. A value JSON
    /// cannot carry (Python's `NaN`, `Infinity`, a number out of range)
    /// becomes `null`; see [`try_to_value`](Self::try_to_value).
    pub fn to_value(&self) -> serde_json::Value {
        self.try_to_value().unwrap_or(serde_json::Value::Null)
    }

    /// This value as a [`serde_json::Value`], or `None` when it holds
    /// something JSON cannot carry (Python's `NaN`, `Infinity`, a number out
    /// of range): for values that must survive as they are, such as a
    /// tactic.
    pub fn try_to_value(&self) -> Option<serde_json::Value> {
        let mut text = String::new();
        write_compact(self, &mut text);
        serde_json::from_str(&text).ok()
    }

    /// The value built from a [`serde_json::Value`] (members in that
    /// value's order).
    pub fn from_value(v: &serde_json::Value) -> OValue {
        match v {
            serde_json::Value::Array(a) => {
                OValue::Array(a.iter().map(OValue::from_value).collect())
            }
            serde_json::Value::Object(m) => {
                OValue::Object(m.iter().map(|(k, v)| (k.clone(), OValue::from_value(v))).collect())
            }
            serde_json::Value::String(s) => OValue::string(s),
            other => OValue::Scalar(other.to_string().into()),
        }
    }
}

/// Parses JSON text, keeping member order and scalar text.
pub fn parse(text: &str) -> Result<OValue, serde_json::Error> {
    let raw: &RawValue = serde_json::from_str(text)?;
    from_raw(raw)
}

fn from_raw(raw: &RawValue) -> Result<OValue, serde_json::Error> {
    let text = raw.get().trim();
    match text.as_bytes().first() {
        Some(b'{') => {
            let members: Members<'_> = serde_json::from_str(text)?;
            let mut out = Vec::with_capacity(members.0.len());
            for (k, v) in members.0 {
                out.push((k, from_raw(v)?));
            }
            Ok(OValue::Object(out))
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text)?;
            items.into_iter().map(from_raw).collect::<Result<_, _>>().map(OValue::Array)
        }
        _ => Ok(OValue::Scalar(text.into())),
    }
}

/// An object's members in order, values left as raw text.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Members<'a>, M::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
            fn visit_seq<S: SeqAccess<'de>>(self, _: S) -> Result<Members<'a>, S::Error> {
                Err(serde::de::Error::custom("expected an object"))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// How a document is laid out on disk, as far as [`write`] reproduces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextLayout {
    /// Spaces per level (`json.dump(indent=N)`); `None` for one line with
    /// Python's default separators (`", "`, `": "`).
    pub indent: Option<usize>,
    /// The file ends with a newline.
    pub final_newline: bool,
}

impl TextLayout {
    /// The layout of `text`: the indentation of its first indented line,
    /// and whether it ends with a newline.
    pub fn of(text: &str) -> TextLayout {
        let body = text.trim_end_matches('\n');
        let indent =
            body.find('\n').map(|at| body[at + 1..].bytes().take_while(|b| *b == b' ').count());
        TextLayout { indent, final_newline: text.ends_with('\n') }
    }

    /// The layout as an origin record's `"layout"` member: `[indent or
    /// null, final newline]`.
    pub fn to_record(self) -> OValue {
        OValue::Array(vec![
            OValue::scalar(self.indent.map_or("null".to_string(), |n| n.to_string())),
            OValue::scalar(if self.final_newline { "true" } else { "false" }),
        ])
    }

    /// Reads what [`TextLayout::to_record`] wrote; `None` for anything else.
    pub fn from_record(v: &OValue) -> Option<TextLayout> {
        match v {
            OValue::Array(parts) => match parts.as_slice() {
                [indent, newline] => Some(TextLayout {
                    indent: match indent {
                        OValue::Scalar(t) => t.parse().ok(),
                        _ => None,
                    },
                    final_newline: *newline == OValue::scalar("true"),
                }),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Writes `v` as Python's `json.dump(v, f, indent=layout.indent)` would
/// (ASCII only, non-ASCII escaped), followed by a newline when the layout
/// says so. Scalars are written as their text.
pub fn write(v: &OValue, layout: TextLayout) -> String {
    let mut out = String::new();
    match layout.indent {
        Some(n) => write_indented(v, n, 0, &mut out),
        None => write_python_line(v, &mut out),
    }
    if layout.final_newline {
        out.push('\n');
    }
    out
}

fn write_indented(v: &OValue, indent: usize, depth: usize, out: &mut String) {
    let pad = |out: &mut String, d: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', indent * d));
    };
    match v {
        OValue::Scalar(s) => out.push_str(s),
        OValue::Array(items) if items.is_empty() => out.push_str("[]"),
        OValue::Object(members) if members.is_empty() => out.push_str("{}"),
        OValue::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                write_indented(item, indent, depth + 1, out);
            }
            pad(out, depth);
            out.push(']');
        }
        OValue::Object(members) => {
            out.push('{');
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                out.push_str(&python_str(k));
                out.push_str(": ");
                write_indented(item, indent, depth + 1, out);
            }
            pad(out, depth);
            out.push('}');
        }
    }
}

fn write_python_line(v: &OValue, out: &mut String) {
    write_with(v, ", ", ": ", out)
}

fn write_compact(v: &OValue, out: &mut String) {
    write_with(v, ",", ":", out)
}

fn write_with(v: &OValue, item_sep: &str, key_sep: &str, out: &mut String) {
    match v {
        OValue::Scalar(s) => out.push_str(s),
        OValue::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                write_with(item, item_sep, key_sep, out);
            }
            out.push(']');
        }
        OValue::Object(members) => {
            out.push('{');
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                out.push_str(&python_str(k));
                out.push_str(key_sep);
                write_with(item, item_sep, key_sep, out);
            }
            out.push('}');
        }
    }
}

/// A JSON string literal as Python's `json.dumps` writes it
/// (`ensure_ascii=True`).
pub fn python_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The bare tokens Python's `json.dumps` writes for non-finite floats.
pub(crate) const NON_FINITE_TOKENS: [&str; 3] = ["-Infinity", "Infinity", "NaN"];

/// Python's `json.dumps` writes non-finite floats as the bare tokens
/// `NaN`, `Infinity` and `-Infinity`, which JSON does not have. This
/// replaces each of them outside strings by `with(token)`; `None` when the
/// text holds none. (The one scanner of those tokens for every importer of
/// Python-written JSON.)
pub(crate) fn replace_bare_non_finite(text: &str, with: &dyn Fn(&str) -> String) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let (mut strings, mut changed) = (ranktune_cache::json_text::Strings::default(), false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if strings.outside(c) {
            if let Some(t) = NON_FINITE_TOKENS.iter().find(|t| rest.starts_with(**t)) {
                out.push_str(&with(t));
                rest = &rest[t.len()..];
                changed = true;
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_number_text_survive() {
        let text = "{\n    \"2\": {\n        \"b\": 1e-06,\n        \"a\": [\n            1.50,\n            \"x\\u00e9\"\n        ]\n    },\n    \"1\": {}\n}\n";
        let v = parse(text).unwrap();
        let keys: Vec<&str> = v.members().unwrap().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["2", "1"]);
        assert_eq!(v.get("2").unwrap().get("b"), Some(&OValue::scalar("1e-06")));
        assert_eq!(TextLayout::of(text), TextLayout { indent: Some(4), final_newline: true });
        assert_eq!(write(&v, TextLayout::of(text)), text);
        assert_eq!(
            write(&v, TextLayout { indent: None, final_newline: false }),
            "{\"2\": {\"b\": 1e-06, \"a\": [1.50, \"x\\u00e9\"]}, \"1\": {}}"
        );
        assert_eq!(v.to_value()["2"]["b"], serde_json::json!(1e-06));
    }

    #[test]
    fn python_strings() {
        assert_eq!(python_str("a\"\\\n\u{1}é😀"), "\"a\\\"\\\\\\n\\u0001\\u00e9\\ud83d\\ude00\"");
    }

    #[test]
    fn errors_are_errors() {
        assert!(parse("{\"a\": ").is_err());
        assert!(parse("[1,]").is_err());
    }
}
