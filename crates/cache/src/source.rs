//! Reading a cache file of any format ranktune knows — its own JSON, a
//! TensorRT-LLM autotuner cache, vLLM/SGLang fused-MoE configs (a file or
//! a folder of them), FlashInfer's autotuner cache, Triton's autotune
//! files (a file or a folder, such as Triton's cache directory) — deciding which from the file when the caller does
//! not say: what `cache import`, `merge` and `diff` read.
//!
//! Detection, in this order: a folder holding `*.autotune.json` files (at
//! any depth down to [`MAX_FOLDER_DEPTH`]), or a file so named (see
//! [`crate::triton::looks_like_triton_name`]), is `triton`; any other
//! folder, or a file named like a fused-MoE
//! config (see [`crate::vllm_moe::looks_like_vllm_moe`]), is `vllm-moe`; a
//! document with a `format` field is a ranktune cache; one that looks like
//! the reference's (reference metadata, or sections keyed by tuples, see
//! [`crate::trtllm::looks_like_trtllm`]) is TensorRT-LLM's; one with
//! FlashInfer's `_metadata` or tuple keys holding `[runner, tactic]` (see
//! [`crate::flashinfer::looks_like_flashinfer`]) is FlashInfer's; one with
//! Triton's `key` and `configs_timings` lists (see
//! [`crate::triton::looks_like_triton`]) is Triton's; anything else
//! is [`SourceError::Undetected`], whose message lists what was tried,
//! never a guess. A file of nothing but blanks is an empty cache in any
//! format.
//!
//! This module owns the detection rule and its messages. It never modifies,
//! locks or moves the file it reads (a ranktune cache is read as
//! [`FileStore::inspect`] does, spool included), and never logs: warnings
//! are returned, each naming the file.

use crate::file::{read_cache_bytes, FileStore};
use crate::flashinfer::{self, FlashinferError};
use crate::store::Store;
use crate::triton::{self, TritonError};
use crate::trtllm::{self, ConvertError};
use crate::vllm_moe::{self, MoeError};
use crate::{CacheData, CacheError};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The formats of cache files ranktune reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceFormat {
    /// A ranktune cache file.
    Ranktune,
    /// A TensorRT-LLM autotuner cache file.
    Trtllm,
    /// vLLM's / SGLang's tuned fused-MoE config files (a file or a folder).
    VllmMoe,
    /// FlashInfer's autotuner cache file.
    Flashinfer,
    /// Triton's autotune files (`<kernel>.autotune.json`; a file or a
    /// folder such as Triton's cache directory).
    Triton,
}

impl SourceFormat {
    /// Every format, in the order detection tries them.
    pub const ALL: [SourceFormat; 5] = [
        SourceFormat::Triton,
        SourceFormat::VllmMoe,
        SourceFormat::Ranktune,
        SourceFormat::Trtllm,
        SourceFormat::Flashinfer,
    ];

    /// The format's name: `ranktune`, `trtllm`, `vllm-moe`, `flashinfer`,
    /// `triton`.
    pub fn name(self) -> &'static str {
        match self {
            SourceFormat::Ranktune => "ranktune",
            SourceFormat::Trtllm => "trtllm",
            SourceFormat::VllmMoe => "vllm-moe",
            SourceFormat::Flashinfer => "flashinfer",
            SourceFormat::Triton => "triton",
        }
    }

    /// What detection looks for, in words (for the error listing what
    /// was tried).
    fn sign(self) -> &'static str {
        match self {
            SourceFormat::Ranktune => "a \"format\" field",
            SourceFormat::Trtllm => {
                "\"metadata\" with creation_timestamp or device_capability, or \
                 rank_<N> sections keyed by tuples"
            }
            SourceFormat::Triton => {
                "a file named <kernel>.autotune.json, a folder holding such files, or \
                 \"key\" and \"configs_timings\" lists"
            }
            SourceFormat::VllmMoe => {
                "a folder, or a file named E=<experts>,N=<n>,device_name=<GPU>\
                 [,dtype=…][,block_shape=[…]].json"
            }
            SourceFormat::Flashinfer => {
                "\"_metadata\" with flashinfer_version or gpu_name, or members keyed by \
                 tuples holding [runner, tactic]"
            }
        }
    }
}

/// The list of formats tried and what each looks for, for
/// [`SourceError::Undetected`].
fn tried() -> String {
    SourceFormat::ALL
        .iter()
        .map(|f| format!("{} ({})", f.name(), f.sign()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A cache file read into memory.
#[derive(Clone, Debug)]
pub struct Source {
    /// Its entries.
    pub data: CacheData,
    /// The format it was read as: the one asked for, or the one detected.
    /// `None` only for an empty file read without a format (there is
    /// nothing to detect).
    pub format: Option<SourceFormat>,
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
        source: ConvertError,
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
    /// Read as fused-MoE configs, the file is not one.
    #[error("{} is not a fused-MoE config file", path.display())]
    NotVllmMoe {
        /// The file.
        path: PathBuf,
        /// Why not.
        source: MoeError,
    },
    /// Read as FlashInfer's format, it is not such a cache.
    #[error("{} is not a FlashInfer autotuner cache", path.display())]
    NotFlashinfer {
        /// The file.
        path: PathBuf,
        /// Why not.
        source: FlashinferError,
    },
    /// Read as a Triton autotune file, it is not one.
    #[error("{} is not a Triton autotune file", path.display())]
    NotTriton {
        /// The file.
        path: PathBuf,
        /// Why not.
        source: TritonError,
    },
    /// A folder read as Triton's holds no autotune file.
    #[error(
        "{} holds no Triton autotune files (<kernel>.autotune.json, looked {MAX_FOLDER_DEPTH} \
         folders deep)",
        path.display()
    )]
    NoAutotuneFiles {
        /// The folder.
        path: PathBuf,
    },
    /// A folder holds no fused-MoE config file.
    #[error(
        "{} holds no fused-MoE config files (named E=<experts>,N=<n>,device_name=<GPU>….json)",
        path.display()
    )]
    NoConfigs {
        /// The folder.
        path: PathBuf,
    },
    /// A folder was given for a format whose caches are single files.
    #[error(
        "{} is a folder; only vllm-moe (config files) and triton (autotune files) read folders",
        path.display()
    )]
    Folder {
        /// The folder.
        path: PathBuf,
    },
    /// Read as TensorRT-LLM's format, it is not such a cache.
    #[error("{} is not a TensorRT-LLM cache", path.display())]
    NotTrtllm {
        /// The file.
        path: PathBuf,
        /// Why not.
        source: ConvertError,
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

/// The format a parsed document's shape says it is, if it says.
fn detect(doc: &Value) -> Option<SourceFormat> {
    if doc.get("format").is_some() {
        Some(SourceFormat::Ranktune)
    } else if triton::looks_like_triton(doc) {
        Some(SourceFormat::Triton)
    } else if trtllm::looks_like_trtllm(doc) {
        Some(SourceFormat::Trtllm)
    } else if flashinfer::looks_like_flashinfer(doc) {
        Some(SourceFormat::Flashinfer)
    } else {
        None
    }
}

/// Reads the cache file at `path` in `format`, or in the format detected
/// from its content when `None` (see the module docs). Bad entries are
/// skipped and named in [`Source::warnings`]; a file that is not JSON is an
/// error and is left exactly as it is. A ranktune cache is read through a
/// [`FileStore`] configured from the environment, like every store the
/// CLI opens.
///
/// ```
/// use ranktune_cache::{read_source, SourceFormat};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("ref.json");
/// std::fs::write(&path, r#"{"metadata": {"creation_timestamp": 0}}"#).unwrap();
/// let source = read_source(&path, None).unwrap();
/// assert_eq!(source.format, Some(SourceFormat::Trtllm));
/// assert!(source.data.is_empty());
/// ```
pub fn read_source(path: &Path, format: Option<SourceFormat>) -> Result<Source, SourceError> {
    if path.is_dir() {
        return match format {
            Some(SourceFormat::Triton) => read_triton_folder(path),
            None if !autotune_files(path).is_empty() => read_triton_folder(path),
            None | Some(SourceFormat::VllmMoe) => read_moe_folder(path),
            Some(_) => Err(SourceError::Folder { path: path.to_path_buf() }),
        };
    }
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let format = match format {
        None if triton::looks_like_triton_name(file_name) => Some(SourceFormat::Triton),
        None if vllm_moe::looks_like_vllm_moe(file_name) => Some(SourceFormat::VllmMoe),
        other => other,
    };
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
    let path_buf = || path.to_path_buf();
    if format == Some(SourceFormat::Triton) {
        // Python's `Infinity` stays what it is (parse_document would make
        // it null); the importer reads it.
        let i = triton::import_file(&triton_path(path), &bytes)
            .map_err(|source| SourceError::NotTriton { path: path.to_path_buf(), source })?;
        return Ok(Source {
            warnings: i.warnings.iter().map(|w| format!("{}: {w}", path.display())).collect(),
            data: i.data,
            format,
            skipped: i.skipped,
            empty: false,
        });
    }
    let doc = trtllm::parse_document(&bytes)
        .map_err(|source| SourceError::NotJson { path: path_buf(), source })?;
    let format = match format {
        Some(f) => f,
        None => detect(&doc).ok_or_else(|| SourceError::Undetected { path: path_buf() })?,
    };
    let named = |w: &String| format!("{}: {w}", path.display());
    let imported = |format, data, warnings: &[String], skipped| Source {
        warnings: warnings.iter().map(named).collect(),
        data,
        format: Some(format),
        skipped,
        empty: false,
    };
    match format {
        SourceFormat::Triton => {
            let i = triton::import_file(&triton_path(path), &bytes)
                .map_err(|source| SourceError::NotTriton { path: path_buf(), source })?;
            Ok(imported(format, i.data, &i.warnings, i.skipped))
        }
        SourceFormat::Flashinfer => {
            let i = flashinfer::import_bytes(&bytes)
                .map_err(|source| SourceError::NotFlashinfer { path: path_buf(), source })?;
            Ok(imported(format, i.data, &i.warnings, i.skipped))
        }
        SourceFormat::VllmMoe => {
            let i = vllm_moe::import_file(file_name, &bytes)
                .map_err(|source| SourceError::NotVllmMoe { path: path_buf(), source })?;
            Ok(imported(format, i.data, &i.warnings, i.skipped))
        }
        SourceFormat::Trtllm => {
            let i = trtllm::import_bytes(&bytes)
                .map_err(|source| SourceError::NotTrtllm { path: path_buf(), source })?;
            Ok(imported(format, i.data, &i.warnings, i.skipped))
        }
        SourceFormat::Ranktune => {
            let store = FileStore::from_env(path)
                .map_err(|source| SourceError::Open { path: path_buf(), source })?;
            let loaded = store
                .inspect()
                .map_err(|source| SourceError::Ranktune { path: path_buf(), source })?;
            Ok(Source {
                warnings: loaded.warnings.iter().map(named).collect(),
                data: loaded.data,
                format: Some(format),
                skipped: loaded.bad_entries,
                empty: false,
            })
        }
    }
}

/// How deep [`read_source`] looks for autotune files in a folder: Triton's
/// cache directory holds them one level down (`<hash>/<kernel>.autotune.json`);
/// a folder of such caches (one per GPU) two.
pub const MAX_FOLDER_DEPTH: usize = 4;

/// The path a single autotune file is recorded under: its folder's name
/// too when that looks like one of Triton's cache folders (a hash: 16 or
/// more letters and digits), so an export puts it back there.
fn triton_path(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let parent = path.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str());
    match parent {
        Some(dir) if dir.len() >= 16 && dir.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            format!("{dir}/{name}")
        }
        _ => name.to_string(),
    }
}

/// The `*.autotune.json` files under `dir`, as (path, path relative to
/// `dir` with `/` between parts), sorted; at most [`MAX_FOLDER_DEPTH`]
/// folders deep, never following links to folders. Unreadable folders
/// are passed over.
fn autotune_files(dir: &Path) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, rel: &str, depth: usize, out: &mut Vec<(PathBuf, String)>) {
        let Ok(listing) = std::fs::read_dir(dir) else { return };
        for e in listing.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_string) else { continue };
            let Ok(kind) = e.file_type() else { continue };
            let rel = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            if kind.is_dir() {
                if depth < MAX_FOLDER_DEPTH {
                    walk(&e.path(), &rel, depth + 1, out);
                }
            } else if triton::looks_like_triton_name(&name) {
                out.push((e.path(), rel));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", 1, &mut out);
    out.sort();
    out
}

/// Reads every autotune file under a folder (see [`autotune_files`]);
/// other files (a Triton cache holds many compiled kernels) are passed
/// over in silence. A file that does not import, or that holds the same
/// kernel and key as one read before, is named in a warning and skipped
/// (counted as one skipped entry).
fn read_triton_folder(dir: &Path) -> Result<Source, SourceError> {
    if let Err(e) = std::fs::read_dir(dir) {
        return Err(SourceError::Read(CacheError::Io {
            action: "listing",
            path: dir.to_path_buf(),
            source: e,
        }));
    }
    let files = autotune_files(dir);
    if files.is_empty() {
        return Err(SourceError::NoAutotuneFiles { path: dir.to_path_buf() });
    }
    let mut out = Source {
        data: CacheData::default(),
        format: Some(SourceFormat::Triton),
        skipped: 0,
        empty: false,
        warnings: Vec::new(),
    };
    let mut read_from: std::collections::BTreeMap<crate::EntryKey, PathBuf> = Default::default();
    for (path, rel) in files {
        let imported = read_cache_bytes(&path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| triton::import_file(&rel, &bytes).map_err(|e| e.to_string()));
        let imported = match imported {
            Ok(i) => i,
            Err(why) => {
                out.warnings.push(format!("{}: {why}; skipped", path.display()));
                out.skipped += 1;
                continue;
            }
        };
        let keys: Vec<crate::EntryKey> = imported.data.iter().map(|(_, k, _)| k.clone()).collect();
        if let Some(first) = keys.iter().find_map(|k| read_from.get(k)) {
            out.warnings.push(format!(
                "{}: the same kernel and tuning key as {} (another build of the kernel); \
                 skipped",
                path.display(),
                first.display()
            ));
            out.skipped += 1;
            continue;
        }
        for k in keys {
            read_from.insert(k, path.clone());
        }
        out.warnings.extend(imported.warnings.iter().map(|w| format!("{}: {w}", path.display())));
        out.skipped += imported.skipped;
        out.data.apply(imported.data);
    }
    Ok(out)
}

/// Reads every fused-MoE config file of a folder (sorted by name). Other
/// files, and config files that do not parse, are named in warnings and
/// skipped (a bad file counts as one skipped entry).
fn read_moe_folder(dir: &Path) -> Result<Source, SourceError> {
    let read_err = |e: std::io::Error| {
        SourceError::Read(CacheError::Io { action: "listing", path: dir.to_path_buf(), source: e })
    };
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    names.sort();
    let mut out = Source {
        data: CacheData::default(),
        format: Some(SourceFormat::VllmMoe),
        skipped: 0,
        empty: false,
        warnings: Vec::new(),
    };
    let mut found = 0;
    for path in names {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !vllm_moe::looks_like_vllm_moe(name) || path.is_dir() {
            out.warnings
                .push(format!("{}: not named like a fused-MoE config; skipped", path.display()));
            continue;
        }
        found += 1;
        let imported = read_cache_bytes(&path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| vllm_moe::import_file(name, &bytes).map_err(|e| e.to_string()));
        match imported {
            Ok(imported) => {
                out.warnings
                    .extend(imported.warnings.iter().map(|w| format!("{}: {w}", path.display())));
                out.skipped += imported.skipped;
                out.data.apply(imported.data);
            }
            Err(why) => {
                out.warnings.push(format!("{}: {why}; skipped", path.display()));
                out.skipped += 1;
            }
        }
    }
    if found == 0 {
        return Err(SourceError::NoConfigs { path: dir.to_path_buf() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Entry, EntryKey, Section};

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
        assert_eq!(detect(&doc(RANKTUNE)), Some(SourceFormat::Ranktune));
        assert_eq!(detect(&doc(r#"{"format": "other"}"#)), Some(SourceFormat::Ranktune));
        assert_eq!(detect(&doc(TRTLLM)), Some(SourceFormat::Trtllm));
        assert_eq!(detect(&doc("{}")), Some(SourceFormat::Trtllm));
        assert_eq!(detect(&doc(r#"{"rank_0": []}"#)), None);
        assert_eq!(detect(&doc("[1]")), None);
    }

    #[test]
    fn reads_either_format_and_names_the_file_in_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let ours = file(&dir, "ours.json", RANKTUNE);
        let s = read_source(&ours, None).unwrap();
        assert_eq!((s.format, s.skipped, s.empty), (Some(SourceFormat::Ranktune), 1, false));
        assert_eq!(s.data.len(), 1);
        assert_eq!(s.warnings.len(), 1);
        assert!(s.warnings[0].starts_with(&format!("{}: ", ours.display())), "{:?}", s.warnings);
        let key = EntryKey {
            op: "gemm".into(),
            runner: "r".into(),
            fingerprint: "f".into(),
            bucket: vec![vec![8]],
        };
        let entry: &Entry = s.data.get(Section::Rank(0), &key).unwrap();
        assert_eq!(entry.time_us, 1.5);

        let theirs = file(&dir, "theirs.json", TRTLLM);
        let s = read_source(&theirs, None).unwrap();
        assert_eq!((s.format, s.data.len()), (Some(SourceFormat::Trtllm), 1));
        // Told the format, it is not detected: a ranktune file read as
        // TensorRT-LLM's imports nothing.
        let s = read_source(&ours, Some(SourceFormat::Trtllm)).unwrap();
        assert_eq!(s.format, Some(SourceFormat::Trtllm));
        assert!(s.data.is_empty());
    }

    #[test]
    fn blank_files_are_empty_caches_and_other_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let blank = file(&dir, "blank.json", " \n");
        let s = read_source(&blank, None).unwrap();
        assert!(s.empty && s.data.is_empty() && s.format.is_none());
        assert_eq!(s.warnings, [format!("{} is an empty file; it adds nothing", blank.display())]);
        assert_eq!(
            read_source(&blank, Some(SourceFormat::Trtllm)).unwrap().format,
            Some(SourceFormat::Trtllm)
        );

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
        let e = chain(read_source(&list, Some(SourceFormat::Trtllm)).unwrap_err());
        assert!(e.starts_with(&format!("{} is not a TensorRT-LLM cache: ", list.display())), "{e}");
        let theirs = file(&dir, "theirs.json", TRTLLM);
        let e = chain(read_source(&theirs, Some(SourceFormat::Ranktune)).unwrap_err());
        assert!(e.starts_with(&format!("reading {}: ", theirs.display())), "{e}");
        let missing = dir.path().join("missing.json");
        let e = chain(read_source(&missing, None).unwrap_err());
        assert!(e.starts_with(&format!("reading {}", missing.display())), "{e}");
    }
}
