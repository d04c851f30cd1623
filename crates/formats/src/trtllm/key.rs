//! The reference's entry key: Python's `str()` of the tuple
//! `(custom_op, runner_class_name, str(runner_unique_id), opt_shapes)`.
//!
//! It maps onto [`EntryKey`] as `op`, `runner`, `fingerprint` (the unique-id
//! repr string, kept verbatim so export reproduces it exactly) and `bucket`
//! (`opt_shapes`, a tuple of tuples of ints: `-1` for each dim a
//! `ConstraintSpec` derives, `0` for non-tensor inputs; a float is kept
//! too, bit-exact). Parsing goes
//! through [`pyliteral`]: nothing is evaluated.

use super::pyliteral::{self, PyValue};
use ranktune_cache::{Dim, EntryKey};

/// Why a key string is not a reference key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Not a Python literal at all.
    #[error("key is not a Python literal: {0}")]
    Syntax(#[from] pyliteral::LiteralError),
    /// A literal, but not `(str, str, str, ((int, ...), ...))`.
    #[error("key is not (op, runner, unique_id, opt_shapes): {0}")]
    Shape(String),
}

/// Parses one reference key.
///
/// ```
/// use ranktune_formats::trtllm::{format_key, parse_key};
/// let text = r#"('trtllm::fp8_gemm', 'FP8GemmRunner', "(1, 'x')", ((8, 4096), (4096,)))"#;
/// let key = parse_key(text).unwrap();
/// assert_eq!(key.runner, "FP8GemmRunner");
/// assert_eq!(key.fingerprint, "(1, 'x')");
/// assert_eq!(key.bucket, ranktune_cache::sizes_bucket(&[vec![8, 4096], vec![4096]]));
/// assert_eq!(format_key(&key), text);
/// ```
pub fn parse_key(text: &str) -> Result<EntryKey, KeyError> {
    let items = match pyliteral::parse_literal(text)? {
        PyValue::Tuple(items) => items,
        other => {
            return Err(KeyError::Shape(format!("a {} instead of a 4-tuple", other.type_name())))
        }
    };
    let [op, runner, uid, shapes] = <[PyValue; 4]>::try_from(items).map_err(|items| {
        KeyError::Shape(format!("a tuple of {} items instead of 4", items.len()))
    })?;
    let string = |v: PyValue, what: &str| match v {
        PyValue::Str(s) => Ok(s),
        other => {
            Err(KeyError::Shape(format!("{what} is a {} instead of a str", other.type_name())))
        }
    };
    let op = string(op, "custom_op")?;
    let runner = string(runner, "runner class name")?;
    let fingerprint = string(uid, "runner unique id")?;
    let bucket = parse_shapes(shapes)?;
    Ok(EntryKey { op, runner, fingerprint, bucket })
}

/// A dim of `opt_shapes`: an integer (`-1` for a dim a constraint derives,
/// `0` for a non-tensor input) or a finite float, kept exactly.
fn parse_dim(dim: &PyValue) -> Option<Dim> {
    match dim {
        PyValue::Int(text) => text.parse::<i128>().ok().and_then(Dim::int),
        PyValue::Float(f) => Dim::float(*f),
        // `True` is an int to Python's tuple repr only as `True`; not a dim.
        _ => None,
    }
}

fn dim_value(dim: &Dim) -> PyValue {
    match (dim.as_i128(), dim.as_f64()) {
        (Some(i), _) => PyValue::int(i),
        (None, Some(f)) => PyValue::Float(f),
        // A dim is an integer or a float.
        (None, None) => PyValue::None,
    }
}

fn parse_shapes(v: PyValue) -> Result<Vec<Vec<Dim>>, KeyError> {
    let seq = |v: PyValue, what: &str| match v {
        PyValue::Tuple(items) | PyValue::List(items) => Ok(items),
        other => {
            Err(KeyError::Shape(format!("{what} is a {} instead of a tuple", other.type_name())))
        }
    };
    seq(v, "opt_shapes")?
        .into_iter()
        .map(|shape| {
            seq(shape, "a shape in opt_shapes")?
                .into_iter()
                .map(|dim| {
                    parse_dim(&dim).ok_or_else(|| {
                        KeyError::Shape(format!(
                            "dimension {dim} in opt_shapes is not an integer or a finite float"
                        ))
                    })
                })
                .collect()
        })
        .collect()
}

/// Writes a key exactly as Python's `str()` of the tuple does.
pub fn format_key(key: &EntryKey) -> String {
    let shapes = PyValue::Tuple(
        key.bucket
            .iter()
            .map(|dims| PyValue::Tuple(dims.iter().map(dim_value).collect()))
            .collect(),
    );
    PyValue::Tuple(vec![
        PyValue::Str(key.op.clone()),
        PyValue::Str(key.runner.clone()),
        PyValue::Str(key.fingerprint.clone()),
        shapes,
    ])
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real key from the reference, as it appears *inside* the JSON string.
    const REAL: &str = r#"('trtllm::tunable_allreduce::allreduce', 'AllReduceRunner', "(8, (0, 1, 2, 3, 4, 5, 6, 7), 'RESIDUAL_RMS_NORM', 1e-06, True)", ((1, 2048), (1, 2048), (2048,), (1,)))"#;

    #[test]
    fn real_key_round_trips_exactly() {
        let key = parse_key(REAL).unwrap();
        assert_eq!(key.op, "trtllm::tunable_allreduce::allreduce");
        assert_eq!(key.runner, "AllReduceRunner");
        assert_eq!(
            key.fingerprint,
            "(8, (0, 1, 2, 3, 4, 5, 6, 7), 'RESIDUAL_RMS_NORM', 1e-06, True)"
        );
        assert_eq!(
            key.bucket,
            ranktune_cache::sizes_bucket(&[vec![1, 2048], vec![1, 2048], vec![2048], vec![1]])
        );
        assert_eq!(format_key(&key), REAL);
        // The fingerprint is itself a Python literal; it parses too.
        let uid = pyliteral::parse_literal(&key.fingerprint).unwrap();
        assert_eq!(uid.to_string(), key.fingerprint);
    }

    #[test]
    fn the_json_encoded_key_decodes_to_the_same_text() {
        let json = r#""('trtllm::tunable_allreduce::allreduce', 'AllReduceRunner', \"(8, (0, 1, 2, 3, 4, 5, 6, 7), 'RESIDUAL_RMS_NORM', 1e-06, True)\", ((1, 2048), (1, 2048), (2048,), (1,)))""#;
        let text: String = serde_json::from_str(json).unwrap();
        assert_eq!(text, REAL);
    }

    #[test]
    fn fingerprint_with_both_quote_styles() {
        let key = EntryKey {
            op: "op".into(),
            runner: "R".into(),
            fingerprint: "('a', \"b'c\")".into(),
            bucket: ranktune_cache::sizes_bucket(&[vec![], vec![7]]),
        };
        let text = format_key(&key);
        assert_eq!(text, r#"('op', 'R', '(\'a\', "b\'c")', ((), (7,)))"#);
        assert_eq!(parse_key(&text).unwrap(), key);
    }

    /// `_find_nearest_profile` writes `-1` for each dim a ConstraintSpec
    /// derives and `(0,)` for a non-tensor input; a float dim stays one.
    #[test]
    fn minus_one_zero_and_float_dims_round_trip_exactly() {
        let text =
            "('trtllm::fp4_gemm', 'FP4GemmRunner', '(1,)', ((8, -1), (0,), (1.5, 0.1, 1.0)))";
        let key = parse_key(text).unwrap();
        assert_eq!(key.bucket[0], [Dim::size(8), Dim::from(-1i64)]);
        assert_eq!(key.bucket[1], [Dim::size(0)]);
        let bits: Vec<_> = key.bucket[2].iter().map(|d| d.as_f64().map(f64::to_bits)).collect();
        assert_eq!(bits, [Some(1.5f64.to_bits()), Some(0.1f64.to_bits()), Some(1.0f64.to_bits())]);
        assert_eq!(format_key(&key), text);
    }

    #[test]
    fn wrong_shapes_are_errors() {
        for bad in [
            "('a', 'b', 'c')",
            "('a', 'b', 'c', ((1,),), 5)",
            "(1, 'b', 'c', ())",
            "('a', 'b', 'c', ((inf,),))",
            "('a', 'b', 'c', (('1',),))",
            "('a', 'b', 'c', ((None,),))",
            "('a', 'b', 'c', ((18446744073709551616,),))",
            "('a', 'b', 'c', (1,))",
            "'abc'",
            "('a', 'b', 'c', ((1,),)",
        ] {
            assert!(parse_key(bad).is_err(), "{bad}");
        }
    }
}
