//! Short labels for people: a tactic (`blocked(tile_m=4,tile_n=64)`) and a
//! bucket's shape (`64x512`), used by the table, the failure lines and the
//! progress bar. Pure functions of their input; they never print.

/// `{"blocked":{"tile_m":4,"tile_n":64}}` → `blocked(tile_m=4,tile_n=64)`.
pub(super) fn tactic_label(t: &serde_json::Value) -> String {
    use serde_json::Value;
    match t {
        Value::String(s) => s.clone(),
        Value::Object(m) if m.len() == 1 => {
            let (k, v) =
                m.iter().next().map_or((String::new(), &Value::Null), |(k, v)| (k.clone(), v));
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

/// The first input's shape, e.g. `64x512`.
pub(super) fn shape_label(bucket: &[Vec<u64>]) -> String {
    bucket
        .first()
        .map(|s| s.iter().map(u64::to_string).collect::<Vec<_>>().join("x"))
        .unwrap_or_default()
}
