//! Why a document does not import: one error type for every format, with
//! one set of "not UTF-8", "not JSON" and "not an object" variants.
//!
//! This module owns the wording of those messages and nothing else; the
//! formats build the variants, and reading a path ([`crate::SourceError`])
//! wraps them with the file's name.

/// Why a document cannot be imported at all (an entry that does not
/// parse is a warning, never this).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The bytes are not UTF-8 text (found by [`crate::parse_document`]).
    #[error(
        "not UTF-8 text (first bad byte at offset {offset}); a TensorRT-LLM cache is a JSON document"
    )]
    NotUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// The text is not JSON (or not UTF-8, said in `message`, for the
    /// formats whose parser keeps member order).
    #[error("{}", not_json(*at, message))]
    NotJson {
        /// Where the parser stopped, `(line, column)`, 1-based, when it
        /// says.
        at: Option<(usize, usize)>,
        /// The parser's message.
        message: String,
    },
    /// JSON, but not the object the format's files hold.
    #[error("{}", not_an_object(*found, expected))]
    NotAnObject {
        /// The JSON type found, when the message names it.
        found: Option<&'static str>,
        /// What the object should hold, in words (`of tuned configs`).
        expected: &'static str,
    },
    /// The file's name does not follow the format's convention.
    #[error("the file name {name:?} is not {convention}")]
    Name {
        /// The name.
        name: String,
        /// The convention, in words.
        convention: &'static str,
    },
    /// The document lacks what the format always holds, or holds nothing
    /// to import (what is wrong, in words).
    #[error("{0}")]
    Shape(String),
}

fn not_json(at: Option<(usize, usize)>, message: &str) -> String {
    match at {
        Some((line, column)) => format!(
            "not valid JSON at line {line}, column {column}: {message}; the file may be truncated \
             or not a cache"
        ),
        None => format!("not valid JSON: {message}"),
    }
}

fn not_an_object(found: Option<&str>, expected: &str) -> String {
    match found {
        Some(t) => format!("the document is a JSON {t}, not an object {expected}"),
        None => format!("the document is not a JSON object {expected}"),
    }
}

impl FormatError {
    /// Not UTF-8, as the formats whose parser keeps member order say it.
    pub(crate) fn not_utf8_text(e: std::str::Utf8Error) -> FormatError {
        FormatError::NotJson { at: None, message: format!("not UTF-8 (byte {})", e.valid_up_to()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wordings() {
        let e = FormatError::NotJson { at: Some((1, 2)), message: "EOF".into() };
        assert_eq!(
            e.to_string(),
            "not valid JSON at line 1, column 2: EOF; the file may be truncated or not a cache"
        );
        let e = FormatError::NotJson { at: None, message: "EOF".into() };
        assert_eq!(e.to_string(), "not valid JSON: EOF");
        let e = FormatError::NotAnObject { found: Some("array"), expected: "of x" };
        assert_eq!(e.to_string(), "the document is a JSON array, not an object of x");
        let e = FormatError::NotAnObject { found: None, expected: "of x" };
        assert_eq!(e.to_string(), "the document is not a JSON object of x");
    }
}
