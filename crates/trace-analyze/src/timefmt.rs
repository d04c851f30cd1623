//! Exact timestamp arithmetic on JSON numbers of microseconds: parses a
//! `ts` into fixed point (units of 10⁻⁹ µs), shifts it, and writes it back
//! without the rounding a trip through `f64` would add. Never panics.

/// Fixed-point units per microsecond.
pub const UNITS_PER_US: i128 = 1_000_000_000;
/// Fixed-point units per nanosecond.
pub const UNITS_PER_NS: i128 = 1_000_000;

/// Parses a JSON number of microseconds into fixed point.
pub fn parse_units(raw: &[u8]) -> Option<i128> {
    let (neg, b) = match raw.first()? {
        b'-' => (true, &raw[1..]),
        _ => (false, raw),
    };
    let mut v: i128 = 0;
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        if i >= 24 {
            return None;
        }
        v = v * 10 + i128::from(b[i] - b'0');
        i += 1;
    }
    if i == 0 {
        return None;
    }
    let mut frac: i128 = 0;
    let mut scale = UNITS_PER_US;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            if scale > 1 {
                scale /= 10;
                frac += i128::from(b[i] - b'0') * scale;
            }
            i += 1;
        }
    }
    if i != b.len() {
        // Exponent form: go through f64.
        let f: f64 = std::str::from_utf8(raw).ok()?.parse().ok()?;
        if !f.is_finite() || f.abs() > 1e20 {
            return None;
        }
        return Some((f * UNITS_PER_US as f64).round() as i128);
    }
    let v = v * UNITS_PER_US + frac;
    Some(if neg { -v } else { v })
}

/// Writes a fixed-point value as a JSON number of microseconds.
pub fn write_units(v: i128, out: &mut Vec<u8>) {
    if v < 0 {
        out.push(b'-');
    }
    let a = v.unsigned_abs();
    let int = a / UNITS_PER_US as u128;
    let mut frac = a % UNITS_PER_US as u128;
    write_u128(int, out);
    if frac != 0 {
        out.push(b'.');
        let mut digits = 9;
        while frac % 10 == 0 {
            frac /= 10;
            digits -= 1;
        }
        let mut tmp = [b'0'; 9];
        let mut k = digits;
        while k > 0 {
            k -= 1;
            tmp[k] = b'0' + (frac % 10) as u8;
            frac /= 10;
        }
        out.extend_from_slice(&tmp[..digits]);
    }
}

/// Writes an unsigned integer in decimal.
pub fn write_u128(mut v: u128, out: &mut Vec<u8>) {
    let mut tmp = [0u8; 40];
    let mut k = tmp.len();
    loop {
        k -= 1;
        tmp[k] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[k..]);
}

/// Shifts the JSON number `raw` (µs) by `shift` fixed-point units and writes
/// the result. Returns false (writing nothing) if `raw` is not a number.
pub fn shift(raw: &[u8], shift: i128, out: &mut Vec<u8>) -> bool {
    match parse_units(raw) {
        Some(v) => {
            write_units(v + shift, out);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(raw: &str, sh_ns: i128) -> String {
        let mut out = Vec::new();
        assert!(shift(raw.as_bytes(), sh_ns * UNITS_PER_NS, &mut out));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn exact_shifts() {
        assert_eq!(s("123.456", 1), "123.457");
        assert_eq!(s("123.456", 544), "124");
        assert_eq!(s("5", -6000), "-1");
        assert_eq!(s("0.1", 0), "0.1");
        assert_eq!(s("1700000000123456.789", 1_000), "1700000000123457.789");
        assert_eq!(s("1.5e3", 0), "1500");
        assert_eq!(s("-0.5", 1000), "0.5");
        assert_eq!(parse_units(b"abc"), None);
        assert_eq!(parse_units(b"1.2.3"), None);
    }
}
