//! A raw scanner over a cache document's text: where each top-level
//! field's value begins and ends, found in one streaming pass that builds
//! nothing — what lets a rank read only its sections and a fold copy the
//! sections it does not change.
//!
//! The scanner checks the document's structure as it goes: UTF-8 text, one
//! top-level object of `"name": value` pairs, brackets and braces that
//! match, strings closed and free of raw control characters, and only JSON
//! token bytes outside strings. It does not check the grammar of numbers
//! and literals inside values (`[1 2]` passes); a value it hands on is
//! parsed by serde, and a value it skips is copied as it was. It reads
//! through a small buffer, so its memory does not grow with the file, and
//! it never touches the filesystem itself: it reads what it is given.

use std::io::Read;

/// One top-level field: its name and where its value lies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    /// The field's name, unescaped.
    pub name: String,
    /// Byte offset of the value's first byte.
    pub start: u64,
    /// Byte offset just past the value's last byte.
    pub end: u64,
    /// The value's first byte (`[`, `{`, `"`, a digit, …).
    pub first: u8,
    /// For an array, its number of elements; 0 otherwise.
    pub elements: u64,
}

/// The top level of a document, fields in file order (duplicates kept).
#[derive(Clone, Debug, Default)]
pub(crate) struct Index {
    pub fields: Vec<Field>,
}

/// Why a document could not be scanned.
#[derive(Debug)]
pub(crate) enum ScanError {
    /// Reading failed.
    Io(std::io::Error),
    /// The text is not a JSON object (the reason, naming the offset).
    Bad(String),
}

/// Deeper nesting than this is refused, as serde_json refuses it.
const MAX_DEPTH: usize = 128;
const CHUNK: usize = 256 * 1024;

#[derive(Clone, Copy, PartialEq, Debug)]
enum State {
    /// Before the opening `{`.
    Start,
    /// After `{` or `,`: a key (or, right after `{`, the closing `}`).
    Key { first: bool },
    /// Inside a key's string.
    InKey,
    /// After a key: the `:`.
    Colon,
    /// After `:`: the value's first byte.
    ValueStart,
    /// Inside a value.
    InValue,
    /// After a value: `,` or `}`.
    AfterValue,
    /// After the closing `}`: only blanks.
    End,
    /// After the `[` of a value the caller skips: checking that the array
    /// is laid out one element per line (`[` then `\n    `); the count of
    /// those bytes seen.
    SkipGate(u8),
    /// Inside such an array: looking for its closing `\n  ]`.
    Skipping,
}

/// Where a one-element-per-line array ends, as the codec (and `jq`)
/// writes it: its `]` on a line of its own, indented by two.
const SKIP_END: &[u8] = b"\n  ]";
/// How such an array begins after its `[`.
const SKIP_GATE: &[u8] = b"\n    ";

struct Scanner<'a> {
    /// Whether the value of the field of this name may be skipped unread.
    skip: &'a dyn Fn(&str) -> bool,
    /// The last bytes seen while skipping (up to 3), for an end cut in two
    /// by the buffer.
    tail: Vec<u8>,
    state: State,
    /// Closers of the open arrays and objects of the current value.
    stack: Vec<u8>,
    in_string: bool,
    escaped: bool,
    /// The current value is a bare literal or number (`true`, `1.0`).
    scalar: bool,
    key: Vec<u8>,
    key_escaped: bool,
    name: String,
    start: u64,
    first: u8,
    commas: u64,
    nonempty: bool,
    fields: Vec<Field>,
}

fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

/// Bytes that may appear in numbers and `true`/`false`/`null`.
fn is_literal(b: u8) -> bool {
    matches!(
        b,
        b'0'..=b'9'
            | b'-'
            | b'+'
            | b'.'
            | b'e'
            | b'E'
            | b't'
            | b'r'
            | b'u'
            | b'f'
            | b'a'
            | b'l'
            | b's'
            | b'n'
    )
}

fn bad(what: &str, b: u8, at: u64) -> ScanError {
    let shown =
        if b.is_ascii_graphic() { format!("'{}'", b as char) } else { format!("byte 0x{b:02x}") };
    ScanError::Bad(format!("not valid JSON: {what}, found {shown} at byte {at}"))
}

impl<'a> Scanner<'a> {
    fn new(skip: &'a dyn Fn(&str) -> bool) -> Scanner<'a> {
        Scanner {
            skip,
            tail: Vec::new(),
            state: State::Start,
            stack: Vec::new(),
            in_string: false,
            escaped: false,
            scalar: false,
            key: Vec::new(),
            key_escaped: false,
            name: String::new(),
            start: 0,
            first: 0,
            commas: 0,
            nonempty: false,
            fields: Vec::new(),
        }
    }

    fn finish_value(&mut self, end: u64) {
        let elements = if self.first == b'[' { self.commas + u64::from(self.nonempty) } else { 0 };
        self.fields.push(Field {
            name: std::mem::take(&mut self.name),
            start: self.start,
            end,
            first: self.first,
            elements,
        });
        self.state = State::AfterValue;
    }

    /// Skips string content from `i`; returns the index after what was
    /// consumed.
    fn string(&mut self, buf: &[u8], mut i: usize, base: u64) -> Result<usize, ScanError> {
        if self.escaped {
            if i >= buf.len() {
                return Ok(i);
            }
            if !matches!(buf[i], b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' | b'u') {
                return Err(bad("an unknown escape in a string", buf[i], base + i as u64));
            }
            self.escaped = false;
            i += 1;
        }
        let rest = &buf[i..];
        let Some(j) = memchr::memchr2(b'"', b'\\', rest) else {
            check_controls(rest, base + i as u64)?;
            return Ok(buf.len());
        };
        check_controls(&rest[..j], base + i as u64)?;
        if rest[j] == b'\\' {
            self.escaped = true;
        } else {
            self.in_string = false;
        }
        Ok(i + j + 1)
    }

    /// Scans `buf`, whose first byte is at offset `base`, one step at a
    /// time: each step reads what the state it starts in expects.
    fn feed(&mut self, buf: &[u8], base: u64) -> Result<(), ScanError> {
        let mut i = 0;
        while i < buf.len() {
            i = self.step(buf, i, base)?;
        }
        Ok(())
    }

    /// One step from `buf[i]` (`i < buf.len()`); returns the index after
    /// what it consumed (`i` itself when it only changed the state).
    #[inline]
    fn step(&mut self, buf: &[u8], i: usize, base: u64) -> Result<usize, ScanError> {
        if self.state == State::InKey {
            return self.key_string(buf, i, base);
        }
        if self.in_string {
            return self.value_string(buf, i, base);
        }
        let b = buf[i];
        let at = base + i as u64;
        match self.state {
            State::Skipping => Ok(self.skipping(buf, i, base)),
            State::SkipGate(k) => Ok(self.skip_gate(k, b, i)),
            State::InValue if self.scalar => Ok(self.scalar_byte(b, i, at)),
            State::InValue => self.value_byte(buf, i, at),
            _ if is_blank(b) => Ok(i + 1),
            _ => self.between_values(b, at).map(|()| i + 1),
        }
    }

    /// A string inside a value, from `i`; the value ends with it when it
    /// is the whole value. Returns the index after what was consumed.
    fn value_string(&mut self, buf: &[u8], i: usize, base: u64) -> Result<usize, ScanError> {
        let i = self.string(buf, i, base)?;
        if !self.in_string && self.stack.is_empty() && self.state == State::InValue {
            self.finish_value(base + i as u64);
        }
        Ok(i)
    }

    /// The `k`th byte after the `[` of an array the caller skips: still the
    /// one-element-per-line layout, or another one, then scanned byte by
    /// byte (the bytes taken so far were blanks, and `b` is scanned again).
    fn skip_gate(&mut self, k: u8, b: u8, i: usize) -> usize {
        if b != SKIP_GATE[usize::from(k)] {
            self.stack.push(b']');
            self.state = State::InValue;
            return i;
        }
        self.state = if usize::from(k) + 1 == SKIP_GATE.len() {
            self.tail.clear();
            State::Skipping
        } else {
            State::SkipGate(k + 1)
        };
        i + 1
    }

    /// A byte of a bare literal or number; any other byte ends it and is
    /// scanned again, as what follows the value.
    fn scalar_byte(&mut self, b: u8, i: usize, at: u64) -> usize {
        if is_literal(b) {
            return i + 1;
        }
        self.scalar = false;
        self.finish_value(at);
        i
    }

    /// A byte inside an array or object value (outside its strings): the
    /// one-entry-per-line fast path at a newline, else brackets, commas and
    /// JSON token bytes one at a time. Returns the index after what was
    /// consumed.
    #[inline]
    fn value_byte(&mut self, buf: &[u8], i: usize, at: u64) -> Result<usize, ScanError> {
        let b = buf[i];
        if b == b'\n' && self.stack.len() == 1 && self.first == b'[' {
            if let Some((n, comma)) = canonical_line(&buf[i..]) {
                self.nonempty = true;
                self.commas += u64::from(comma);
                return Ok(i + n);
            }
        }
        if self.stack.len() == 1 && !is_blank(b) && b != b']' {
            self.nonempty = true;
        }
        match b {
            b'"' => self.in_string = true,
            b'[' | b'{' => {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(ScanError::Bad(format!(
                        "not valid JSON: nested more than {MAX_DEPTH} deep at byte {at}"
                    )));
                }
                self.stack.push(if b == b'[' { b']' } else { b'}' });
            }
            b']' | b'}' => {
                if self.stack.pop() != Some(b) {
                    return Err(bad("a closing bracket that does not match", b, at));
                }
                if self.stack.is_empty() {
                    self.finish_value(at + 1);
                }
            }
            b',' if self.stack.len() == 1 => self.commas += 1,
            b',' | b':' => {}
            _ if is_blank(b) || is_literal(b) => {}
            _ => return Err(bad("a byte that is not JSON", b, at)),
        }
        Ok(i + 1)
    }

    /// A byte (not a blank) outside every value: the document's braces, a
    /// field name's opening quote, the `:`, the `,`, or a value's first
    /// byte.
    fn between_values(&mut self, b: u8, at: u64) -> Result<(), ScanError> {
        match self.state {
            State::Start => {
                if b != b'{' {
                    return Err(bad("expected a JSON object", b, at));
                }
                self.state = State::Key { first: true };
            }
            State::Key { first } => match b {
                b'"' => {
                    self.key.clear();
                    self.key.push(b'"');
                    self.key_escaped = false;
                    self.state = State::InKey;
                }
                b'}' if first => self.state = State::End,
                _ => return Err(bad("expected a field name", b, at)),
            },
            State::Colon => {
                if b != b':' {
                    return Err(bad("expected ':'", b, at));
                }
                self.state = State::ValueStart;
            }
            State::ValueStart => self.value_start(b, at)?,
            State::AfterValue => match b {
                b',' => self.state = State::Key { first: false },
                b'}' => self.state = State::End,
                _ => return Err(bad("expected ',' or '}'", b, at)),
            },
            State::End => return Err(bad("text after the document's end", b, at)),
            State::InKey | State::InValue | State::SkipGate(_) | State::Skipping => {
                unreachable!("taken by `step`")
            }
        }
        Ok(())
    }

    /// A value's first byte: where it starts, and what kind it is.
    fn value_start(&mut self, b: u8, at: u64) -> Result<(), ScanError> {
        self.start = at;
        self.first = b;
        self.commas = 0;
        self.nonempty = false;
        self.state = State::InValue;
        match b {
            b'"' => self.in_string = true,
            b'[' if (self.skip)(&self.name) => self.state = State::SkipGate(0),
            b'[' | b'{' => self.stack.push(if b == b'[' { b']' } else { b'}' }),
            _ if is_literal(b) => self.scalar = true,
            _ => return Err(bad("expected a value", b, at)),
        }
        Ok(())
    }

    /// Looks for the end of a skipped array from `i`; returns the index
    /// after what was consumed.
    fn skipping(&mut self, buf: &[u8], i: usize, base: u64) -> usize {
        let rest = &buf[i..];
        // An end cut in two: its first `k` bytes ended the last buffer.
        for k in (1..SKIP_END.len()).rev() {
            if self.tail.ends_with(&SKIP_END[..k]) && rest.starts_with(&SKIP_END[k..]) {
                let end = i + SKIP_END.len() - k;
                self.finish_value(base + end as u64);
                return end;
            }
        }
        if let Some(j) = memchr::memmem::find(rest, SKIP_END) {
            let end = i + j + SKIP_END.len();
            self.finish_value(base + end as u64);
            return end;
        }
        self.tail.extend_from_slice(&rest[rest.len().saturating_sub(SKIP_END.len() - 1)..]);
        let cut = self.tail.len().saturating_sub(SKIP_END.len() - 1);
        self.tail.drain(..cut);
        buf.len()
    }

    /// Collects a key's string from `i`; returns the index after what was
    /// consumed.
    fn key_string(&mut self, buf: &[u8], mut i: usize, base: u64) -> Result<usize, ScanError> {
        while i < buf.len() {
            let b = buf[i];
            let at = base + i as u64;
            self.key.push(b);
            i += 1;
            if self.escaped {
                self.escaped = false;
                continue;
            }
            match b {
                b'\\' => {
                    self.escaped = true;
                    self.key_escaped = true;
                }
                b'"' => {
                    let raw = std::mem::take(&mut self.key);
                    self.name = if self.key_escaped {
                        serde_json::from_slice(&raw).map_err(|e| {
                            ScanError::Bad(format!(
                                "not valid JSON: a bad field name before byte {at}: {e}"
                            ))
                        })?
                    } else {
                        // Validated as UTF-8 by the caller.
                        String::from_utf8_lossy(&raw[1..raw.len() - 1]).into_owned()
                    };
                    self.state = State::Colon;
                    return Ok(i);
                }
                _ if b < 0x20 => return Err(bad("a control character in a string", b, at)),
                _ => {}
            }
        }
        Ok(i)
    }

    fn end(self, len: u64) -> Result<Option<Index>, ScanError> {
        match self.state {
            State::Start => Ok(None),
            State::End => Ok(Some(Index { fields: self.fields })),
            State::InValue if self.scalar => Err(ScanError::Bad(format!(
                "truncated JSON: the document ends at byte {len} inside a value"
            ))),
            _ => Err(ScanError::Bad(format!(
                "truncated JSON: the document ends at byte {len} before its closing '}}'"
            ))),
        }
    }
}

/// The fast path over an array laid out as the codec writes it, one
/// entry per line: `rest` starts at a newline, followed by `    {…}` or
/// `    {…},` and another newline within `rest`. When the line's braces and
/// brackets balance, it is one element (or more), skipped whole: returns
/// the bytes to skip (up to the next newline) and whether it ends with a
/// comma. Anything else — another layout, strings holding brackets, a
/// line cut by the buffer's end — answers `None`, and the byte-by-byte
/// scan takes the line.
fn canonical_line(rest: &[u8]) -> Option<(usize, bool)> {
    let line_start = rest.get(1..6)?;
    if line_start != b"    {" {
        return None;
    }
    let nl = 1 + memchr::memchr(b'\n', &rest[1..])?;
    let line = &rest[5..nl];
    let (body, comma) = match line.strip_suffix(b",") {
        Some(body) => (body, true),
        None => (line, false),
    };
    if !body.ends_with(b"}") {
        return None;
    }
    // One pass: braces and brackets balance, no control character.
    let (mut braces, mut brackets, mut controls) = (0i64, 0i64, 0u32);
    for &b in body {
        braces += i64::from(b == b'{') - i64::from(b == b'}');
        brackets += i64::from(b == b'[') - i64::from(b == b']');
        controls += u32::from(b < 0x20);
    }
    if braces != 0 || brackets != 0 || controls != 0 {
        return None;
    }
    Some((nl, comma))
}

fn check_controls(s: &[u8], base: u64) -> Result<(), ScanError> {
    match s.iter().position(|&b| b < 0x20) {
        None => Ok(()),
        Some(p) => Err(bad("a control character in a string", s[p], base + p as u64)),
    }
}

/// Scans a whole document from `r`; `None` for a blank one (an empty
/// cache). The value of a field that `skip` names, when it is an array laid
/// out one element per line (`[`, a newline, four spaces…), is passed over
/// by looking for its closing `\n  ]` alone: its content is neither checked
/// nor counted (its `elements` is 0). Only for reads that never use those
/// bytes: a fold, which copies them, skips nothing.
pub(crate) fn scan(
    mut r: impl Read,
    skip: &dyn Fn(&str) -> bool,
) -> Result<Option<Index>, ScanError> {
    let mut sc = Scanner::new(skip);
    let mut buf = vec![0u8; CHUNK + 4];
    let mut carry = 0usize;
    let mut base = 0u64;
    loop {
        let n = loop {
            match r.read(&mut buf[carry..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ScanError::Io(e)),
            }
        };
        if n == 0 {
            if carry > 0 {
                return Err(ScanError::Bad(format!(
                    "not UTF-8 text (invalid byte at offset {base})"
                )));
            }
            return sc.end(base);
        }
        let filled = carry + n;
        let valid = match std::str::from_utf8(&buf[..filled]) {
            Ok(_) => filled,
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => {
                return Err(ScanError::Bad(format!(
                    "not UTF-8 text (invalid byte at offset {})",
                    base + e.valid_up_to() as u64
                )))
            }
        };
        sc.feed(&buf[..valid], base)?;
        base += valid as u64;
        buf.copy_within(valid..filled, 0);
        carry = filled - valid;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scans `text` fed `chunk` bytes at a time.
    fn scan_in(text: &str, chunk: usize) -> Result<Option<Index>, ScanError> {
        struct Slow<'a>(&'a [u8], usize);
        impl Read for Slow<'_> {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(self.1).min(out.len());
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        scan(Slow(text.as_bytes(), chunk), &|_| false)
    }

    fn fields(text: &str) -> Vec<(String, String, u64)> {
        let mut out = None;
        for chunk in [1, 2, 3, 7, 1 << 20] {
            let index = scan_in(text, chunk).unwrap_or_else(|e| panic!("{text}: {e:?}")).unwrap();
            let got: Vec<_> = index
                .fields
                .iter()
                .map(|f| {
                    let v = &text[f.start as usize..f.end as usize];
                    assert_eq!(f.first, v.as_bytes()[0]);
                    (f.name.clone(), v.to_string(), f.elements)
                })
                .collect();
            if let Some(prev) = &out {
                assert_eq!(prev, &got, "chunk size {chunk} changes the result");
            }
            out = Some(got);
        }
        out.unwrap()
    }

    fn owned(v: &[(&str, &str, u64)]) -> Vec<(String, String, u64)> {
        v.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), *c)).collect()
    }

    #[test]
    fn finds_each_value_with_nested_braces_and_brackets_in_strings() {
        let text = r#" {"format": "ranktune-cache", "version":"1.0" ,
            "rank_0": [{"op":"a}]","t":"[[{{"}, {"op":"\"]}\\","t":[1,{"x":[]}]}],
            "n": -1.5e3, "b":true,"e":[], "o": {"rank_1": [1,2]},
            "w\u00fc\"": "x,y"}
"#;
        assert_eq!(
            fields(text),
            owned(&[
                ("format", "\"ranktune-cache\"", 0),
                ("version", "\"1.0\"", 0),
                ("rank_0", r#"[{"op":"a}]","t":"[[{{"}, {"op":"\"]}\\","t":[1,{"x":[]}]}]"#, 2),
                ("n", "-1.5e3", 0),
                ("b", "true", 0),
                ("e", "[]", 0),
                ("o", r#"{"rank_1": [1,2]}"#, 0),
                ("wü\"", "\"x,y\"", 0),
            ])
        );
    }

    #[test]
    fn escapes_at_chunk_edges_and_multibyte_text() {
        let text = "{\"s\": [\"\\\\\", \"\\\"\", \"ü€𝄞\", \"\\u00e9\\\\\\\"\"], \"t\": 1}";
        assert_eq!(
            fields(text),
            owned(&[("s", &text[6..text.find(", \"t\"").unwrap()], 4), ("t", "1", 0)])
        );
    }

    #[test]
    fn the_one_entry_per_line_layout_scans_like_any_other() {
        let canonical = "{\n  \"format\": \"ranktune-cache\",\n  \"rank_0\": [\n    {\"a\":[1,{\"b\":2}]},\n    {\"s\":\"}]\"},\n    {\"c\":3}\n  ],\n  \"rank_1\": [\n    {\"d\":[]}\n  ]\n}\n";
        let f = fields(canonical);
        assert_eq!(f[1].2, 3, "{f:?}");
        assert_eq!(f[2], ("rank_1".to_string(), "[\n    {\"d\":[]}\n  ]".to_string(), 1));
        // A line that only looks like one element is scanned byte by byte:
        // the result is the same as for any layout, or a refusal.
        let tricky = "{\"r\": [\n    {\"a\": {\"c\": 1}\n    }\n]}";
        assert_eq!(fields(tricky)[0].2, 1);
        let unbalanced = "{\"r\": [\n    {\"a\": [1, {\"c\": 1}\n    ]}\n]}";
        assert_eq!(fields(unbalanced)[0].2, 1);
    }

    #[test]
    fn skipped_arrays_end_at_their_own_closing_line_at_every_chunk_size() {
        let text = "{\n  \"rank_0\": [\n    {\"a\":\"\\n  ]\"},\n    {\"b\":[1]}\n  ],\n  \"rank_1\": [{\"c\":1}],\n  \"rank_2\": [\n  {\"d\":2}\n  ],\n  \"n\": 1\n}";
        let want = fields(text);
        for chunk in [1, 2, 3, 4, 5, 7, 1 << 20] {
            struct Slow<'a>(&'a [u8], usize);
            impl Read for Slow<'_> {
                fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                    let n = self.0.len().min(self.1).min(out.len());
                    out[..n].copy_from_slice(&self.0[..n]);
                    self.0 = &self.0[n..];
                    Ok(n)
                }
            }
            let got = scan(Slow(text.as_bytes(), chunk), &|name| name.starts_with("rank_"))
                .unwrap()
                .unwrap();
            let got: Vec<_> = got
                .fields
                .iter()
                .map(|f| (f.name.clone(), text[f.start as usize..f.end as usize].to_string()))
                .collect();
            let want: Vec<_> = want.iter().map(|(n, v, _)| (n.clone(), v.clone())).collect();
            // rank_0 is skipped by its closing line (the escaped "\n  ]" in
            // a string is not one); rank_1 (one line) and rank_2 (indented
            // by two) are not laid out for skipping and are scanned.
            assert_eq!(got, want, "chunk {chunk}");
        }
        // A one-line array is never skipped past a later array's end.
        let mixed = "{\"a\":[1],\"b\":[\n    2\n  ]}";
        let got = scan(mixed.as_bytes(), &|_| true).unwrap().unwrap();
        assert_eq!(got.fields.len(), 2);
    }

    #[test]
    fn blank_is_empty_and_empty_object_has_no_fields() {
        assert!(scan_in("  \n", 1).unwrap().is_none());
        assert!(scan_in("", 1).unwrap().is_none());
        assert!(fields(" {} ").is_empty());
    }

    #[test]
    fn refuses_what_is_not_one_json_object() {
        for text in [
            "[1]",
            "{\"a\": [1, 2}",
            "{\"a\": [1, 2]",
            "{\"a\": [\"x]}",
            "{\"a\": 1,}",
            "{\"a\" 1}",
            "{\"a\": 1} x",
            "{\"a\": [1 @ 2]}",
            "{\"a\": \"bad \\q escape\"}",
            "{\"a\": \"raw\nnewline\"}",
            "{\"a\": tru",
            "{a: 1}",
            "{\"a\": }",
        ] {
            for chunk in [1, 3, 1 << 20] {
                assert!(
                    matches!(scan_in(text, chunk), Err(ScanError::Bad(_))),
                    "{text:?} (chunk {chunk}) must be refused"
                );
            }
        }
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(scan_in(&deep, 1 << 20), Err(ScanError::Bad(_))));
        let bytes = b"{\"a\": \"\xff\"}";
        assert!(
            matches!(scan(&bytes[..], &|_| false), Err(ScanError::Bad(m)) if m.contains("UTF-8"))
        );
        let cut = "{\"a\": \"é\"}".as_bytes();
        assert!(
            matches!(scan(&cut[..8], &|_| false), Err(ScanError::Bad(_))),
            "a character cut in two"
        );
    }

    #[test]
    fn agrees_with_serde_on_what_it_accepts() {
        for text in [
            r#"{"a":{"b":[1,{"c":"]"}]},"d":"\\"}"#,
            r#"{"x":[[],[[]],{}],"y":null}"#,
            r#"{"":0,"k":"\/"}"#,
        ] {
            let want: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(text).unwrap();
            let got = fields(text);
            assert_eq!(got.len(), want.len());
            for (name, value, _) in got {
                let v: serde_json::Value = serde_json::from_str(&value).unwrap();
                assert_eq!(want[&name], v);
            }
        }
    }
}
