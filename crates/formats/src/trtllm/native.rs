//! TensorRT-LLM's own cache file, read and edited in place as its code
//! writes it (`json.dump(indent=2, default=str)`): what `ranktune.trtllm`'s
//! drop-in saves and loads, so the file stays readable by unpatched ranks.
//!
//! A save splices: the top-level members are found by a scan (no parse of
//! their values), every member the save does not change is copied byte for
//! byte, and only the sections it updates are rewritten — their entries a
//! `dict.update` of the old ones (an existing key keeps its place, a new one
//! goes last), the untouched entries again copied as they were. `metadata`
//! is the first writer's; unknown top-level members are kept. ranktune's
//! extras (the environment identity of each section's last save) live in
//! the top-level member [`EXTRAS`], which TensorRT-LLM's saver keeps and its
//! loader never reads.
//!
//! This module does no I/O and takes no lock: the caller reads the file,
//! holds the locks and writes the result (see `ranktune.trtllm`).

use super::pyliteral::repr_float;
use serde_json::Value;
use std::ops::Range;

/// The top-level member that holds ranktune's extras.
pub const EXTRAS: &str = "ranktune";

/// Why a file is not a TensorRT-LLM cache document.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a TensorRT-LLM cache at byte {offset}: {what}")]
pub struct NativeError {
    /// Where the scan stopped.
    pub offset: usize,
    /// What it expected.
    pub what: String,
}

/// One entry as TensorRT-LLM stores it: `{"runner_id", "tactic", "min_time"}`
/// under the `str()` of its key tuple.
#[derive(Clone, Debug, PartialEq)]
pub struct NativeEntry {
    /// The key: Python's `str()` of `(op, runner, unique_id, opt_shapes)`.
    pub key: String,
    /// The runner's position in the op's runner list.
    pub runner_id: i64,
    /// The tactic's `repr`.
    pub tactic: String,
    /// The time in milliseconds (any float: `inf` is written `Infinity`).
    pub min_time: f64,
}

/// What a load needs from a file: `metadata`, `shared` and one rank's
/// section; entries that are not `{runner_id: int, tactic: str, min_time:
/// number}` are left out with a warning naming them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NativeLoaded {
    /// The `metadata` member, when there is one (non-finite floats read as
    /// `null`).
    pub metadata: Option<Value>,
    /// The `shared` section's entries, in file order.
    pub shared: Vec<NativeEntry>,
    /// The rank's section's entries, in file order.
    pub rank: Vec<NativeEntry>,
    /// One line per entry left out.
    pub warnings: Vec<String>,
}

// ------------------------------------------------------------------ scanning

/// A member found by a scan: its name token, its value, and the value's
/// own member count (0 for a scalar).
type Member = (Range<usize>, Range<usize>, usize);

struct Scan<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    fn err<T>(&self, what: &str) -> Result<T, NativeError> {
        Err(NativeError { offset: self.at, what: what.into() })
    }

    fn ws(&mut self) {
        let b = self.text.as_bytes();
        while self.at < b.len() && matches!(b[self.at], b' ' | b'\n' | b'\r' | b'\t') {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<(), NativeError> {
        self.ws();
        if self.peek() == Some(c) {
            self.at += 1;
            Ok(())
        } else {
            self.err(what)
        }
    }

    /// A string token's range (quotes included).
    fn string(&mut self) -> Result<Range<usize>, NativeError> {
        let start = self.at;
        if self.peek() != Some(b'"') {
            return self.err("a string");
        }
        let b = self.text.as_bytes();
        let mut i = self.at + 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => {
                    self.at = i + 1;
                    return Ok(start..self.at);
                }
                _ => i += 1,
            }
        }
        self.at = b.len();
        self.err("the end of a string")
    }

    /// Any value's range: a string, an object or array (brackets matched
    /// outside strings), or a bare token (number, `true`, `Infinity`, ...);
    /// and for an object or array its number of members (counted in the
    /// same pass).
    fn counted(&mut self) -> Result<(Range<usize>, usize), NativeError> {
        self.ws();
        let start = self.at;
        match self.peek() {
            Some(b'"') => self.string().map(|r| (r, 0)),
            Some(b'{' | b'[') => {
                let b = self.text.as_bytes();
                let mut depth = 0usize;
                let (mut commas, mut empty) = (0usize, true);
                let mut strings = ranktune_cache::json_text::Strings::default();
                while self.at < b.len() {
                    let c = b[self.at];
                    self.at += 1;
                    if !strings.outside(char::from(c)) {
                        if depth == 1 {
                            empty = false;
                        }
                        continue;
                    }
                    match c {
                        b'{' | b'[' => {
                            if depth == 1 {
                                empty = false;
                            }
                            depth += 1
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                let n = if empty { 0 } else { commas + 1 };
                                return Ok((start..self.at, n));
                            }
                        }
                        b',' if depth == 1 => commas += 1,
                        b' ' | b'\n' | b'\r' | b'\t' => {}
                        _ if depth == 1 => empty = false,
                        _ => {}
                    }
                }
                self.err("the end of an object or array")
            }
            Some(_) => {
                let b = self.text.as_bytes();
                while self.at < b.len()
                    && !matches!(b[self.at], b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
                {
                    self.at += 1;
                }
                if self.at == start {
                    return self.err("a value");
                }
                Ok((start..self.at, 0))
            }
            None => self.err("a value"),
        }
    }

    /// The members of the object at the cursor: (name token, value range,
    /// the value's own member count).
    fn members(&mut self) -> Result<Vec<Member>, NativeError> {
        self.expect(b'{', "an object")?;
        let mut out = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(out);
        }
        loop {
            self.ws();
            let name = self.string()?;
            self.expect(b':', "':' after a member name")?;
            let (value, n) = self.counted()?;
            out.push((name, value, n));
            self.ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(out);
                }
                _ => return self.err("',' or '}' after a member"),
            }
        }
    }
}

/// A JSON string token's text.
fn unquote(token: &str) -> Result<String, String> {
    if !token.contains('\\') {
        return Ok(token[1..token.len() - 1].to_string());
    }
    serde_json::from_str(token).map_err(|e| e.to_string())
}

/// The top-level members of a document: (name, raw value text, the
/// value's member count).
fn top(text: &str) -> Result<Vec<(String, &str, usize)>, NativeError> {
    let mut s = Scan { text, at: 0 };
    let members = s.members()?;
    s.ws();
    if s.at != text.len() {
        return s.err("the end of the document");
    }
    members
        .into_iter()
        .map(|(n, v, count)| {
            let name =
                unquote(&text[n.clone()]).map_err(|what| NativeError { offset: n.start, what })?;
            Ok((name, &text[v], count))
        })
        .collect()
}

/// How many entries a document's `shared` and `rank_<N>` sections hold,
/// once it scans as a TensorRT-LLM cache (empty text: none): the check a
/// load makes of the whole file before it reads one rank's sections, at
/// the cost of a scan (no entry is parsed).
pub fn native_entries(text: &str) -> Result<usize, NativeError> {
    if text.trim().is_empty() {
        return Ok(0);
    }
    Ok(top(text)?
        .iter()
        .filter(|(name, _, _)| name == "shared" || name.starts_with("rank_"))
        .map(|(_, _, count)| count)
        .sum())
}

/// The members of one section's object: (key, raw entry text).
fn section_members(raw: &str) -> Result<Vec<(String, &str)>, NativeError> {
    let mut s = Scan { text: raw, at: 0 };
    let members = s.members()?;
    members
        .into_iter()
        .map(|(n, v, _)| {
            let name =
                unquote(&raw[n.clone()]).map_err(|what| NativeError { offset: n.start, what })?;
            Ok((name, &raw[v]))
        })
        .collect()
}

// ------------------------------------------------------------------- reading

fn entry_of(key: &str, raw: &str) -> Result<NativeEntry, String> {
    let fields = section_members(raw).map_err(|e| e.what)?;
    let field = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    let runner_id = field("runner_id")
        .and_then(|v| v.parse::<i64>().ok())
        .ok_or("runner_id is not an integer")?;
    let tactic = field("tactic")
        .filter(|v| v.starts_with('"'))
        .and_then(|v| unquote(v).ok())
        .ok_or("tactic is not a string")?;
    let min_time = field("min_time").and_then(parse_float).ok_or("min_time is not a number")?;
    Ok(NativeEntry { key: key.to_string(), runner_id, tactic, min_time })
}

/// A number token as Python's `json` reads it (`Infinity`, `-Infinity` and
/// `NaN` included), bit-exact.
fn parse_float(token: &str) -> Option<f64> {
    match token {
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        t if t
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')) =>
        {
            serde_json::from_str::<serde_json::Number>(t).ok()?.as_f64()
        }
        _ => None,
    }
}

/// Reads `metadata`, `shared` and `rank_<rank>` from a document.
///
/// ```
/// use ranktune_formats::trtllm::read_native;
/// let text = r#"{"metadata": {"creation_timestamp": 1.5},
///   "rank_0": {"('op', 'R', '()', ((8, -1),))": {"runner_id": 0, "tactic": "3", "min_time": Infinity}}}"#;
/// let got = read_native(text, 0).unwrap();
/// assert_eq!(got.rank[0].min_time, f64::INFINITY);
/// assert_eq!(got.rank[0].key, "('op', 'R', '()', ((8, -1),))");
/// ```
pub fn read_native(text: &str, rank: u32) -> Result<NativeLoaded, NativeError> {
    let mine = format!("rank_{rank}");
    let mut out = NativeLoaded::default();
    if text.trim().is_empty() {
        return Ok(out);
    }
    for (name, raw, _) in top(text)? {
        if name == "metadata" {
            out.metadata = crate::json::parse_document(raw.as_bytes()).ok();
            continue;
        }
        let into = if name == "shared" {
            &mut out.shared
        } else if name == mine {
            &mut out.rank
        } else {
            continue;
        };
        if !raw.starts_with('{') {
            out.warnings.push(format!("section {name} is not an object; left out"));
            continue;
        }
        for (key, value) in section_members(raw)? {
            match entry_of(&key, value) {
                Ok(e) => into.push(e),
                Err(why) => out.warnings.push(format!("{name} entry {key}: {why}; left out")),
            }
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------- writing

/// A JSON string as Python's `json.dumps` writes it (`ensure_ascii`): the
/// one writer every format of Python's files shares.
pub fn py_json_str(s: &str) -> String {
    crate::ordered::python_str(s)
}

/// A float as Python's `json.dumps` writes it: `repr`, or `Infinity`,
/// `-Infinity`, `NaN`.
pub fn py_json_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        repr_float(f)
    }
}

/// A value as `json.dump(indent=2)` writes it at nesting `depth`.
pub fn py_json_value(v: &Value, depth: usize) -> String {
    let pad = |d: usize| "  ".repeat(d);
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => if *b { "true" } else { "false" }.into(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (None, None, Some(f)) => py_json_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => py_json_str(s),
        Value::Array(items) if items.is_empty() => "[]".into(),
        Value::Array(items) => {
            let inner: Vec<String> = items
                .iter()
                .map(|i| format!("{}{}", pad(depth + 1), py_json_value(i, depth + 1)))
                .collect();
            format!("[\n{}\n{}]", inner.join(",\n"), pad(depth))
        }
        Value::Object(map) if map.is_empty() => "{}".into(),
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, i)| {
                    format!("{}{}: {}", pad(depth + 1), py_json_str(k), py_json_value(i, depth + 1))
                })
                .collect();
            format!("{{\n{}\n{}}}", inner.join(",\n"), pad(depth))
        }
    }
}

/// An object of `members` in their order, as `json.dump(indent=2)` writes
/// it at nesting `depth`.
fn ordered_object(members: &[(String, Value)], depth: usize) -> String {
    if members.is_empty() {
        return "{}".into();
    }
    let pad = "  ".repeat(depth + 1);
    let inner: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{pad}{}: {}", py_json_str(k), py_json_value(v, depth + 1)))
        .collect();
    format!("{{\n{}\n{}}}", inner.join(",\n"), "  ".repeat(depth))
}

fn entry_text(e: &NativeEntry) -> String {
    format!(
        "{{\n      \"runner_id\": {},\n      \"tactic\": {},\n      \"min_time\": {}\n    }}",
        e.runner_id,
        py_json_str(&e.tactic),
        py_json_float(e.min_time)
    )
}

/// What one save changes: entries per section (`shared`, `rank_<N>`).
#[derive(Clone, Debug, Default)]
pub struct NativeUpdate {
    /// (section name, its entries), each merged into the section as
    /// `dict.update` does.
    pub sections: Vec<(String, Vec<NativeEntry>)>,
    /// The `metadata` a file that has none gets (the first writer's), its
    /// members in order.
    pub metadata: Vec<(String, Value)>,
    /// ranktune's note for each updated section (kept under [`EXTRAS`]).
    pub extras: Value,
}

/// What a save did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spliced {
    /// The new document.
    pub text: String,
    /// Entries the update wrote (new or replaced).
    pub written: usize,
    /// Entries in the whole document after it.
    pub total: usize,
}

/// Merges `update` into the document `old` (empty text: a new file) as
/// TensorRT-LLM's saver does, copying everything it does not change.
pub fn splice_native(old: &str, update: &NativeUpdate) -> Result<Spliced, NativeError> {
    let members = if old.trim().is_empty() { Vec::new() } else { top(old)? };
    let mut out: Vec<(String, String)> = Vec::with_capacity(members.len() + 3);
    let mut total = 0usize;
    let mut written = 0usize;
    if !members.iter().any(|(n, _, _)| n == "metadata") {
        out.push(("metadata".into(), ordered_object(&update.metadata, 1)));
    }
    let mut pending: Vec<&(String, Vec<NativeEntry>)> = update.sections.iter().collect();
    let mut extras_seen = false;
    for (name, raw, count) in &members {
        if let Some(pos) = pending.iter().position(|(n, _)| n == name) {
            let (_, entries) = pending.remove(pos);
            let (text, n) = merge_section(raw, entries)?;
            written += entries.len();
            total += n;
            out.push((name.clone(), text));
        } else if name == EXTRAS {
            extras_seen = true;
            out.push((name.clone(), merge_extras(raw, &update.extras)));
        } else {
            if name == "shared" || name.starts_with("rank_") {
                total += count;
            }
            out.push((name.clone(), (*raw).to_string()));
        }
    }
    for (name, entries) in pending {
        let (text, n) = merge_section("{}", entries)?;
        written += entries.len();
        total += n;
        out.push((name.clone(), text));
    }
    if !extras_seen && !update.extras.is_null() {
        out.push((EXTRAS.into(), py_json_value(&update.extras, 1)));
    }
    let mut text = String::with_capacity(old.len() + 256 * written);
    text.push('{');
    for (i, (name, value)) in out.iter().enumerate() {
        text.push_str(if i == 0 { "\n  " } else { ",\n  " });
        text.push_str(&py_json_str(name));
        text.push_str(": ");
        text.push_str(value);
    }
    text.push_str(if out.is_empty() { "}" } else { "\n}" });
    Ok(Spliced { text, written, total })
}

/// A section with `entries` merged in; and its entry count.
fn merge_section(raw: &str, entries: &[NativeEntry]) -> Result<(String, usize), NativeError> {
    let old = section_members(raw)?;
    let mut index: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(old.len() + entries.len());
    let mut items: Vec<(&str, String)> = Vec::with_capacity(old.len() + entries.len());
    // The old members are kept as their text; a key may repeat in a file
    // (Python keeps the last): keep the last's text at the first's place.
    let mut texts: Vec<(String, &str)> = Vec::with_capacity(old.len());
    for (k, v) in old {
        texts.push((k, v));
    }
    for (k, v) in &texts {
        match index.get(k.as_str()) {
            Some(&i) => items[i].1 = (*v).to_string(),
            None => {
                index.insert(k.as_str(), items.len());
                items.push((k.as_str(), (*v).to_string()));
            }
        }
    }
    for e in entries {
        let t = entry_text(e);
        match index.get(e.key.as_str()) {
            Some(&i) => items[i].1 = t,
            None => {
                index.insert(e.key.as_str(), items.len());
                items.push((e.key.as_str(), t));
            }
        }
    }
    if items.is_empty() {
        return Ok(("{}".into(), 0));
    }
    let mut text = String::with_capacity(raw.len() + entries.len() * 160);
    text.push('{');
    for (i, (k, v)) in items.iter().enumerate() {
        text.push_str(if i == 0 { "\n    " } else { ",\n    " });
        text.push_str(&py_json_str(k));
        text.push_str(": ");
        text.push_str(v);
    }
    text.push_str("\n  }");
    Ok((text, items.len()))
}

/// The extras member with `update`'s notes merged over the old ones
/// (an old member that is not an object is replaced).
fn merge_extras(raw: &str, update: &Value) -> String {
    let mut old = match crate::json::parse_document(raw.as_bytes()) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    if let Value::Object(new) = update {
        for (k, v) in new {
            match (old.get_mut(k), v) {
                (Some(Value::Object(o)), Value::Object(n)) => {
                    for (a, b) in n {
                        o.insert(a.clone(), b.clone());
                    }
                }
                _ => {
                    old.insert(k.clone(), v.clone());
                }
            }
        }
    }
    py_json_value(&Value::Object(old), 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn e(key: &str, t: f64) -> NativeEntry {
        NativeEntry { key: key.into(), runner_id: 1, tactic: "(64, 'a')".into(), min_time: t }
    }

    #[test]
    fn splice_writes_what_python_json_dump_writes() {
        let update = NativeUpdate {
            sections: vec![("rank_0".into(), vec![e("('op', 'R', '()', ((8, -1),))", 0.1)])],
            metadata: vec![
                ("lib_version".into(), json!("1.0")),
                ("creation_timestamp".into(), json!(1.5)),
                ("device_capability".into(), json!([9, 0])),
            ],
            extras: Value::Null,
        };
        let s = splice_native("", &update).unwrap();
        // json.dumps({...}, indent=2) of the same object.
        let want = "{\n  \"metadata\": {\n    \"lib_version\": \"1.0\",\n    \"creation_timestamp\": 1.5,\n    \"device_capability\": [\n      9,\n      0\n    ]\n  },\n  \"rank_0\": {\n    \"('op', 'R', '()', ((8, -1),))\": {\n      \"runner_id\": 1,\n      \"tactic\": \"(64, 'a')\",\n      \"min_time\": 0.1\n    }\n  }\n}";
        assert_eq!(s.text, want);
        assert_eq!((s.written, s.total), (1, 1));
    }

    #[test]
    fn splice_updates_in_place_and_copies_the_rest() {
        let old = "{\n  \"metadata\": {\"creation_timestamp\": 1},\n  \"rank_2\": { },\n  \"rank_3\": {\"a\": [1, 2], \"b,\": {}},\n  \"zz\": [1, {\"a\": \"}\"}],\n  \"rank_1\": {\"k\": {\"runner_id\": 0, \"tactic\": \"1\", \"min_time\": Infinity}},\n  \"rank_0\": {\"a\": {\"runner_id\": 0, \"tactic\": \"1\", \"min_time\": 2.0}, \"b\": {\"runner_id\": 0, \"tactic\": \"1\", \"min_time\": 3.0}}\n}\n";
        let update = NativeUpdate {
            sections: vec![("rank_0".into(), vec![e("a", 5.0), e("c", f64::INFINITY)])],
            metadata: vec![("lib_version".into(), json!("other"))],
            extras: json!({"sections": {"rank_0": {"env": "d"}}}),
        };
        let s = splice_native(old, &update).unwrap();
        assert!(s.text.contains("\"zz\": [1, {\"a\": \"}\"}]"), "{}", s.text);
        assert!(s.text.contains("\"metadata\": {\"creation_timestamp\": 1}"));
        assert!(!s.text.contains("other"));
        let got = read_native(&s.text, 0).unwrap();
        let keys: Vec<_> = got.rank.iter().map(|e| (e.key.as_str(), e.min_time)).collect();
        assert_eq!(keys, [("a", 5.0), ("b", 3.0), ("c", f64::INFINITY)]);
        assert_eq!(read_native(&s.text, 1).unwrap().rank[0].min_time, f64::INFINITY);
        assert_eq!((s.written, s.total), (2, 6));
        let again = splice_native(
            &s.text,
            &NativeUpdate { extras: json!({"sections": {"rank_1": {"env": "e"}}}), ..update },
        )
        .unwrap();
        assert!(again.text.contains("\"rank_0\"") && again.text.contains("\"rank_1\": {\n"));
    }

    #[test]
    fn floats_and_strings_as_python_writes_them() {
        assert_eq!(py_json_float(1e-06), "1e-06");
        assert_eq!(py_json_float(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(py_json_str("é\"\n\u{1F600}"), "\"\\u00e9\\\"\\n\\ud83d\\ude00\"");
        for bits in [0x3fb999999999999au64, 0x3ff0000000000001, 0x0000000000000001] {
            let f = f64::from_bits(bits);
            assert_eq!(parse_float(&py_json_float(f)).map(f64::to_bits), Some(bits));
        }
    }

    #[test]
    fn malformed_documents_are_errors_and_bad_entries_are_named() {
        for bad in ["[1]", "{\"a\": 1", "{\"a\" 1}", "{\"a\": 1} x", "{\"a\": \"x}"] {
            assert!(read_native(bad, 0).is_err(), "{bad}");
        }
        let got = read_native(
            r#"{"rank_0": {"k": {"runner_id": "x", "tactic": "1", "min_time": 1}, "j": {"runner_id": 0, "tactic": "1", "min_time": 1}}}"#,
            0,
        )
        .unwrap();
        assert_eq!(got.rank.len(), 1);
        assert_eq!(got.warnings.len(), 1);
        assert!(got.warnings[0].contains("rank_0 entry k"), "{:?}", got.warnings);
    }
}
