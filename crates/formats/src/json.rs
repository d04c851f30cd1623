//! JSON as Python's `json` writes it, parsed once for detection and for
//! the formats that read a plain [`serde_json::Value`]: bare `NaN`,
//! `Infinity` and `-Infinity` (which JSON lacks) read as `null`.
//!
//! This module owns that one parse and its errors; it never decides a
//! format.

use crate::FormatError;
use serde_json::{Map, Value};

/// Parses JSON text as Python writes it. Python's `json` writes `NaN` and
/// `Infinity` for non-finite floats; those read as `null` (so such an
/// entry is skipped with a warning rather than failing the whole
/// document). Blank text is an empty object.
pub fn parse_document(bytes: &[u8]) -> Result<Value, FormatError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| FormatError::NotUtf8 { offset: e.valid_up_to() })?;
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let first = match serde_json::from_str::<Value>(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    if let Some(fixed) = replace_non_finite(text) {
        if let Ok(v) = serde_json::from_str::<Value>(&fixed) {
            return Ok(v);
        }
    }
    let mut message = first.to_string();
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    Err(FormatError::NotJson { at: Some((first.line(), first.column())), message })
}

/// Replaces the bare tokens `NaN`, `Infinity`, `-Infinity` outside strings
/// by `null`; `None` when there are none.
fn replace_non_finite(text: &str) -> Option<String> {
    crate::ordered::replace_bare_non_finite(text, &|_| "null".into())
}

/// The name of a JSON value's type, as messages say it.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_tokens_outside_strings_only() {
        let fixed =
            replace_non_finite(r#"{"a": NaN, "b": "NaN Infinity", "c": -Infinity}"#).unwrap();
        assert_eq!(fixed, r#"{"a": null, "b": "NaN Infinity", "c": null}"#);
        assert_eq!(replace_non_finite(r#"{"a": 1}"#), None);
    }
}
