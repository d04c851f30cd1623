//! Reading a cache file of any format ranktune knows — its own JSON, a
//! TensorRT-LLM autotuner cache, vLLM/SGLang fused-MoE configs (a file or
//! a folder of them), FlashInfer's autotuner cache, Triton's autotune
//! files (a file or a folder, such as Triton's cache directory) — deciding which from the file when the caller does
//! not say: what `cache import`, `merge` and `diff` read.
//!
//! Detection goes through the registry ([`crate::FORMATS`]) in its order:
//! first by path (a folder holding `*.autotune.json` files at any depth
//! down to [`crate::triton::MAX_FOLDER_DEPTH`], or a file so named, is
//! `triton`; any other folder, or a file named like a fused-MoE config, is
//! `vllm-moe`), then by the document, parsed once: a document with a
//! `format` field is a ranktune cache; one with Triton's `key` and
//! `configs_timings` lists is Triton's; one that looks like the
//! reference's (reference metadata, or sections keyed by tuples) is
//! TensorRT-LLM's; one with FlashInfer's `_metadata` or tuple keys
//! holding `[runner, tactic]` is FlashInfer's; anything else is
//! [`SourceError::Undetected`], whose message lists what was tried, never
//! a guess. A file of nothing but blanks is an empty cache in any format.
//!
//! This module owns the detection rule and the messages that name the
//! file. It never modifies, locks or moves the file it reads (a ranktune
//! cache is read as `FileStore::inspect` does, spool included), and never
//! logs: warnings are returned, each naming the file.

use crate::{Format, FormatError, Input, Layout, FORMATS};
use ranktune_cache::{read_cache_bytes, CacheData, CacheError};
use std::path::{Path, PathBuf};

/// The list of formats tried and what each looks for, for
/// [`SourceError::Undetected`].
fn tried() -> String {
    FORMATS.iter().map(|f| format!("{} ({})", f.name(), f.sign())).collect::<Vec<_>>().join("; ")
}

/// The formats that read folders and what their folders hold, for
/// [`SourceError::Folder`]: `triton (autotune files) and vllm-moe (config
/// files)`.
fn folder_formats() -> String {
    let named: Vec<String> = FORMATS
        .iter()
        .filter_map(|f| match f.layout() {
            Layout::Folder { holds } => Some(format!("{} ({holds})", f.name())),
            Layout::File => None,
        })
        .collect();
    match named.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => named.join(""),
    }
}

/// A cache file read into memory.
#[derive(Clone, Debug)]
pub struct Source {
    /// Its entries.
    pub data: CacheData,
    /// The format it was read as: the one asked for, or the one detected.
    /// `None` only for an empty file read without a format (there is
    /// nothing to detect).
    pub format: Option<&'static dyn Format>,
    /// Entries skipped because they did not parse.
    pub skipped: usize,
    /// The file held nothing but blanks (read as an empty cache).
    pub empty: bool,
    /// One line per problem (bad entry skipped, …), each naming the file.
    pub warnings: Vec<String>,
}

/// Why a cache file could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The file could not be read (missing, not a regular file, too large).
    #[error(transparent)]
    Read(CacheError),
    /// The file is not JSON (nor blank).
    #[error("{} cannot be read as a cache", path.display())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// What is wrong with its text.
        source: FormatError,
    },
    /// No format was given and the file's shape does not tell. The message
    /// lists the formats tried and names the CLI's `--format` flag, the
    /// way to say which.
    #[error(
        "cannot tell the format of {}: it matches none of the formats tried: {}; pass --format",
        path.display(),
        tried()
    )]
    Undetected {
        /// The file.
        path: PathBuf,
    },
    /// Read in a format, the file is not of it.
    #[error("{} is not {}", path.display(), format.noun())]
    Import {
        /// The file.
        path: PathBuf,
        /// The format it was read in.
        format: &'static dyn Format,
        /// Why not.
        source: FormatError,
    },
    /// A folder read in a folder format holds none of its files.
    #[error("{} holds no {what}", path.display())]
    NoFiles {
        /// The folder.
        path: PathBuf,
        /// The files looked for, in words.
        what: String,
    },
    /// A folder was given for a format whose caches are single files.
    #[error("{} is a folder; only {} read folders", path.display(), folder_formats())]
    Folder {
        /// The folder.
        path: PathBuf,
    },
    /// The store for a ranktune cache could not be set up from the
    /// environment (a malformed `RANKTUNE_LOCK_TIMEOUT`).
    #[error("cannot open {}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: CacheError,
    },
    /// Read as a ranktune cache, it is damaged or one this build must not
    /// touch.
    #[error("reading {}", path.display())]
    Ranktune {
        /// The file.
        path: PathBuf,
        /// Why.
        source: CacheError,
    },
}

impl SourceError {
    /// `source`, a reason `file` is not of `format`, naming the file.
    pub fn import(file: &Input<'_>, format: &'static dyn Format, source: FormatError) -> Self {
        SourceError::Import { path: file.path().to_path_buf(), format, source }
    }
}

/// The format a parsed document's shape says it is, if it says.
fn detect(doc: &serde_json::Value) -> Option<&'static dyn Format> {
    FORMATS.iter().copied().find(|f| f.detect(doc))
}

/// Reads the cache file (or folder) at `path` in `format`, or in the
/// format detected from it when `None` (see the module docs). Bad entries
/// are skipped and named in [`Source::warnings`]; a file that is not JSON
/// is an error and is left exactly as it is. A ranktune cache is read
/// through a `FileStore` configured from the environment, like every
/// store the CLI opens.
///
/// ```
/// use ranktune_formats::read_source;
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("ref.json");
/// std::fs::write(&path, r#"{"metadata": {"creation_timestamp": 0}}"#).unwrap();
/// let source = read_source(&path, None).unwrap();
/// assert_eq!(source.format.map(|f| f.name()), Some("trtllm"));
/// assert!(source.data.is_empty());
/// ```
pub fn read_source(
    path: &Path,
    format: Option<&'static dyn Format>,
) -> Result<Source, SourceError> {
    let path_buf = || path.to_path_buf();
    if path.is_dir() {
        let format = match format {
            Some(f) => f,
            None => FORMATS
                .iter()
                .copied()
                .find(|f| f.detect_path(path))
                .ok_or_else(|| SourceError::Undetected { path: path_buf() })?,
        };
        if format.layout() == Layout::File {
            return Err(SourceError::Folder { path: path_buf() });
        }
        let i = format.read_folder(path)?;
        return Ok(Source {
            data: i.data,
            format: Some(format),
            skipped: i.skipped,
            empty: false,
            warnings: i.warnings,
        });
    }
    let format = format.or_else(|| FORMATS.iter().copied().find(|f| f.detect_path(path)));
    let bytes = read_cache_bytes(path).map_err(SourceError::Read)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Source {
            data: CacheData::default(),
            format,
            skipped: 0,
            empty: true,
            warnings: vec![format!("{} is an empty file; it adds nothing", path.display())],
        });
    }
    let file = Input::new(path, &bytes);
    let format = match format {
        Some(f) => f,
        None => {
            detect(file.document()?).ok_or_else(|| SourceError::Undetected { path: path_buf() })?
        }
    };
    let i = format.read(&file)?;
    Ok(Source {
        warnings: i.warnings.iter().map(|w| format!("{}: {w}", path.display())).collect(),
        data: i.data,
        format: Some(format),
        skipped: i.skipped,
        empty: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::by_name;
    use ranktune_cache::{Entry, EntryKey, Section};
    use serde_json::Value;

    fn named(f: Option<&'static dyn Format>) -> Option<&'static str> {
        f.map(|f| f.name())
    }

    const RANKTUNE: &str = r#"{"format": "ranktune-cache", "version": "1.0", "rank_0": [
        {"op":"gemm","runner":"r","fingerprint":"f","bucket":[[8]],"runner_index":0,"tactic":3,
         "time_us":1.5,"checksum":"c","env":"e","created_unix":1},
        {"op":"gemm","runner":"r","fingerprint":"f","bucket":[[9]],"runner_index":0,"tactic":3,
         "time_us":-1,"checksum":"c","env":"e","created_unix":1}]}"#;
    const TRTLLM: &str = r#"{"metadata": {"lib_version": "1.2.0", "creation_timestamp": 0},
        "rank_0": {"('op', 'R', '0', ((8,),))": {"runner_id": 0, "tactic": "7", "min_time": 0.5}}}"#;

    fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn detection_by_shape() {
        let doc = |t: &str| serde_json::from_str::<Value>(t).unwrap();
        assert_eq!(named(detect(&doc(RANKTUNE))), Some("ranktune"));
        assert_eq!(named(detect(&doc(r#"{"format": "other"}"#))), Some("ranktune"));
        assert_eq!(named(detect(&doc(TRTLLM))), Some("trtllm"));
        assert_eq!(named(detect(&doc("{}"))), Some("trtllm"));
        assert_eq!(named(detect(&doc(r#"{"rank_0": []}"#))), None);
        assert_eq!(named(detect(&doc("[1]"))), None);
    }

    #[test]
    fn reads_either_format_and_names_the_file_in_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let ours = file(&dir, "ours.json", RANKTUNE);
        let s = read_source(&ours, None).unwrap();
        assert_eq!((named(s.format), s.skipped, s.empty), (Some("ranktune"), 1, false));
        assert_eq!(s.data.len(), 1);
        assert_eq!(s.warnings.len(), 1);
        assert!(s.warnings[0].starts_with(&format!("{}: ", ours.display())), "{:?}", s.warnings);
        let key = EntryKey {
            op: "gemm".into(),
            runner: "r".into(),
            fingerprint: "f".into(),
            bucket: ranktune_cache::sizes_bucket(&[vec![8]]),
        };
        let entry: &Entry = s.data.get(Section::Rank(0), &key).unwrap();
        assert_eq!(entry.time_us, 1.5);

        let theirs = file(&dir, "theirs.json", TRTLLM);
        let s = read_source(&theirs, None).unwrap();
        assert_eq!((named(s.format), s.data.len()), (Some("trtllm"), 1));
        // Told the format, it is not detected: a ranktune file read as
        // TensorRT-LLM's imports nothing.
        let s = read_source(&ours, by_name("trtllm")).unwrap();
        assert_eq!(named(s.format), Some("trtllm"));
        assert!(s.data.is_empty());
    }

    #[test]
    fn blank_files_are_empty_caches_and_other_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let blank = file(&dir, "blank.json", " \n");
        let s = read_source(&blank, None).unwrap();
        assert!(s.empty && s.data.is_empty() && s.format.is_none());
        assert_eq!(s.warnings, [format!("{} is an empty file; it adds nothing", blank.display())]);
        assert_eq!(named(read_source(&blank, by_name("trtllm")).unwrap().format), Some("trtllm"));

        let chain = |e: SourceError| ranktune_core::error_chain::Chain(&e).to_string();
        let bad = file(&dir, "bad.json", "{\"rank_0\": [");
        let e = chain(read_source(&bad, None).unwrap_err());
        assert!(
            e.starts_with(&format!("{} cannot be read as a cache: not valid JSON", bad.display())),
            "{e}"
        );
        let odd = file(&dir, "odd.json", "{\"rank_0\": []}");
        let e = chain(read_source(&odd, None).unwrap_err());
        assert!(e.starts_with(&format!("cannot tell the format of {}", odd.display())), "{e}");
        assert!(e.ends_with("pass --format"), "{e}");
        let list = file(&dir, "list.json", "[1]");
        let e = chain(read_source(&list, by_name("trtllm")).unwrap_err());
        assert!(e.starts_with(&format!("{} is not a TensorRT-LLM cache: ", list.display())), "{e}");
        let theirs = file(&dir, "theirs.json", TRTLLM);
        let e = chain(read_source(&theirs, by_name("ranktune")).unwrap_err());
        assert!(e.starts_with(&format!("reading {}: ", theirs.display())), "{e}");
        let missing = dir.path().join("missing.json");
        let e = chain(read_source(&missing, None).unwrap_err());
        assert!(e.starts_with(&format!("reading {}", missing.display())), "{e}");
    }
}
