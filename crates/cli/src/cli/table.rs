//! Plain-text tables for people: left-aligned columns, two spaces apart.
//!
//! Cells come from files (fingerprints, tactics, op names) and may hold
//! newlines or other control characters; they are escaped here so one cell
//! can never break a row, and clipped to [`MAX_CELL`] characters so a wide
//! cell can neither blow up a row nor need a format width (padding is done
//! by hand, never with `{:<w$}`, whose width must stay under 65,536).

/// The most characters a cell shows; longer ones end with `…`.
pub const MAX_CELL: usize = 200;

/// Shortens `s` to at most `max` characters, ending with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{head}…")
}

/// Escapes control characters (`\n` → `\\n`, others as `\\u{..}`).
fn escape(cell: &str) -> std::borrow::Cow<'_, str> {
    ranktune_cache::escape_control(cell)
}

/// `cell` clipped to [`MAX_CELL`] characters.
fn clip_cow(cell: std::borrow::Cow<'_, str>) -> std::borrow::Cow<'_, str> {
    if cell.chars().count() <= MAX_CELL {
        cell
    } else {
        clip(&cell, MAX_CELL).into()
    }
}

/// Lays out `rows` (the first is usually the header) as aligned columns.
pub fn table(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<std::borrow::Cow<'_, str>>> =
        rows.iter().map(|r| r.iter().map(|c| clip_cow(escape(c))).collect()).collect();
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 < r.len() {
                line.push_str(cell);
                let pad = widths[c].saturating_sub(cell.chars().count()) + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_cannot_break_rows() {
        let rows = vec![
            vec!["A".to_string(), "B".to_string()],
            vec!["x\ny".to_string(), "tab\there".to_string()],
        ];
        let out = table(&rows);
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(out.contains("x\\ny"));
    }

    proptest::proptest! {
        #[test]
        fn wide_cells_are_clipped(len in 0usize..80_000, c in proptest::char::any()) {
            let wide: String = std::iter::repeat_n(c, len).collect();
            let rows = vec![vec![wide.clone(), "x".to_string()], vec!["a".to_string(), wide]];
            let out = table(&rows);
            proptest::prop_assert_eq!(out.lines().count(), 2);
            for line in out.lines() {
                // two clipped cells (escapes can grow a char to 10) plus gaps
                proptest::prop_assert!(line.chars().count() <= 2 * MAX_CELL + 2, "{}", line.len());
            }
        }
    }

    #[test]
    fn clip_marks_cuts() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
    }
}
