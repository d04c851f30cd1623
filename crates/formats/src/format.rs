//! The one seam every format sits behind: the [`Format`] trait, what an
//! import and an export give back ([`Imported`], [`Exported`]), and the
//! file a format reads ([`Input`]).
//!
//! This module owns the contract between the registry (`crate::FORMATS`)
//! and each format's module; it never names a format. A format decides how
//! its files look and nothing else: reading paths, detection order and
//! publishing files are `crate::read`'s and `crate::write`'s.

use crate::{parse_document, SourceError};
use ranktune_cache::CacheData;
use serde_json::Value;
use std::cell::OnceCell;
use std::path::Path;

/// A cache file format: its own or another tuner's. Implemented by a unit
/// struct in each format's module and listed once in `crate::FORMATS`.
///
/// Detection asks every format's [`detect_path`](Format::detect_path)
/// first (in registry order), then, on the document parsed once,
/// every format's [`detect`](Format::detect); the first that says yes
/// reads the file.
pub trait Format: Sync {
    /// The name `--format` and Python's `format=` take (`trtllm`).
    fn name(&self) -> &'static str;

    /// One line for help texts: what the format's files are (no final
    /// period, as help texts show it).
    fn about(&self) -> &'static str;

    /// What a file read in this format must be, for the error when it is
    /// not: "`<path>` is not a TensorRT-LLM cache".
    fn noun(&self) -> &'static str;

    /// What detection looks for, in words (the error listing what was
    /// tried).
    fn sign(&self) -> &'static str;

    /// Whether a cache is one file or a folder of files, for reading and
    /// for writing.
    fn layout(&self) -> Layout {
        Layout::File
    }

    /// True when the path alone says the format (a file's name, a folder's
    /// content); most formats are not told by their paths.
    fn detect_path(&self, _path: &Path) -> bool {
        false
    }

    /// True when a parsed document has this format's shape.
    fn detect(&self, _doc: &Value) -> bool {
        false
    }

    /// Reads one file (not blank: blank files are empty caches in any
    /// format, decided before). Warnings name entries, not the file: the
    /// caller adds its name.
    fn read(&self, file: &Input<'_>) -> Result<Imported, SourceError>;

    /// Reads a folder; only called for [`Layout::Folder`] formats, whose
    /// warnings name each file. The rest keep this refusal.
    fn read_folder(&self, dir: &Path) -> Result<Imported, SourceError> {
        Err(SourceError::Folder { path: dir.to_path_buf() })
    }

    /// How the format is written; `None` for a format ranktune reads but
    /// never writes.
    fn writer(&self) -> Option<Writer> {
        None
    }
}

impl std::fmt::Debug for dyn Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq for dyn Format {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

/// Whether a format's cache is one file or a folder of files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One file.
    File,
    /// A folder of files, read and written as a whole.
    Folder {
        /// What the folder holds, in words (`config files`), for the error
        /// when another format is given a folder.
        holds: &'static str,
    },
}

/// How a format is written (see [`Format::writer`]).
#[derive(Clone, Copy, Debug)]
pub struct Writer {
    /// One line for `cache export --format`'s help (no final period).
    pub about: &'static str,
    /// What a cache lacks when a folder format has nothing to write, in
    /// words ("holds no …"); file formats always write their one file.
    pub lacks: &'static str,
    /// The converter (which keeps an imported file's exact text where the
    /// entries are unchanged).
    pub export: fn(&CacheData) -> Exported,
}

/// What importing a document (or a folder) gives: the entries, what was
/// skipped, and a line for each thing skipped or guessed.
#[derive(Clone, Debug, Default)]
pub struct Imported {
    /// The entries that imported, with the environment in the metadata.
    pub data: CacheData,
    /// One line per thing skipped, guessed or noticed, each naming it.
    pub warnings: Vec<String>,
    /// Entries skipped because they did not parse (kept for the export
    /// where the format can).
    pub skipped: usize,
}

/// A cache in a format, not written yet.
#[derive(Clone, Debug, Default)]
pub struct Exported {
    /// (path relative to the output folder, content), sorted by path; for
    /// a one-file format, one file whose path is empty (the output
    /// itself).
    pub files: Vec<(String, String)>,
    /// One line per entry left out or guess made.
    pub warnings: Vec<String>,
    /// Entries written.
    pub written: usize,
    /// Entries left out (see `warnings`).
    pub skipped: usize,
}

impl Exported {
    /// The text of a one-file format's output (its first file's; empty
    /// when there is none).
    pub fn text(&self) -> &str {
        self.files.first().map_or("", |(_, text)| text)
    }
}

/// One file being read: its path, its bytes, and its document, parsed at
/// most once ([`parse_document`]) for detection and the format alike.
pub struct Input<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    doc: OnceCell<Value>,
}

impl<'a> Input<'a> {
    /// The file at `path`, holding `bytes`.
    pub fn new(path: &'a Path, bytes: &'a [u8]) -> Input<'a> {
        Input { path, bytes, doc: OnceCell::new() }
    }

    /// Where the file lies.
    pub fn path(&self) -> &'a Path {
        self.path
    }

    /// Its name without folders (empty when it has none in UTF-8).
    pub fn file_name(&self) -> &'a str {
        self.path.file_name().and_then(|n| n.to_str()).unwrap_or("")
    }

    /// Its content.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Its content as JSON written by Python; a file that is not JSON is
    /// [`SourceError::NotJson`].
    pub fn document(&self) -> Result<&Value, SourceError> {
        if let Some(doc) = self.doc.get() {
            return Ok(doc);
        }
        let doc = parse_document(self.bytes)
            .map_err(|source| SourceError::NotJson { path: self.path.to_path_buf(), source })?;
        Ok(self.doc.get_or_init(|| doc))
    }
}
