//! A parser and printer for the subset of Python literals that TensorRT-LLM
//! writes into its cache files (`repr` of tactics, `str` of key tuples).
//!
//! Supported: `None`, `True`, `False`, decimal integers of any size,
//! floats (`1.5`, `1e-06`, `inf`, `nan`, with a sign), strings in both
//! quote styles with Python's escapes, tuples (including `(x,)` and `()`),
//! lists and dicts. Parenthesised expressions `(x)` are just `x`.
//!
//! This module must never evaluate anything: there are no names, calls,
//! operators (other than a sign on a number) or attribute lookups, and
//! everything else is a [`LiteralError`] with the byte offset. Nesting is capped
//! at [`MAX_DEPTH`] so hostile input cannot overflow the stack.
//!
//! [`PyValue`]'s `Display` writes what Python's `repr` writes for the same
//! value, so `parse_literal(v.to_string()) == v` and keys written by Python
//! round-trip byte for byte.

use std::fmt::{self, Write as _};

/// Deepest nesting of tuples, lists and dicts accepted.
pub(crate) const MAX_DEPTH: usize = 128;

/// A Python literal value.
#[derive(Clone, Debug, PartialEq)]
pub enum PyValue {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer of any size, as canonical decimal (`-12`, `0`; no `+`, no
    /// leading zeros), so huge values never overflow.
    Int(String),
    /// A float (`inf` and `nan` included).
    Float(f64),
    /// A string.
    Str(String),
    /// A tuple.
    Tuple(Vec<PyValue>),
    /// A list.
    List(Vec<PyValue>),
    /// A dict, in source order.
    Dict(Vec<(PyValue, PyValue)>),
}

impl PyValue {
    /// An integer value.
    pub fn int(v: i128) -> PyValue {
        PyValue::Int(v.to_string())
    }

    /// The integer as an `i64`, when it is one that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            PyValue::Int(s) => s.parse().ok(),
            _ => None,
        }
    }

    /// The integer as a `u64`, when it is one that fits.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            PyValue::Int(s) => s.parse().ok(),
            _ => None,
        }
    }

    /// The string, when this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PyValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A short name of the value's Python type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::None => "None",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::Tuple(_) => "tuple",
            PyValue::List(_) => "list",
            PyValue::Dict(_) => "dict",
        }
    }
}

/// Why a text is not a supported Python literal.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a supported Python literal at byte {offset}: {message}")]
pub struct LiteralError {
    /// Byte offset in the input where the problem was found.
    pub offset: usize,
    /// What was wrong.
    pub message: String,
}

/// Parses one Python literal; surrounding whitespace is allowed, anything
/// else after the value is an error.
///
/// ```
/// use ranktune_formats::trtllm::{parse_literal, PyValue};
/// let v = parse_literal("((256, 256), (1, 2), 1)").unwrap();
/// assert_eq!(v.to_string(), "((256, 256), (1, 2), 1)");
/// assert_eq!(parse_literal("(2048,)").unwrap(), PyValue::Tuple(vec![PyValue::int(2048)]));
/// assert!(parse_literal("__import__('os')").is_err());
/// ```
pub fn parse_literal(text: &str) -> Result<PyValue, LiteralError> {
    let mut p = Parser { s: text, pos: 0 };
    p.skip_ws();
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos != text.len() {
        return Err(p.err("unexpected text after the value"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, message: impl Into<String>) -> LiteralError {
        LiteralError { offset: self.pos, message: message.into() }
    }

    fn rest(&self) -> &str {
        &self.s[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        let trimmed = rest.trim_start_matches([' ', '\t', '\n', '\r']);
        self.pos += rest.len() - trimmed.len();
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<PyValue, LiteralError> {
        if depth > MAX_DEPTH {
            return Err(self.err(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        match self.peek() {
            None => Err(self.err("expected a value, found the end of the text")),
            Some('(') => self.paren(depth),
            Some('[') => {
                self.pos += 1;
                let (items, _) = self.items(']', depth)?;
                Ok(PyValue::List(items))
            }
            Some('{') => self.dict(depth),
            Some('\'') | Some('"') => Ok(PyValue::Str(self.string()?)),
            Some(c) if c.is_ascii_digit() || c == '.' || c == '-' || c == '+' => self.number(),
            Some(c) if c.is_alphabetic() || c == '_' => self.word(),
            Some(c) => Err(self.err(format!("unexpected character {c:?}"))),
        }
    }

    /// `(` seen: a tuple, or a parenthesised value.
    fn paren(&mut self, depth: usize) -> Result<PyValue, LiteralError> {
        self.pos += 1;
        let (mut items, trailing_comma) = self.items(')', depth)?;
        if items.len() == 1 && !trailing_comma {
            return Ok(items.remove(0));
        }
        Ok(PyValue::Tuple(items))
    }

    /// Comma-separated values up to `close` (consumed). Returns the items and
    /// whether the last one was followed by a comma.
    fn items(&mut self, close: char, depth: usize) -> Result<(Vec<PyValue>, bool), LiteralError> {
        let mut items = Vec::new();
        let mut trailing = false;
        loop {
            self.skip_ws();
            if self.eat(close) {
                return Ok((items, trailing));
            }
            if !items.is_empty() && !trailing {
                return Err(self.err(format!("expected ',' or '{close}'")));
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            trailing = self.eat(',');
        }
    }

    fn dict(&mut self, depth: usize) -> Result<PyValue, LiteralError> {
        self.pos += 1;
        let mut pairs = Vec::new();
        let mut trailing = false;
        loop {
            self.skip_ws();
            if self.eat('}') {
                return Ok(PyValue::Dict(pairs));
            }
            if !pairs.is_empty() && !trailing {
                return Err(self.err("expected ',' or '}'"));
            }
            let key = self.value(depth + 1)?;
            if matches!(key, PyValue::List(_) | PyValue::Dict(_)) {
                return Err(self.err(format!("a {} cannot be a dict key", key.type_name())));
            }
            self.skip_ws();
            if !self.eat(':') {
                return Err(self.err("expected ':' after a dict key"));
            }
            self.skip_ws();
            let value = self.value(depth + 1)?;
            pairs.push((key, value));
            self.skip_ws();
            trailing = self.eat(',');
        }
    }

    fn word(&mut self) -> Result<PyValue, LiteralError> {
        let start = self.pos;
        let len = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(self.rest().len());
        let word = &self.s[start..start + len];
        let v = match word {
            "None" => PyValue::None,
            "True" => PyValue::Bool(true),
            "False" => PyValue::Bool(false),
            "inf" => PyValue::Float(f64::INFINITY),
            "nan" => PyValue::Float(f64::NAN),
            _ => {
                if matches!(self.s[start + len..].chars().next(), Some('\'' | '"')) {
                    return Err(self.err(format!(
                        "string prefix {word:?} is not supported (only plain 'text' strings are)"
                    )));
                }
                return Err(self.err(format!(
                    "the name {word:?} is not a literal (names are never evaluated)"
                )));
            }
        };
        self.pos += len;
        Ok(v)
    }

    fn number(&mut self) -> Result<PyValue, LiteralError> {
        let start = self.pos;
        let mut negative = false;
        if self.eat('-') {
            negative = true;
        } else {
            self.eat('+');
        }
        if self.peek().is_some_and(|c| c.is_alphabetic()) {
            // -inf, +nan
            let v = self.word()?;
            return match v {
                PyValue::Float(f) => Ok(PyValue::Float(if negative { -f } else { f })),
                _ => Err(LiteralError {
                    offset: start,
                    message: "a sign can only precede a number".into(),
                }),
            };
        }
        let body_start = self.pos;
        let bytes = self.s.as_bytes();
        let mut end = self.pos;
        let mut is_float = false;
        while end < bytes.len() {
            let b = bytes[end];
            if b.is_ascii_digit() || b == b'_' {
                end += 1;
            } else if b == b'.' {
                is_float = true;
                end += 1;
            } else if (b == b'e' || b == b'E') && end > body_start {
                is_float = true;
                end += 1;
                if end < bytes.len() && (bytes[end] == b'+' || bytes[end] == b'-') {
                    end += 1;
                }
            } else {
                break;
            }
        }
        let body = &self.s[body_start..end];
        if body.is_empty() {
            return Err(self.err("expected digits"));
        }
        if body.contains('_') {
            return Err(self.err("digit separators '_' are not supported"));
        }
        if end < bytes.len()
            && (bytes[end].is_ascii_alphabetic() || bytes[end] == b'"' || bytes[end] == b'\'')
        {
            return Err(LiteralError {
                offset: end,
                message: "only decimal numbers are supported (no 0x, 0o, 0b, j or suffixes)".into(),
            });
        }
        if is_float {
            let ok_shape = body.bytes().any(|b| b.is_ascii_digit())
                && !body.ends_with(['e', 'E', '+', '-'])
                && !body.starts_with(['e', 'E']);
            let f: f64 = match body.parse() {
                Ok(f) if ok_shape => f,
                _ => {
                    return Err(LiteralError {
                        offset: body_start,
                        message: format!("{body:?} is not a float"),
                    })
                }
            };
            self.pos = end;
            return Ok(PyValue::Float(if negative { -f } else { f }));
        }
        let trimmed = body.trim_start_matches('0');
        if trimmed.len() != body.len() && !trimmed.is_empty() {
            return Err(LiteralError {
                offset: body_start,
                message: "leading zeros are not allowed in a decimal integer".into(),
            });
        }
        self.pos = end;
        Ok(PyValue::Int(if trimmed.is_empty() {
            "0".to_string()
        } else if negative {
            format!("-{trimmed}")
        } else {
            trimmed.to_string()
        }))
    }

    fn string(&mut self) -> Result<String, LiteralError> {
        let start = self.pos;
        let quote = match self.peek() {
            Some(q @ ('\'' | '"')) => q,
            _ => return Err(self.err("expected a string")),
        };
        let triple: String = std::iter::repeat_n(quote, 3).collect();
        let triple_quoted = self.rest().starts_with(&triple);
        self.pos += if triple_quoted { 3 } else { 1 };
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(LiteralError { offset: start, message: "unterminated string".into() });
            };
            if c == quote {
                if !triple_quoted {
                    self.pos += 1;
                    return Ok(out);
                }
                if self.rest().starts_with(&triple) {
                    self.pos += 3;
                    return Ok(out);
                }
            }
            if (c == '\n' || c == '\r') && !triple_quoted {
                return Err(self.err("line break inside a one-line string"));
            }
            self.pos += c.len_utf8();
            if c != '\\' {
                out.push(c);
                continue;
            }
            self.escape(&mut out)?;
        }
    }

    /// A backslash has been consumed; decode what follows into `out`.
    fn escape(&mut self, out: &mut String) -> Result<(), LiteralError> {
        let esc_start = self.pos - 1;
        let Some(c) = self.peek() else {
            return Err(self.err("unterminated escape"));
        };
        self.pos += c.len_utf8();
        let simple = match c {
            '\\' => Some('\\'),
            '\'' => Some('\''),
            '"' => Some('"'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            'v' => Some('\u{b}'),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            return Ok(());
        }
        match c {
            '\n' => Ok(()), // line continuation
            '\r' => {
                self.eat('\n');
                Ok(())
            }
            '0'..='7' => {
                let mut v = c as u32 - '0' as u32;
                for _ in 0..2 {
                    match self.peek() {
                        Some(d @ '0'..='7') => {
                            v = v * 8 + (d as u32 - '0' as u32);
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                self.push_code(out, v, esc_start)
            }
            'x' => self.hex_escape(out, 2, esc_start),
            'u' => self.hex_escape(out, 4, esc_start),
            'U' => self.hex_escape(out, 8, esc_start),
            'N' => Err(LiteralError {
                offset: esc_start,
                message: "named escapes \\N{...} are not supported".into(),
            }),
            other => {
                // Python keeps unknown escapes as written.
                out.push('\\');
                out.push(other);
                Ok(())
            }
        }
    }

    fn hex_escape(
        &mut self,
        out: &mut String,
        digits: usize,
        esc_start: usize,
    ) -> Result<(), LiteralError> {
        let rest = self.rest();
        let hex = rest.get(..digits).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        let Some(hex) = hex else {
            return Err(LiteralError {
                offset: esc_start,
                message: format!("escape needs {digits} hex digits"),
            });
        };
        let v = u32::from_str_radix(hex, 16)
            .map_err(|_| LiteralError { offset: esc_start, message: "bad hex escape".into() })?;
        self.pos += digits;
        self.push_code(out, v, esc_start)
    }

    fn push_code(&self, out: &mut String, v: u32, esc_start: usize) -> Result<(), LiteralError> {
        match char::from_u32(v) {
            Some(ch) => {
                out.push(ch);
                Ok(())
            }
            None => Err(LiteralError {
                offset: esc_start,
                message: format!(
                    "\\u{v:x} is not a Unicode scalar value (surrogates are not supported)"
                ),
            }),
        }
    }
}

/// Writes `s` as Python's `repr(str)` does: single quotes unless the text
/// contains a single quote and no double quote.
///
/// Printable non-ASCII characters are written as they are. Python decides
/// "printable" from the full Unicode database; this uses a close
/// approximation (control, format, separator and private-use characters and
/// all non-space whitespace are escaped), which only matters for cosmetic
/// byte equality, never for the value read back.
pub fn repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c => {
                let v = c as u32;
                let _ = if v <= 0xff {
                    write!(out, "\\x{v:02x}")
                } else if v <= 0xffff {
                    write!(out, "\\u{v:04x}")
                } else {
                    write!(out, "\\U{v:08x}")
                };
            }
        }
    }
    out.push(quote);
    out
}

/// Approximates Python's `str.isprintable` for one character.
fn is_printable(c: char) -> bool {
    let v = c as u32;
    if c == ' ' {
        return true;
    }
    if v < 0x20 || (0x7f..=0xa0).contains(&v) || v == 0xad {
        return false;
    }
    if c.is_whitespace() {
        return false; // Zs/Zl/Zp other than ' '
    }
    !matches!(v,
        0x0600..=0x0605 | 0x061c | 0x06dd | 0x070f | 0x180e
        | 0x200b..=0x200f | 0x202a..=0x202e | 0x2060..=0x206f
        | 0xd800..=0xf8ff | 0xfeff | 0xfff9..=0xfffb
        | 0xe0000..=0xe0fff | 0xf0000..=0x10ffff)
}

/// Writes a float as Python's `repr(float)` does: the shortest digits that
/// read back to the same value, positional for exponents in `-4..16`,
/// otherwise scientific with a signed two-digit exponent (`1e-06`,
/// `1.5e+16`); `inf`, `-inf`, `nan`.
pub fn repr_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "d.ddde-6".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
        } else if (point as usize) >= digits.len() {
            format!("{sign}{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            let (int, frac) = digits.split_at(point as usize);
            format!("{sign}{int}.{frac}")
        }
    } else {
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{esign}{:02}", exp.abs())
    }
}

impl fmt::Display for PyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PyValue::None => f.write_str("None"),
            PyValue::Bool(true) => f.write_str("True"),
            PyValue::Bool(false) => f.write_str("False"),
            PyValue::Int(s) => f.write_str(s),
            PyValue::Float(x) => f.write_str(&repr_float(*x)),
            PyValue::Str(s) => f.write_str(&repr_str(s)),
            PyValue::Tuple(items) => {
                f.write_char('(')?;
                write_items(f, items)?;
                if items.len() == 1 {
                    f.write_char(',')?;
                }
                f.write_char(')')
            }
            PyValue::List(items) => {
                f.write_char('[')?;
                write_items(f, items)?;
                f.write_char(']')
            }
            PyValue::Dict(pairs) => {
                f.write_char('{')?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_char('}')
            }
        }
    }
}

fn write_items(f: &mut fmt::Formatter<'_>, items: &[PyValue]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> PyValue {
        PyValue::Str(v.into())
    }
    fn i(v: i128) -> PyValue {
        PyValue::int(v)
    }

    #[test]
    fn scalars() {
        assert_eq!(parse_literal("None").unwrap(), PyValue::None);
        assert_eq!(parse_literal("True").unwrap(), PyValue::Bool(true));
        assert_eq!(parse_literal("False").unwrap(), PyValue::Bool(false));
        assert_eq!(parse_literal("43").unwrap(), i(43));
        assert_eq!(parse_literal("-7").unwrap(), i(-7));
        assert_eq!(parse_literal("+7").unwrap(), i(7));
        assert_eq!(parse_literal("0").unwrap(), i(0));
        assert_eq!(parse_literal("-0").unwrap(), i(0));
        assert_eq!(parse_literal("1e-06").unwrap(), PyValue::Float(1e-6));
        assert_eq!(parse_literal("1.5").unwrap(), PyValue::Float(1.5));
        assert_eq!(parse_literal(".5").unwrap(), PyValue::Float(0.5));
        assert_eq!(parse_literal("5.").unwrap(), PyValue::Float(5.0));
        assert_eq!(parse_literal("-inf").unwrap(), PyValue::Float(f64::NEG_INFINITY));
        assert!(matches!(parse_literal("nan").unwrap(), PyValue::Float(f) if f.is_nan()));
    }

    #[test]
    fn huge_ints_are_kept_exactly() {
        let big = "123456789012345678901234567890123456789";
        let v = parse_literal(big).unwrap();
        assert_eq!(v, PyValue::Int(big.into()));
        assert_eq!(v.as_i64(), None);
        assert_eq!(v.to_string(), big);
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(parse_literal("'abc'").unwrap(), s("abc"));
        assert_eq!(parse_literal("\"it's\"").unwrap(), s("it's"));
        assert_eq!(parse_literal(r"'a\'b'").unwrap(), s("a'b"));
        assert_eq!(parse_literal(r"'a\nb\t\\'").unwrap(), s("a\nb\t\\"));
        assert_eq!(parse_literal(r"'\x41\u00e9\U0001F600\101\0'").unwrap(), s("Aé😀A\0"));
        assert_eq!(parse_literal(r"'\d'").unwrap(), s("\\d"));
        assert_eq!(parse_literal("'''a'b'''").unwrap(), s("a'b"));
        assert_eq!(repr_str("it's"), "\"it's\"");
        assert_eq!(repr_str("both ' and \""), r#"'both \' and "'"#);
        assert_eq!(repr_str("a\nb\\"), r"'a\nb\\'");
        assert_eq!(repr_str("\u{1}é\u{7f}"), r"'\x01é\x7f'");
    }

    #[test]
    fn containers() {
        assert_eq!(parse_literal("()").unwrap(), PyValue::Tuple(vec![]));
        assert_eq!(parse_literal("(2048,)").unwrap(), PyValue::Tuple(vec![i(2048)]));
        assert_eq!(parse_literal("(2048)").unwrap(), i(2048));
        assert_eq!(parse_literal("[1, 2,]").unwrap(), PyValue::List(vec![i(1), i(2)]));
        let v = parse_literal("((256, 256), (1, 2), 1)").unwrap();
        assert_eq!(v.to_string(), "((256, 256), (1, 2), 1)");
        let d = parse_literal("{'a': (1,), 2: None}").unwrap();
        assert_eq!(d.to_string(), "{'a': (1,), 2: None}");
        assert_eq!(PyValue::Tuple(vec![i(1)]).to_string(), "(1,)");
        assert_eq!(PyValue::Tuple(vec![]).to_string(), "()");
    }

    #[test]
    fn float_repr_matches_python() {
        for (f, want) in [
            (1e-6, "1e-06"),
            (1e-4, "0.0001"),
            (0.1, "0.1"),
            (1.0, "1.0"),
            (123.456, "123.456"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (-2.5e-7, "-2.5e-07"),
            (1e100, "1e+100"),
            (-0.0, "-0.0"),
            (0.0123, "0.0123"),
        ] {
            assert_eq!(repr_float(f), want, "{f}");
        }
    }

    #[test]
    fn rejects_code_and_garbage() {
        for bad in [
            "",
            "os",
            "__import__('os').system('x')",
            "1 + 2",
            "(1, 2",
            "(1 2)",
            "'abc",
            "b'x'",
            "0x10",
            "1_000",
            "01",
            "1e",
            "--1",
            "-None",
            "{[1]: 2}",
            "'\\ud800'",
            "'\\N{DASH}'",
            "'a\nb'",
            "1 2",
            "f'x'",
        ] {
            assert!(parse_literal(bad).is_err(), "{bad:?} should fail");
        }
        let deep = "(".repeat(10_000);
        assert!(parse_literal(&deep).unwrap_err().message.contains("nested"));
    }
}
