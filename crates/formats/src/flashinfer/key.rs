//! FlashInfer's entry keys: the `str()` of a Python tuple `(custom_op,
//! runner_class_name, nearest_profile[, extras])` (the 4-element form since
//! FlashInfer 0.6.13). The key is opaque text to FlashInfer's loader, and
//! `extras` holds reprs such as `torch.bfloat16` that are no Python literal,
//! so this module never re-renders a key from parsed parts: it splits the
//! text tolerantly, reads the op and runner out of the first two elements,
//! and turns the key into a *template* — the key text with every
//! non-negative int dim of the profile replaced by `#` — plus those dims.
//! [`render`] puts the dims back and gives the key text exactly.
//!
//! A dim FlashInfer pinned by a constraint (`-1`), and anything in a
//! profile that is not a tuple of int tuples, stays in the template as
//! text. Owns: key text <-> (op, runner, template, dims). Never: JSON, I/O.

use crate::trtllm::{parse_literal, PyValue};

/// A key read into its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedKey {
    /// `custom_op`.
    pub op: String,
    /// `runner_class_name`.
    pub runner: String,
    /// The key text, `%` and `#` escaped as `%25` and `%23`, with `#` for
    /// each dim in [`ParsedKey::dims`] (in order).
    pub template: String,
    /// The profile's non-negative int dims, one list per input shape (a
    /// shape whose dims are all `-1` gives an empty list).
    pub dims: Vec<Vec<u64>>,
}

/// Splits the text of a parenthesized tuple into its top-level elements'
/// text (with their byte offsets), honouring `'…'`/`"…"` quoting with
/// backslash escapes and nested brackets. `None` when it is not one tuple.
fn split_tuple(text: &str) -> Option<Vec<(usize, &str)>> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'(') || bytes.last() != Some(&b')') {
        return None;
    }
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut start = 1;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(q) = quote {
            if b == b'\\' {
                i += 1;
            } else if b == q {
                quote = None;
            }
        } else {
            match b {
                b'\'' | b'"' => quote = Some(b),
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 && i != bytes.len() - 1 {
                        return None;
                    }
                }
                b',' if depth == 1 => {
                    parts.push((start, &text[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
        i += 1;
    }
    if depth != 0 || quote.is_some() {
        return None;
    }
    let last = &text[start..text.len() - 1];
    if !last.trim().is_empty() {
        parts.push((start, last));
    }
    Some(parts)
}

fn escape(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
}

fn string_element(text: &str) -> Option<String> {
    match parse_literal(text.trim()) {
        Ok(PyValue::Str(s)) => Some(s),
        _ => None,
    }
}

/// True when `v` is a tuple of int tuples (the profile FlashInfer writes).
fn is_int_shapes(v: &PyValue) -> bool {
    let PyValue::Tuple(shapes) = v else { return false };
    shapes.iter().all(
        |s| matches!(s, PyValue::Tuple(dims) if dims.iter().all(|d| matches!(d, PyValue::Int(_)))),
    )
}

/// The template of a profile's text (a tuple of int tuples) and its
/// non-negative dims; `None` when a dim does not fit a `u64`.
fn template_profile(text: &str) -> Option<(String, Vec<Vec<u64>>)> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut dims: Vec<Vec<u64>> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'(' => {
                depth += 1;
                if depth == 2 {
                    dims.push(Vec::new());
                }
                out.push('(');
            }
            b')' => {
                depth = depth.saturating_sub(1);
                out.push(')');
            }
            b'0'..=b'9' => {
                let end = bytes[i..]
                    .iter()
                    .position(|c| !c.is_ascii_digit())
                    .map_or(bytes.len(), |n| i + n);
                let number = &text[i..end];
                if i > 0 && bytes[i - 1] == b'-' {
                    out.push_str(number);
                } else {
                    dims.last_mut()?.push(number.parse().ok()?);
                    out.push('#');
                }
                i = end;
                continue;
            }
            _ => out.push(b as char),
        }
        i += 1;
    }
    Some((out, dims))
}

/// Reads a key. `Err` says why it is not a FlashInfer key: not a tuple, or
/// its first two elements not the op and runner strings. Everything after
/// them is accepted as it is.
pub fn parse(text: &str) -> Result<ParsedKey, String> {
    let parts = split_tuple(text).ok_or("key is not a parenthesized tuple")?;
    let (Some(op), Some(runner)) = (
        parts.first().and_then(|(_, p)| string_element(p)),
        parts.get(1).and_then(|(_, p)| string_element(p)),
    ) else {
        return Err("key does not start with the op and runner names as strings".into());
    };
    let mut template = String::with_capacity(text.len() + 8);
    let mut dims = Vec::new();
    let mut done = 0;
    if let Some(&(at, profile)) = parts.get(2) {
        let trimmed = profile.trim_start();
        let at = at + (profile.len() - trimmed.len());
        let profile = trimmed.trim_end();
        let shaped = parse_literal(profile).ok().filter(is_int_shapes);
        if let Some((t, d)) = shaped.and_then(|_| template_profile(profile)) {
            escape(&text[..at], &mut template);
            template.push_str(&t);
            dims = d;
            done = at + profile.len();
        }
    }
    escape(&text[done..], &mut template);
    let parsed = ParsedKey { op, runner, template, dims };
    // The template must give the key back; anything else is a bug here,
    // so fall back to the whole key as text (no dims) rather than alter it.
    if render(&parsed.template, &parsed.dims).as_deref() != Some(text) {
        let mut whole = String::new();
        escape(text, &mut whole);
        return Ok(ParsedKey { template: whole, dims: Vec::new(), ..parsed });
    }
    Ok(parsed)
}

/// The key text of a template and its dims (the inverse of [`parse`]);
/// `None` when the number of dims does not match the template's `#`s or
/// an escape is malformed.
pub fn render<D: std::fmt::Display>(template: &str, dims: &[Vec<D>]) -> Option<String> {
    let mut values = dims.iter().flatten();
    let mut out = String::with_capacity(template.len() + 16);
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        match c {
            '#' => out.push_str(&values.next()?.to_string()),
            '%' => {
                let code: String = chars.by_ref().take(2).collect();
                match code.as_str() {
                    "25" => out.push('%'),
                    "23" => out.push('#'),
                    _ => return None,
                }
            }
            c => out.push(c),
        }
    }
    values.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_element_keys_with_pinned_dims_and_reprs() {
        let text = "('fp4_gemm', 'CudnnFp4GemmRunner', ((1, 3584), (-1, 448), (0,)), \
                    (torch.bfloat16, \"it's\", None, 2.5, '#%'))";
        let k = parse(text).unwrap();
        assert_eq!((k.op.as_str(), k.runner.as_str()), ("fp4_gemm", "CudnnFp4GemmRunner"));
        assert_eq!(k.dims, vec![vec![1, 3584], vec![448], vec![0]]);
        assert_eq!(
            k.template,
            "('fp4_gemm', 'CudnnFp4GemmRunner', ((#, #), (-1, #), (#,)), \
             (torch.bfloat16, \"it's\", None, 2.5, '%23%25'))"
        );
        assert_eq!(render(&k.template, &k.dims).unwrap(), text);
        assert_eq!(render(&k.template, &[vec![1]]), None);
    }

    #[test]
    fn three_element_keys_and_opaque_profiles() {
        let k = parse("('op', 'R', ((4, 4608), (7168,)))").unwrap();
        assert_eq!(k.dims, vec![vec![4, 4608], vec![7168]]);
        // A profile that is not int tuples stays text, and still imports.
        let odd = "('op', 'R', ((4, 'x'), 1.5), ())";
        let k = parse(odd).unwrap();
        assert!(k.dims.is_empty());
        assert_eq!(render(&k.template, &k.dims).unwrap(), odd);
        assert!(parse("[1, 2]").is_err());
        assert!(parse("(1, 'R', ())").is_err());
        assert!(parse("('op', 'R'").is_err());
        assert!(parse("('op', 'R', ()) tail").is_err());
    }
}
