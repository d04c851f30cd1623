//! Where a character of JSON text stands: inside a string literal or not.
//! Owns only that (the two rewrites of raw JSON text, whitespace removal
//! in the codec and Python's bare `NaN`/`Infinity` in the importers of
//! `ranktune-formats`, walk text with it); it never parses or validates.

/// Walks JSON text one character at a time, tracking string literals and
/// their escapes. Works on bytes as well: the characters it looks for,
/// `"` and `\`, never occur inside a multi-byte UTF-8 sequence.
#[derive(Default)]
pub struct Strings {
    in_string: bool,
    escaped: bool,
}

impl Strings {
    /// Takes the next character; true when it stands outside every string
    /// literal (a string's quotes count as inside).
    pub fn outside(&mut self, c: char) -> bool {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if c == '\\' {
                self.escaped = true;
            } else if c == '"' {
                self.in_string = false;
            }
            false
        } else if c == '"' {
            self.in_string = true;
            false
        } else {
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escapes_and_text_after_a_string() {
        let text = r#"a"b\"c\\"d"#;
        let mut s = Strings::default();
        let out: String = text.chars().filter(|&c| s.outside(c)).collect();
        assert_eq!(out, "ad");
    }
}
