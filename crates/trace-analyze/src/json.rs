//! Byte-level JSON scanning for the trace reader: a validating scanner that
//! finds where a value ends without building it, and a parser for one trace
//! event that records where its interesting fields sit.
//!
//! This module owns the hot path of `trace merge` and `trace summary`: it must
//! stay allocation-free per event and must never panic on any input, however
//! malformed (every index is bounds-checked; running off the end of the slice
//! is reported as [`Stop::More`] so the caller can read more and retry).

/// Deepest nesting accepted inside one value (protects the stack and memory).
pub const MAX_DEPTH: usize = 256;

/// Why a scan stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The slice ended before the value did: read more input and retry.
    More,
    /// The bytes are not JSON; `at` is the offset of the offending byte.
    Bad { at: usize, what: &'static str },
}

/// Things that are valid JSON structure but bad trace content, noted while
/// scanning so the caller can decide to skip or repair the event.
#[derive(Debug, Default, Clone)]
pub struct Flags {
    /// A raw control character (below U+0020) inside a string.
    pub control_char: bool,
    /// Offsets `(start, end)` of integers that fit neither `i64` nor `u64`.
    pub big_ints: Vec<(usize, usize)>,
    /// A byte of 0x80 or above inside a string (UTF-8 must then be checked).
    pub non_ascii: bool,
}

impl Flags {
    /// Resets the flags for the next value.
    pub fn clear(&mut self) {
        self.control_char = false;
        self.non_ascii = false;
        self.big_ints.clear();
    }
}

/// A byte range `start..end` inside an event's raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    fn new(start: usize, end: usize) -> Self {
        Span { start: start as u32, end: end as u32 }
    }
    /// The bytes of this span in `raw`.
    pub fn of<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        raw.get(self.start as usize..self.end as usize).unwrap_or(&[])
    }
}

/// Where the fields of one event sit in its raw bytes (`{ ... }`).
#[derive(Debug, Default, Clone)]
pub struct Fields {
    /// `ph` value (including quotes).
    pub ph: Option<Span>,
    /// `name` value.
    pub name: Option<Span>,
    /// `cat` value.
    pub cat: Option<Span>,
    /// `ts` value.
    pub ts: Option<Span>,
    /// `dur` value.
    pub dur: Option<Span>,
    /// `pid` value.
    pub pid: Option<Span>,
    /// `tid` value.
    pub tid: Option<Span>,
    /// `id` value.
    pub id: Option<Span>,
    /// `bind_id` value.
    pub bind_id: Option<Span>,
    /// `args` value.
    pub args: Option<Span>,
}

/// Whitespace skipping. Returns the index of the first non-whitespace byte
/// (or `b.len()`).
#[inline(always)]
pub fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b' ' | b'\n' | b'\r' | b'\t' => i += 1,
            _ => break,
        }
    }
    i
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

#[inline]
fn has_zero(x: u64) -> u64 {
    x.wrapping_sub(LO) & !x & HI
}

#[inline]
fn has_less_0x20(x: u64) -> u64 {
    x.wrapping_sub(LO * 0x20) & !x & HI
}

/// Scans a string whose opening quote is at `i - 1`; returns the index one
/// past the closing quote.
#[inline]
pub fn scan_string(b: &[u8], mut i: usize, flags: &mut Flags) -> Result<usize, Stop> {
    loop {
        // Eight bytes at a time; jump straight to the first interesting byte
        // (quote, backslash, control character or non-ASCII). The lowest set
        // bit of these masks is always exact.
        while i + 8 <= b.len() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            let x = u64::from_le_bytes(w);
            let hit = has_zero(x ^ (LO * b'"' as u64))
                | has_zero(x ^ (LO * b'\\' as u64))
                | has_less_0x20(x)
                | (x & HI);
            if hit != 0 {
                i += (hit.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        let Some(&c) = b.get(i) else {
            return Err(Stop::More);
        };
        match c {
            b'"' => return Ok(i + 1),
            b'\\' => {
                let Some(&e) = b.get(i + 1) else {
                    return Err(Stop::More);
                };
                match e {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                    b'u' => {
                        if b.len() < i + 6 {
                            return Err(Stop::More);
                        }
                        if !b[i + 2..i + 6].iter().all(|h| h.is_ascii_hexdigit()) {
                            return Err(Stop::Bad { at: i, what: "bad \\u escape in a string" });
                        }
                        i += 6;
                    }
                    _ => return Err(Stop::Bad { at: i, what: "bad escape in a string" }),
                }
            }
            c if c < 0x20 => {
                flags.control_char = true;
                i += 1;
            }
            c if c >= 0x80 => {
                flags.non_ascii = true;
                i += 1;
            }
            _ => i += 1,
        }
    }
}

/// Index of the first non-digit at or after `i` (eight bytes at a time).
#[inline(always)]
fn skip_digits(b: &[u8], mut i: usize) -> usize {
    while i + 8 <= b.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        let t = u64::from_le_bytes(w) ^ (LO * 0x30);
        // High bit of a byte set when it is not '0'..='9' (no carries
        // cross bytes: the low seven bits plus 0x76 stay below 0x100).
        let nd = (((t & (LO * 0x7f)).wrapping_add(LO * 0x76)) | t) & HI;
        if nd != 0 {
            return i + (nd.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// Scans a number starting at `i`; returns its end. Integers beyond 64 bits
/// are recorded in `flags.big_ints`.
#[inline]
pub fn scan_number(b: &[u8], start: usize, flags: &mut Flags) -> Result<usize, Stop> {
    let mut i = start;
    let neg = b.get(i) == Some(&b'-');
    if neg {
        i += 1;
    }
    let int_start = i;
    i = skip_digits(b, i);
    if i == b.len() {
        return Err(Stop::More);
    }
    if i == int_start {
        return Err(Stop::Bad { at: start, what: "bad number" });
    }
    // JSON forbids leading zeros (`00`, `-012`): copied through, they would
    // make the merged output invalid.
    if b[int_start] == b'0' && i - int_start > 1 {
        return Err(Stop::Bad { at: start, what: "number with a leading zero" });
    }
    let int_end = i;
    let mut integer = true;
    if b[i] == b'.' {
        integer = false;
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == b.len() {
            return Err(Stop::More);
        }
        if i == f {
            return Err(Stop::Bad { at: start, what: "bad number" });
        }
    }
    if b[i] == b'e' || b[i] == b'E' {
        integer = false;
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == b.len() {
            return Err(Stop::More);
        }
        if i == f {
            return Err(Stop::Bad { at: start, what: "bad number" });
        }
        // An exponent can leave the range of a double (`1e400`): most
        // readers, viewers included, reject such a number, so it is bad
        // input rather than something to copy through.
        let finite = std::str::from_utf8(&b[start..i])
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .is_some_and(f64::is_finite);
        if !finite {
            return Err(Stop::Bad { at: start, what: "number out of range" });
        }
    }
    if integer && int_end - int_start >= 19 && !fits_64(&b[int_start..int_end], neg) {
        flags.big_ints.push((start, i));
    }
    Ok(i)
}

fn fits_64(digits: &[u8], neg: bool) -> bool {
    let mut v: u64 = 0;
    for &d in digits {
        match v.checked_mul(10).and_then(|x| x.checked_add(u64::from(d - b'0'))) {
            Some(x) => v = x,
            None => return false,
        }
    }
    !neg || v <= 1u64 << 63
}

/// Scans any JSON value starting at `i` (no leading whitespace); returns its
/// end.
pub fn scan_value(b: &[u8], i: usize, flags: &mut Flags) -> Result<usize, Stop> {
    scan_value_depth(b, i, flags, 0)
}

/// Scalars inline, containers and words through [`scan_value_depth`].
#[inline(always)]
fn scan_member_value(b: &[u8], i: usize, flags: &mut Flags, depth: usize) -> Result<usize, Stop> {
    match b.get(i) {
        Some(b'"') => scan_string(b, i + 1, flags),
        Some(b'0'..=b'9') | Some(b'-') => scan_number(b, i, flags),
        _ => scan_value_depth(b, i, flags, depth),
    }
}

fn scan_value_depth(b: &[u8], i: usize, flags: &mut Flags, depth: usize) -> Result<usize, Stop> {
    let Some(&c) = b.get(i) else {
        return Err(Stop::More);
    };
    match c {
        b'"' => scan_string(b, i + 1, flags),
        b'{' => scan_object(b, i, flags, depth + 1),
        b'[' => scan_array(b, i, flags, depth + 1),
        b'-' | b'0'..=b'9' => scan_number(b, i, flags),
        b't' => literal(b, i, b"true"),
        b'f' => literal(b, i, b"false"),
        b'n' => literal(b, i, b"null"),
        _ => Err(Stop::Bad { at: i, what: "unexpected character" }),
    }
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Result<usize, Stop> {
    let have = &b[i..b.len().min(i + word.len())];
    if !word.starts_with(have) {
        return Err(Stop::Bad { at: i, what: "unexpected word" });
    }
    if have.len() < word.len() {
        return Err(Stop::More);
    }
    Ok(i + word.len())
}

fn too_deep(at: usize, depth: usize) -> Result<(), Stop> {
    if depth > MAX_DEPTH {
        return Err(Stop::Bad { at, what: "nesting too deep" });
    }
    Ok(())
}

fn scan_object(b: &[u8], start: usize, flags: &mut Flags, depth: usize) -> Result<usize, Stop> {
    too_deep(start, depth)?;
    let mut i = skip_ws(b, start + 1);
    match b.get(i) {
        None => return Err(Stop::More),
        Some(b'}') => return Ok(i + 1),
        _ => {}
    }
    loop {
        match b.get(i) {
            None => return Err(Stop::More),
            Some(b'"') => {}
            Some(_) => return Err(Stop::Bad { at: i, what: "expected a key" }),
        }
        i = scan_string(b, i + 1, flags)?;
        i = expect(b, skip_ws(b, i), b':', "expected ':'")?;
        i = skip_ws(b, i);
        i = scan_member_value(b, i, flags, depth)?;
        i = skip_ws(b, i);
        match b.get(i) {
            None => return Err(Stop::More),
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return Ok(i + 1),
            Some(_) => return Err(Stop::Bad { at: i, what: "expected ',' or '}'" }),
        }
    }
}

fn scan_array(b: &[u8], start: usize, flags: &mut Flags, depth: usize) -> Result<usize, Stop> {
    too_deep(start, depth)?;
    let mut i = skip_ws(b, start + 1);
    match b.get(i) {
        None => return Err(Stop::More),
        Some(b']') => return Ok(i + 1),
        _ => {}
    }
    loop {
        i = scan_member_value(b, i, flags, depth)?;
        i = skip_ws(b, i);
        match b.get(i) {
            None => return Err(Stop::More),
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b']') => return Ok(i + 1),
            Some(_) => return Err(Stop::Bad { at: i, what: "expected ',' or ']'" }),
        }
    }
}

#[inline]
fn expect(b: &[u8], i: usize, c: u8, what: &'static str) -> Result<usize, Stop> {
    match b.get(i) {
        None => Err(Stop::More),
        Some(&x) if x == c => Ok(i + 1),
        Some(_) => Err(Stop::Bad { at: i, what }),
    }
}

/// Parses the event object starting at `start` (which must hold `{`),
/// filling `fields` with offsets relative to `start`. Returns the end of the
/// object.
pub fn parse_event(
    b: &[u8],
    start: usize,
    fields: &mut Fields,
    flags: &mut Flags,
) -> Result<usize, Stop> {
    *fields = Fields::default();
    let mut i = skip_ws(b, start + 1);
    match b.get(i) {
        None => return Err(Stop::More),
        Some(b'}') => return Ok(i + 1),
        _ => {}
    }
    loop {
        match b.get(i) {
            None => return Err(Stop::More),
            Some(b'"') => {}
            Some(_) => return Err(Stop::Bad { at: i, what: "expected a key" }),
        }
        let key_start = i + 1;
        i = scan_string(b, key_start, flags)?;
        let key = &b[key_start..i - 1];
        i = expect(b, skip_ws(b, i), b':', "expected ':'")?;
        i = skip_ws(b, i);
        let v_start = i;
        i = scan_member_value(b, i, flags, 1)?;
        let span = Some(Span::new(v_start - start, i - start));
        let slot = match key {
            b"ph" => &mut fields.ph,
            b"ts" => &mut fields.ts,
            b"id" => &mut fields.id,
            b"pid" => &mut fields.pid,
            b"tid" => &mut fields.tid,
            b"dur" => &mut fields.dur,
            b"cat" => &mut fields.cat,
            b"name" => &mut fields.name,
            b"args" => &mut fields.args,
            b"bind_id" => &mut fields.bind_id,
            _ => &mut None,
        };
        if slot.is_none() {
            *slot = span;
        }
        i = skip_ws(b, i);
        match b.get(i) {
            None => return Err(Stop::More),
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return Ok(i + 1),
            Some(_) => return Err(Stop::Bad { at: i, what: "expected ',' or '}'" }),
        }
    }
}

/// Finds the value of `key` among the top-level members of the object `obj`
/// (raw bytes of a complete, already validated object). Returns its span
/// relative to `obj`.
pub fn object_member(obj: &[u8], key: &[u8]) -> Option<Span> {
    let mut flags = Flags::default();
    let mut i = skip_ws(obj, 0);
    if obj.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(obj, i + 1);
    while obj.get(i) == Some(&b'"') {
        let ks = i + 1;
        i = scan_string(obj, ks, &mut flags).ok()?;
        let k = &obj[ks..i - 1];
        i = skip_ws(obj, i);
        if obj.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(obj, i + 1);
        let vs = i;
        i = scan_value(obj, i, &mut flags).ok()?;
        if k == key {
            return Some(Span::new(vs, i));
        }
        i = skip_ws(obj, i);
        if obj.get(i) == Some(&b',') {
            i = skip_ws(obj, i + 1);
        }
    }
    None
}

/// The content of a JSON string value (raw bytes including quotes), with
/// escapes resolved. Returns `None` for anything that is not a valid string.
pub fn unescape(raw: &[u8]) -> Option<String> {
    if !raw.contains(&b'\\') && raw.len() >= 2 && raw[0] == b'"' {
        return std::str::from_utf8(&raw[1..raw.len() - 1]).ok().map(str::to_owned);
    }
    serde_json::from_slice::<String>(raw).ok()
}

/// Parses an unsigned integer value (raw bytes). Accepts a JSON number or a
/// string holding a decimal or `0x` hexadecimal number.
pub fn parse_u64(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || raw.len() > 20 || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// Parses a JSON number (raw bytes) as `f64`.
pub fn parse_f64(raw: &[u8]) -> Option<f64> {
    // Fast path: plain decimal with at most 18 significant digits.
    let (neg, digits) = match raw.first() {
        Some(b'-') => (true, &raw[1..]),
        _ => (false, raw),
    };
    let mut mant: u64 = 0;
    let mut nd = 0;
    let mut frac_digits = 0;
    let mut seen_dot = false;
    let mut simple = !digits.is_empty();
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                mant = mant.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
                nd += 1;
                if seen_dot {
                    frac_digits += 1;
                }
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => {
                simple = false;
                break;
            }
        }
    }
    if simple && nd <= 18 && nd > 0 {
        const POW: [f64; 19] = [
            1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
            1e16, 1e17, 1e18,
        ];
        let v = mant as f64 / POW[frac_digits];
        return Some(if neg { -v } else { v });
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(s: &str) -> Result<usize, Stop> {
        scan_value(s.as_bytes(), 0, &mut Flags::default())
    }

    #[test]
    fn scans_values_and_reports_more() {
        assert_eq!(scan(r#"{"a": [1, 2.5e3, "x\"y", true, null]} "#), Ok(37));
        assert_eq!(scan(r#"{"a": [1, 2"#), Err(Stop::More));
        assert_eq!(scan("12"), Err(Stop::More));
        assert!(matches!(scan("{\"a\" 1}"), Err(Stop::Bad { .. })));
        assert!(matches!(scan("tru "), Err(Stop::Bad { .. })));
    }

    #[test]
    fn flags_control_chars_and_big_ints() {
        let mut f = Flags::default();
        scan_value(b"[\"a\tb\", 123456789012345678901234, 18446744073709551615, -9223372036854775808, -9223372036854775809] ", 0, &mut f).unwrap();
        assert!(f.control_char);
        assert_eq!(f.big_ints.len(), 2);
    }

    #[test]
    fn parses_event_fields() {
        let ev =
            br#"{"ph": "X", "name": "a\"b", "args": {"pid": 9}, "pid": 12, "ts": 1.5, "dur": 2}"#;
        let mut fields = Fields::default();
        let end = parse_event(ev, 0, &mut fields, &mut Flags::default()).unwrap();
        assert_eq!(end, ev.len());
        assert_eq!(fields.pid.unwrap().of(ev), b"12");
        assert_eq!(fields.ts.unwrap().of(ev), b"1.5");
        assert_eq!(fields.ph.unwrap().of(ev), b"\"X\"");
        assert_eq!(unescape(fields.name.unwrap().of(ev)).unwrap(), "a\"b");
        let args = fields.args.unwrap().of(ev);
        assert_eq!(object_member(args, b"pid").unwrap().of(args), b"9");
    }

    /// The word-at-a-time string scanner agrees with a byte-at-a-time one.
    #[test]
    fn string_scan_matches_naive() {
        fn naive(b: &[u8], mut i: usize) -> (Result<usize, Stop>, bool, bool) {
            let (mut ctrl, mut hi) = (false, false);
            while i < b.len() {
                match b[i] {
                    b'"' => return (Ok(i + 1), ctrl, hi),
                    b'\\' => {
                        if i + 1 >= b.len() {
                            break;
                        }
                        if !b"\"\\/bfnrt".contains(&b[i + 1]) {
                            return (Err(Stop::Bad { at: i, what: "" }), ctrl, hi);
                        }
                        i += 2;
                        continue;
                    }
                    c if c < 0x20 => ctrl = true,
                    c if c >= 0x80 => hi = true,
                    _ => {}
                }
                i += 1;
            }
            (Err(Stop::More), ctrl, hi)
        }
        let alphabet = [b'a', b'"', b'\\', b'n', 1, 0x1f, 0x20, 0xc3, 0xa9, 0x7f, b' '];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            let len = (seed % 40) as usize;
            let mut v = Vec::with_capacity(len);
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                v.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            let mut f = Flags::default();
            let got = scan_string(&v, 0, &mut f);
            let (want, ctrl, hi) = naive(&v, 0);
            match want {
                Ok(end) => {
                    assert_eq!(got, Ok(end), "{v:?}");
                    assert_eq!((f.control_char, f.non_ascii), (ctrl, hi), "{v:?}");
                }
                Err(Stop::Bad { at, .. }) => {
                    assert!(matches!(got, Err(Stop::Bad { at: a, .. }) if a == at), "{v:?}")
                }
                Err(Stop::More) => assert_eq!(got, Err(Stop::More), "{v:?}"),
            }
        }
    }

    #[test]
    fn digit_skip_matches_naive() {
        for n in 0..300u32 {
            let mut v: Vec<u8> = (0..(n % 23)).map(|k| b'0' + ((n + k) % 10) as u8).collect();
            let stop = [b'.', b'/', b':', b'a', 0xb0, 0x39 + 0x80, b' ', b'e'][(n % 8) as usize];
            v.push(stop);
            v.extend_from_slice(b"123456789");
            let want = v.iter().position(|c| !c.is_ascii_digit()).unwrap();
            assert_eq!(skip_digits(&v, 0), want, "{v:?}");
        }
        assert_eq!(skip_digits(b"12345678901", 0), 11);
    }

    #[test]
    fn parses_numbers() {
        assert_eq!(parse_f64(b"123.456"), Some(123.456));
        assert_eq!(parse_f64(b"-2"), Some(-2.0));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_u64(b"42"), Some(42));
        assert_eq!(parse_u64(b"\"42\""), None);
    }

    #[test]
    fn numbers_json_forbids_or_readers_reject_are_bad() {
        let scan = |t: &[u8]| scan_number(t, 0, &mut Flags::default());
        for ok in [&b"0,"[..], b"-0,", b"10,", b"0.5,", b"1e3,", b"-2.5E-3,", b"1.7e308,"] {
            assert_eq!(scan(ok), Ok(ok.len() - 1), "{}", String::from_utf8_lossy(ok));
        }
        for bad in [&b"00,"[..], b"012,", b"-01,", b"1e400,", b"-9E999,", b"1.,", b"-,"] {
            assert!(matches!(scan(bad), Err(Stop::Bad { .. })), "{}", String::from_utf8_lossy(bad));
        }
    }
}
