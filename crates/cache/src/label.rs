//! Short labels for people: one way to write a bucket (`16x512,16x512`) and
//! a tactic (`naive(order=ikj)`) in every table and message the tools print.
//! Pure functions of their input; they never print, and JSON outputs never
//! use them (scripts get the values as stored).

use serde_json::Value;

/// A bucket as people read it: each input's dims joined by `x`, inputs
/// joined by `,`; an input without dims is `()`.
///
/// ```
/// use ranktune_cache::bucket_label;
/// use ranktune_cache::{sizes_bucket, Dim};
/// assert_eq!(bucket_label(&sizes_bucket(&[vec![16, 512], vec![16, 512]])), "16x512,16x512");
/// assert_eq!(bucket_label(&[vec![Dim::from(-1i64), Dim::float(1.5).unwrap()]]), "-1x1.5");
/// ```
///
/// Any dims that print themselves: the cache's [`Dim`](crate::Dim)s, or the
/// sizes a tuner buckets by (`bucket_label(&[vec![16u64, 512]])`), written
/// the same way.
pub fn bucket_label<D: std::fmt::Display>(bucket: &[Vec<D>]) -> String {
    bucket
        .iter()
        .map(|dims| {
            if dims.is_empty() {
                "()".to_string()
            } else {
                dims.iter().map(D::to_string).collect::<Vec<_>>().join("x")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A tactic as people read it: a string as it is, an object with one key
/// as `key(arg=value,...)`, a Triton config (an object with a `kwargs`
/// object) as its kwargs then its other members that are set
/// (`BLOCK_SIZE=1024,num_warps=4,...`), anything else as compact JSON.
///
/// ```
/// use ranktune_cache::tactic_label;
/// use serde_json::json;
/// assert_eq!(tactic_label(&json!({"naive": {"order": "ikj"}})), "naive(order=ikj)");
/// assert_eq!(tactic_label(&json!("library")), "library");
/// assert_eq!(tactic_label(&json!({"threaded": 4})), "threaded(4)");
/// assert_eq!(tactic_label(&json!(2)), "2");
/// let triton = json!({"kwargs": {"BLOCK_SIZE": 1024}, "num_warps": 4, "maxnreg": null});
/// assert_eq!(tactic_label(&triton), "BLOCK_SIZE=1024,num_warps=4");
/// ```
pub fn tactic_label(t: &Value) -> String {
    match t {
        Value::String(s) => s.clone(),
        Value::Object(m) if m.len() > 1 && m.get("kwargs").is_some_and(Value::is_object) => {
            let kwargs = m.get("kwargs").and_then(Value::as_object).into_iter().flatten();
            let rest = m.iter().filter(|(k, v)| *k != "kwargs" && !v.is_null());
            kwargs
                .chain(rest)
                .map(|(k, v)| format!("{k}={}", tactic_label(v)))
                .collect::<Vec<_>>()
                .join(",")
        }
        Value::Object(m) if m.len() == 1 => {
            let Some((k, v)) = m.iter().next() else { return String::new() };
            match v {
                Value::Object(inner) => {
                    let args: Vec<String> =
                        inner.iter().map(|(a, b)| format!("{a}={}", tactic_label(b))).collect();
                    format!("{k}({})", args.join(","))
                }
                other => format!("{k}({})", tactic_label(other)),
            }
        }
        other => other.to_string(),
    }
}

/// The number of elements of a bucket (the product of each input's dims,
/// summed over inputs): how `cache show` orders buckets, smallest first. A
/// dim that is not a size (`-1`, a float) counts as 1: it names no extent.
pub fn bucket_size(bucket: &[Vec<crate::Dim>]) -> u128 {
    bucket
        .iter()
        .map(|d| {
            d.iter().map(|x| x.as_u64().map_or(1, u128::from)).fold(1u128, u128::saturating_mul)
        })
        .fold(0u128, u128::saturating_add)
}

/// `text` with its control characters written out (`\n` as `\\n`, others
/// as `\\u{..}`), for every message and table that quotes what a file or a
/// server holds: an escape code planted in a field name reaches no
/// terminal. Text without control characters is returned as it is.
///
/// ```
/// use ranktune_cache::escape_control;
/// assert_eq!(escape_control("a\u{1b}[31mb\n"), "a\\u{1b}[31mb\\n");
/// assert_eq!(escape_control("gemm"), "gemm");
/// ```
pub fn escape_control(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.into()
}
