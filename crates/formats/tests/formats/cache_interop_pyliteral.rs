//! Property tests for the Python-literal parser and printer, the tactic
//! mapping to JSON, and a cross-check against Python's own `repr`.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use ranktune_formats::trtllm::{
    json_to_py, parse_literal as parse, py_to_json, repr_float, PyValue,
};
use std::io::Write;
use std::process::{Command, Stdio};

fn leaf() -> impl Strategy<Value = PyValue> {
    prop_oneof![
        Just(PyValue::None),
        any::<bool>().prop_map(PyValue::Bool),
        any::<i64>().prop_map(|i| PyValue::int(i.into())),
        any::<i128>().prop_map(PyValue::int),
        "[1-9][0-9]{30,60}".prop_map(PyValue::Int),
        any::<f64>()
            .prop_filter("nan is not equal to itself", |f| !f.is_nan())
            .prop_map(PyValue::Float),
        prop_oneof![
            Just(1e-6),
            Just(1e16),
            Just(0.1),
            Just(f64::INFINITY),
            Just(f64::MIN_POSITIVE)
        ]
        .prop_map(PyValue::Float),
        any::<String>().prop_map(PyValue::Str),
        "[ -~]{0,12}".prop_map(PyValue::Str),
        "['\"\\\\a-z\n\t]{0,8}".prop_map(PyValue::Str),
    ]
}

fn hashable() -> impl Strategy<Value = PyValue> {
    prop_oneof![
        any::<i64>().prop_map(|i| PyValue::int(i.into())),
        "[a-z'\"]{0,6}".prop_map(PyValue::Str),
        any::<bool>().prop_map(PyValue::Bool),
        Just(PyValue::None),
    ]
}

fn value() -> impl Strategy<Value = PyValue> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(PyValue::Tuple),
            prop::collection::vec(inner.clone(), 0..6).prop_map(PyValue::List),
            prop::collection::vec((hashable(), inner), 0..4).prop_map(PyValue::Dict),
        ]
    })
}

/// JSON objects sort and de-duplicate keys: apply the same to str-keyed
/// dicts so values can be compared after a trip through JSON.
fn normalize(v: PyValue) -> PyValue {
    match v {
        PyValue::Tuple(items) => PyValue::Tuple(items.into_iter().map(normalize).collect()),
        PyValue::List(items) => PyValue::List(items.into_iter().map(normalize).collect()),
        PyValue::Dict(pairs) => {
            let pairs: Vec<_> =
                pairs.into_iter().map(|(k, v)| (normalize(k), normalize(v))).collect();
            if pairs.iter().all(|(k, _)| matches!(k, PyValue::Str(_))) {
                let map: std::collections::BTreeMap<String, PyValue> = pairs
                    .into_iter()
                    .filter_map(|(k, v)| k.as_str().map(|k| (k.to_string(), v)))
                    .collect();
                PyValue::Dict(map.into_iter().map(|(k, v)| (PyValue::Str(k), v)).collect())
            } else {
                PyValue::Dict(pairs)
            }
        }
        other => other,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn repr_parses_back_equal(v in value()) {
        let text = v.to_string();
        let back = parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(&back, &v);
        prop_assert_eq!(back.to_string(), text);
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = parse(&text);
    }

    #[test]
    fn literal_looking_text_never_panics(text in "[()\\[\\]{},:'\"\\\\0-9eE.+\\-a-zA-Z _\n]{0,40}") {
        if let Ok(v) = parse(&text) {
            // Whatever parses prints as something that parses to the same value.
            let again = parse(&v.to_string()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(format!("{again:?}"), format!("{v:?}"));
        }
    }

    #[test]
    fn tactic_json_round_trip(v in value()) {
        let json = py_to_json(&v);
        // Through JSON text too, as the cache file stores it.
        let text = serde_json::to_string(&json).unwrap();
        let json2: serde_json::Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&json2, &json);
        // Tuples are JSON arrays; the tactic comes back exactly (str-keyed
        // dicts sorted, as JSON objects are).
        let back = json_to_py(&json2).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, normalize(v));
    }
}

#[test]
fn pathological_inputs_are_errors_not_panics() {
    let deep_list = "[".repeat(100_000);
    assert!(parse(&deep_list).is_err());
    let deep_ok = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    assert_eq!(parse(&deep_ok).unwrap(), PyValue::int(1));
    let huge_int = "9".repeat(100_000);
    assert_eq!(parse(&huge_int).unwrap().to_string(), huge_int);
    assert!(parse("1e999999").unwrap() == PyValue::Float(f64::INFINITY));
    for bad in ["'\\x4'", "'\\u12'", "'\\U0011ffff'", "'\\", "(", "{1:", "-", "1.2.3", "\u{0}"] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
}

/// True when some dict has two keys Python considers equal.
fn has_equal_keys(v: &PyValue) -> bool {
    match v {
        PyValue::Tuple(items) | PyValue::List(items) => items.iter().any(has_equal_keys),
        PyValue::Dict(pairs) => {
            let mut seen = std::collections::HashSet::new();
            pairs.iter().any(|(k, v)| {
                let id = match k {
                    PyValue::Bool(b) => u8::from(*b).to_string(),
                    other => other.to_string(),
                };
                !seen.insert(id) || has_equal_keys(v)
            })
        }
        _ => false,
    }
}

/// Python itself is the judge of `repr`: for many generated values, our text
/// must be exactly what `repr(ast.literal_eval(text))` gives back.
#[test]
fn repr_matches_python() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    // Python's idea of "printable" comes from its own Unicode tables (ours
    // is an approximation, see `repr_str`), so strings here use assigned
    // characters: ASCII, controls, Latin-1, Greek, Cyrillic, CJK, emoji.
    let text = "[ -~\\x00-\\x1f\\x7f-\\xff\\u0391-\\u03a1\\u0410-\\u044f\\u4e00-\\u9fa5\\U0001f600-\\U0001f64f]{0,10}";
    let leaf = prop_oneof![
        Just(PyValue::None),
        any::<bool>().prop_map(PyValue::Bool),
        any::<i128>().prop_map(PyValue::int),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(PyValue::Float),
        text.prop_map(PyValue::Str),
    ];
    let strategy = leaf
        .prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(PyValue::Tuple),
                prop::collection::vec(inner.clone(), 0..6).prop_map(PyValue::List),
                prop::collection::vec((hashable(), inner), 0..4).prop_map(PyValue::Dict),
            ]
        })
        .prop_filter("python collapses equal dict keys (True == 1)", |v| !has_equal_keys(v));
    let mut lines = Vec::new();
    while lines.len() < 400 {
        let v = strategy.new_tree(&mut runner).unwrap().current();
        lines.push(v.to_string());
    }
    for f in [1e-6, 1e-5, 1e16, 1.5e16, 123456789.123, 5e-324, 1.7976931348623157e308, 0.1, -2.5e-7]
    {
        lines.push(repr_float(f));
    }
    let script = r#"
import ast, json, sys
bad = 0
for line in sys.stdin:
    text = json.loads(line)
    got = repr(ast.literal_eval(text))
    if got != text:
        bad += 1
        print("MISMATCH", repr(text), "python:", repr(got))
sys.exit(1 if bad else 0)
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is needed by this test (.ci/run installs it)");
    {
        let mut stdin = child.stdin.take().unwrap();
        for l in &lines {
            writeln!(stdin, "{}", serde_json::to_string(l).unwrap()).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}
