//! Tactic values between Python literals and JSON, losslessly.
//!
//! The mapping (documented in `docs/cache-interop.md`):
//!
//! | Python | JSON |
//! | --- | --- |
//! | `None`, `True`/`False` | `null`, `true`/`false` |
//! | int fitting 64 bits | number |
//! | larger int | `{"$int": "<decimal>"}` |
//! | finite float | number (always written with a `.` or exponent) |
//! | `inf`, `-inf`, `nan` | `{"$float": "inf"}` (… `"-inf"`, `"nan"`) |
//! | str | string |
//! | tuple | array |
//! | list | `{"$list": [...]}` |
//! | dict with str keys | object (keys sorted) |
//! | any other dict | `{"$dict": [[key, value], ...]}` |
//!
//! Tuples are what the reference's tactics are made of, so they get the
//! plain JSON array; the rarer list keeps its identity through a tag. A JSON
//! object whose only key is one of the tags above is read back as that tag,
//! so native tactics must not use such objects. Nothing here evaluates code.

use super::pyliteral::PyValue;
use serde_json::{Map, Number, Value};

/// Converts a parsed Python literal to the JSON form in the module table.
///
/// ```
/// use ranktune_formats::trtllm::{parse_literal, py_to_json};
/// let v = py_to_json(&parse_literal("((256, 256), (1, 2), 1)").unwrap());
/// assert_eq!(v, serde_json::json!([[256, 256], [1, 2], 1]));
/// ```
pub fn py_to_json(v: &PyValue) -> Value {
    match v {
        PyValue::None => Value::Null,
        PyValue::Bool(b) => Value::Bool(*b),
        PyValue::Int(digits) => {
            if let Ok(i) = digits.parse::<i64>() {
                Value::from(i)
            } else if let Ok(u) = digits.parse::<u64>() {
                Value::from(u)
            } else {
                tagged("$int", Value::String(digits.clone()))
            }
        }
        PyValue::Float(f) => match Number::from_f64(*f) {
            Some(n) => Value::Number(n),
            None => tagged("$float", Value::String(super::pyliteral::repr_float(*f))),
        },
        PyValue::Str(s) => Value::String(s.clone()),
        PyValue::Tuple(items) => Value::Array(items.iter().map(py_to_json).collect()),
        PyValue::List(items) => {
            tagged("$list", Value::Array(items.iter().map(py_to_json).collect()))
        }
        PyValue::Dict(pairs) => {
            if pairs.iter().all(|(k, _)| matches!(k, PyValue::Str(_))) && !is_tag_like(pairs) {
                let mut map = Map::new();
                for (k, v) in pairs {
                    if let PyValue::Str(k) = k {
                        map.insert(k.clone(), py_to_json(v));
                    }
                }
                // Duplicate keys collapse as they do in Python (last wins).
                Value::Object(map)
            } else {
                let items = pairs
                    .iter()
                    .map(|(k, v)| Value::Array(vec![py_to_json(k), py_to_json(v)]))
                    .collect();
                tagged("$dict", Value::Array(items))
            }
        }
    }
}

/// A str-keyed dict that would read back as a tag must itself be tagged.
fn is_tag_like(pairs: &[(PyValue, PyValue)]) -> bool {
    pairs.len() == 1 && matches!(&pairs[0].0, PyValue::Str(k) if TAGS.contains(&k.as_str()))
}

const TAGS: [&str; 4] = ["$int", "$float", "$list", "$dict"];

fn tagged(tag: &str, v: Value) -> Value {
    let mut m = Map::new();
    m.insert(tag.to_string(), v);
    Value::Object(m)
}

/// Why a JSON tactic has no Python literal form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tactic cannot be written as a Python literal: {0}")]
pub struct TacticError(pub String);

/// Converts a JSON tactic back to a Python literal (the inverse of
/// [`py_to_json`]; arrays become tuples, objects become dicts).
pub fn json_to_py(v: &Value) -> Result<PyValue, TacticError> {
    Ok(match v {
        Value::Null => PyValue::None,
        Value::Bool(b) => PyValue::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                PyValue::int(i128::from(i))
            } else if let Some(u) = n.as_u64() {
                PyValue::int(i128::from(u))
            } else {
                PyValue::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => PyValue::Str(s.clone()),
        Value::Array(items) => {
            PyValue::Tuple(items.iter().map(json_to_py).collect::<Result<_, _>>()?)
        }
        Value::Object(map) => {
            if map.len() == 1 {
                if let Some((k, inner)) = map.iter().next() {
                    if TAGS.contains(&k.as_str()) {
                        return untag(k, inner);
                    }
                }
            }
            PyValue::Dict(
                map.iter()
                    .map(|(k, v)| Ok((PyValue::Str(k.clone()), json_to_py(v)?)))
                    .collect::<Result<_, TacticError>>()?,
            )
        }
    })
}

fn untag(tag: &str, inner: &Value) -> Result<PyValue, TacticError> {
    match (tag, inner) {
        ("$int", Value::String(s)) => match super::pyliteral::parse_literal(s) {
            Ok(v @ PyValue::Int(_)) => Ok(v),
            _ => Err(TacticError(format!("{{\"$int\": {s:?}}} does not hold a decimal integer"))),
        },
        ("$float", Value::String(s)) => match s.as_str() {
            "inf" => Ok(PyValue::Float(f64::INFINITY)),
            "-inf" => Ok(PyValue::Float(f64::NEG_INFINITY)),
            "nan" => Ok(PyValue::Float(f64::NAN)),
            _ => Err(TacticError(format!(
                "{{\"$float\": {s:?}}} must be \"inf\", \"-inf\" or \"nan\""
            ))),
        },
        ("$list", Value::Array(items)) => {
            Ok(PyValue::List(items.iter().map(json_to_py).collect::<Result<_, _>>()?))
        }
        ("$dict", Value::Array(pairs)) => {
            let mut out = Vec::with_capacity(pairs.len());
            for pair in pairs {
                match pair.as_array().map(Vec::as_slice) {
                    Some([k, v]) => {
                        let k = json_to_py(k)?;
                        if matches!(k, PyValue::List(_) | PyValue::Dict(_)) {
                            return Err(TacticError(format!(
                                "a {} cannot be a dict key",
                                k.type_name()
                            )));
                        }
                        out.push((k, json_to_py(v)?));
                    }
                    _ => return Err(TacticError("\"$dict\" must hold [key, value] pairs".into())),
                }
            }
            Ok(PyValue::Dict(out))
        }
        _ => Err(TacticError(format!("malformed {tag:?} tag: {inner}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trtllm::pyliteral::parse_literal;
    use serde_json::json;

    fn round(src: &str) -> (Value, String) {
        let j = py_to_json(&parse_literal(src).unwrap());
        let back = json_to_py(&j).unwrap().to_string();
        (j, back)
    }

    #[test]
    fn reference_tactics_round_trip() {
        for (src, want) in [
            ("43", json!(43)),
            ("-1", json!(-1)),
            ("((256, 256), (1, 2), 1)", json!([[256, 256], [1, 2], 1])),
            (
                "'bmm_E4m3_E4m3E4m3_Fp32_t128x8x128_s6_et64x8_m64x8x32_cga1x1x1_16dp256b'",
                json!("bmm_E4m3_E4m3E4m3_Fp32_t128x8x128_s6_et64x8_m64x8x32_cga1x1x1_16dp256b"),
            ),
            ("None", json!(null)),
            ("(True, 1.5, 'x')", json!([true, 1.5, "x"])),
            ("[1, (2,)]", json!({"$list": [1, [2]]})),
            ("inf", json!({"$float": "inf"})),
            ("123456789012345678901234567890", json!({"$int": "123456789012345678901234567890"})),
            ("{'tile': 64, 'order': 'ikj'}", json!({"order": "ikj", "tile": 64})),
            ("{1: 'a'}", json!({"$dict": [[1, "a"]]})),
            ("{'$list': 1}", json!({"$dict": [["$list", 1]]})),
        ] {
            let (j, back) = round(src);
            assert_eq!(j, want, "{src}");
            // Dicts with str keys come back sorted; everything else verbatim.
            if !src.starts_with("{'tile'") {
                assert_eq!(back, src);
            }
        }
    }

    #[test]
    fn bad_tags_are_errors() {
        assert!(json_to_py(&json!({"$int": "1.5"})).is_err());
        assert!(json_to_py(&json!({"$float": "1"})).is_err());
        assert!(json_to_py(&json!({"$dict": [[1]]})).is_err());
        assert!(json_to_py(&json!({"$list": 3})).is_err());
    }
}
