//! `ranktune.Cache`: the file store from Python. Every read, save, import
//! and export runs with the GIL released; entries are converted to and from
//! Python before and after, never while the store's lock is held.
//!
//! Owns only argument and result conversion. The saving, merging and
//! checking are ranktune-cache's, format conversion ranktune-formats' (whose
//! registry names the formats `format=` takes); this module must never
//! write a cache file itself.

use crate::convert;
use crate::errors;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use ranktune_cache::{
    place_in_rank, read_cache_bytes, CacheData, CacheError, CacheLocation, Candidate, Dim, Entry,
    EntryKey, Identity, Section, Store,
};
use ranktune_core::error_chain::Chain;
use ranktune_formats::{read_source, ExportError, Format, Source, SourceError, FORMATS};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Cache>()?;
    Ok(())
}

/// A ranktune cache — a file, or a Redis server — shared by every rank and
/// process of a job.
#[pyclass(module = "ranktune", frozen)]
pub struct Cache {
    path: PathBuf,
    location: CacheLocation,
}

impl Cache {
    fn at(location: CacheLocation) -> Cache {
        let path = match location.as_path() {
            Some(p) => p.to_path_buf(),
            None => PathBuf::from(location.to_string()),
        };
        Cache { path, location }
    }

    /// Where the cache lives (a file, or a Redis server), for the strategy
    /// coordinator's choice of meeting place.
    pub(crate) fn location_ref(&self) -> &CacheLocation {
        &self.location
    }
}

/// Warnings the store returned, as Python `RuntimeWarning`s.
pub(crate) fn warn_all(py: Python<'_>, warnings: &[String]) -> PyResult<()> {
    warnings.iter().try_for_each(|w| warn_at(py, w, 1))
}

/// `text` as a Python `RuntimeWarning` at stack level `level` (1: the
/// Python frame that called the binding).
pub(crate) fn warn_at(py: Python<'_>, text: &str, level: i32) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
    let text = std::ffi::CString::new(text.replace('\0', " "))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    PyErr::warn(py, &category, &text, level)
}

fn store(location: &CacheLocation) -> PyResult<Box<dyn Store + Send + Sync>> {
    crate::logs::ensure();
    location.open().map_err(|e| errors::cache(&format!("cannot open {location}"), e))
}

/// One dict given to `save` as (section, key, entry).
pub(crate) fn parse_entry(
    d: &Value,
    i: usize,
    current: &str,
) -> PyResult<(Section, EntryKey, Entry)> {
    let bad = |why: String| PyValueError::new_err(format!("entries[{i}]: {why}"));
    let obj = d.as_object().ok_or_else(|| bad("expected a dict".into()))?;
    let s = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    let section = match (obj.get("section").and_then(Value::as_str), obj.get("rank")) {
        (Some(name), _) => Section::parse(name).ok_or_else(|| {
            bad(format!("section {name:?} is neither \"shared\" nor \"rank_<N>\""))
        })?,
        (None, None | Some(Value::Null)) => Section::Shared,
        (None, Some(r)) => Section::Rank(
            r.as_u64()
                .and_then(|r| u32::try_from(r).ok())
                .ok_or_else(|| bad(format!("rank {r} is not a non-negative integer or None")))?,
        ),
    };
    let op = s("op").ok_or_else(|| bad("\"op\" (str) is required".into()))?;
    let runner = s("runner").ok_or_else(|| bad("\"runner\" (str) is required".into()))?;
    let bucket: Vec<Vec<Dim>> = match obj.get("bucket") {
        Some(b) => int_dims(b).ok_or_else(|| {
            bad("\"bucket\" must be a list of lists of ints, e.g. [[64, 64]]".into())
        })?,
        None => return Err(bad("\"bucket\" is required, e.g. [[64, 64]]".into())),
    };
    let time_us = obj
        .get("time_us")
        .and_then(Value::as_f64)
        .ok_or_else(|| bad("\"time_us\" (float, microseconds) is required".into()))?;
    let candidates: Vec<Candidate> = match obj.get("candidates") {
        None | Some(Value::Null) => Vec::new(),
        Some(c) => serde_json::from_value(c.clone())
            .map_err(|e| bad(format!("\"candidates\" is malformed: {e}")))?,
    };
    let key = EntryKey { op, runner, fingerprint: s("fingerprint").unwrap_or_default(), bucket };
    let entry = Entry {
        runner_index: obj
            .get("runner_index")
            .and_then(Value::as_u64)
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0),
        tactic: obj.get("tactic").cloned().unwrap_or(Value::Null),
        time_us,
        candidates,
        checksum: s("checksum").unwrap_or_default(),
        env: s("env").unwrap_or_else(|| current.to_string()),
        created_unix: obj
            .get("created_unix")
            .and_then(Value::as_u64)
            .unwrap_or_else(ranktune_core::clock::unix_now),
    };
    if key.op.is_empty() || key.runner.is_empty() {
        return Err(bad("\"op\" and \"runner\" must not be empty".into()));
    }
    if !(entry.time_us.is_finite() && entry.time_us >= 0.0) {
        return Err(bad(format!("time_us is {}, expected a finite time >= 0", entry.time_us)));
    }
    Ok((section, key, entry))
}

/// `entries` (dicts as `Cache.save` takes them) as one update, with this
/// environment's identity when an entry is of it.
pub(crate) fn entries_update(entries: &Bound<'_, PyAny>) -> PyResult<CacheData> {
    let current = Identity::current();
    let digest = current.digest();
    let mut update = CacheData::default();
    for (i, item) in entries.try_iter()?.enumerate() {
        let v = convert::from_py(&item?, &format!("entries[{i}]"))?;
        let (s, k, e) = parse_entry(&v, i, &digest)?;
        update.insert(s, k, e);
    }
    if update.iter().any(|(_, _, e)| e.env == digest) {
        update.metadata.environments.insert(digest, current);
    }
    Ok(update)
}

/// A bucket's dims as JSON gives them: sizes, and the negative integers
/// other tuners write (TensorRT-LLM's `-1`) or a Python bucket rule
/// returns; `None` for anything else.
fn int_dims(b: &Value) -> Option<Vec<Vec<Dim>>> {
    let dims = |v: &Value| -> Option<Vec<Dim>> {
        v.as_array()?
            .iter()
            .map(|d| {
                d.as_u64().map(Dim::size).or_else(|| d.as_i64().and_then(|x| Dim::int(x.into())))
            })
            .collect()
    };
    b.as_array()?.iter().map(dims).collect()
}

/// Reads a cache file of any format with ranktune-formats' detection (the same as `ranktune cache import`). Runs without
/// the GIL.
fn load_source(path: &Path, format: Option<&'static dyn Format>) -> Result<Source, String> {
    read_source(path, format).map_err(|e| match e {
        SourceError::Undetected { path } => format!(
            "cannot tell the format of {}: it has no \"format\" field (ranktune) and does not \
             look like a TensorRT-LLM cache; pass format=\"ranktune\" or format=\"trtllm\"",
            path.display()
        ),
        other => Chain(&other).to_string(),
    })
}

#[pymethods]
impl Cache {
    /// Opens the cache at `location`: a path (the file need not exist
    /// yet) or `redis://[user[:password]@]host[:port][/db][?prefix=NAME]`
    /// (the password may come from `RANKTUNE_REDIS_PASSWORD` instead).
    /// Nothing is read or connected until the first call.
    #[new]
    fn new(location: PathBuf) -> PyResult<Self> {
        if location.as_os_str().is_empty() {
            return Err(PyValueError::new_err(
                "the cache location is empty; pass a path such as tune.json",
            ));
        }
        let parsed = CacheLocation::parse_os(location.as_os_str())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Cache::at(parsed))
    }

    /// The cache the environment names (`RANKTUNE_CACHE`, else
    /// `TLLM_AUTOTUNER_CACHE_PATH`), or `None`: the rule `ranktune tune`
    /// follows (`CacheLocation::from_env`).
    #[staticmethod]
    fn from_env() -> PyResult<Option<Cache>> {
        let found = CacheLocation::from_env().map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(found.map(Cache::at))
    }

    /// Where the ranks meet for a collective strategy with this cache: its
    /// directory (absolute), or its Redis server (password redacted); two
    /// caches with one meeting place share one coordinator.
    #[getter]
    fn meeting_place(&self) -> String {
        self.location.meeting_place()
    }

    /// The cache file's path (for a Redis cache, its URL with any password
    /// redacted).
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The location as text (a path, or a URL with any password redacted).
    #[getter]
    fn location(&self) -> String {
        self.location.to_string()
    }

    fn __repr__(&self) -> String {
        format!("ranktune.Cache({:?})", self.location.to_string())
    }

    /// The entries (all, or only `rank_<rank>`'s) as dicts with the fields
    /// of `ranktune cache show --json`. Read-only: never locks or rewrites.
    /// A file that does not exist raises `ranktune.Error`, as `check()` does.
    #[pyo3(signature = (rank=None))]
    fn entries<'py>(&self, py: Python<'py>, rank: Option<u32>) -> PyResult<Bound<'py, PyList>> {
        // One rule with `check()` and `ranktune cache show`: reading a cache
        // file that is not there is an error, not an empty list.
        self.must_exist()?;
        let store = store(&self.location)?;
        let path = self.location.clone();
        let (loaded, rows) = py
            .allow_threads(move || -> Result<_, CacheError> {
                let loaded = store.inspect()?;
                let current = Identity::current().digest();
                let rows: Vec<Value> = loaded
                    .data
                    .iter()
                    .filter(|(s, _, _)| rank.is_none() || s.rank() == rank)
                    .map(|(s, k, e)| ranktune_cache::entry_listing(s, k, e, &current))
                    .collect();
                Ok((loaded.warnings, rows))
            })
            .map_err(|e| {
                errors::cache(&format!("cannot show {path}; Cache.check() says more"), e)
            })?;
        warn_all(py, &loaded)?;
        let items = rows.iter().map(|r| convert::to_py(py, r)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The blocklist's records (tactics known to fail: crashed, timed out,
    /// ran out of memory or failed validation) as dicts with the fields of
    /// `ranktune cache show --json`'s `blocklist`. Read-only.
    fn blocklist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.must_exist()?;
        let store = store(&self.location)?;
        let path = self.location.clone();
        let (warnings, rows) = py
            .allow_threads(move || -> Result<_, CacheError> {
                let loaded = store.inspect()?;
                let current = Identity::current().digest();
                let rows: Vec<Value> = loaded
                    .data
                    .blocklist
                    .iter()
                    .map(|(k, r)| ranktune_cache::block_listing(k, r, &current))
                    .collect();
                Ok((loaded.warnings, rows))
            })
            .map_err(|e| {
                errors::cache(&format!("cannot show {path}; Cache.check() says more"), e)
            })?;
        warn_all(py, &warnings)?;
        let items = rows.iter().map(|r| convert::to_py(py, r)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Merges `entries` (dicts like those `entries()` returns; `op`,
    /// `runner`, `bucket` and `time_us` required) into the cache through the
    /// locked, merging, crash-safe save. Returns `{"written", "total"}`.
    fn save<'py>(
        &self,
        py: Python<'py>,
        entries: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let update = entries_update(entries)?;
        let store = store(&self.location)?;
        let report = py
            .allow_threads(|| store.save(&update))
            .map_err(|e| errors::cache(&format!("saving into {}", self.location), e))?;
        warn_all(py, &report.warnings)?;
        let d = PyDict::new(py);
        d.set_item("written", report.written)?;
        d.set_item("total", report.total)?;
        Ok(d)
    }

    /// The cache's problems, one line each, by the rules of
    /// `ranktune cache check` (an empty list means healthy).
    fn check(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let loc = self.location.clone();
        if let Some(path) = loc.as_path().filter(|p| std::fs::symlink_metadata(p).is_err()) {
            return Err(errors::msg(format!("{} does not exist", path.display())));
        }
        let store = store(&loc)?;
        py.allow_threads(move || match store.inspect() {
            Ok(loaded) => {
                let empty = loc.as_path().is_some_and(|path| {
                    read_cache_bytes(path).is_ok_and(|b| b.iter().all(u8::is_ascii_whitespace))
                });
                if empty {
                    return Ok(vec![format!(
                        "empty file \u{2014} {loc} holds no cache at all (0 bytes or only blanks); the tuner \
                         reads it as an empty cache. Delete it, or let `ranktune tune` write it"
                    )]);
                }
                let mut lines = loaded.warnings;
                lines.extend(
                    ranktune_cache::check(&loaded.data, &Identity::current().digest())
                        .iter()
                        .map(ToString::to_string),
                );
                Ok(lines)
            }
            Err(e @ (CacheError::Corrupt { .. } | CacheError::Unsupported { .. })) => {
                Ok(vec![format!("unusable: {e}")])
            }
            Err(e) => Err(e),
        })
        .map_err(|e| errors::cache(&format!("cannot check {}", self.location), e))
    }

    /// Imports a ranktune or TensorRT-LLM cache file (`format` "auto",
    /// "ranktune" or "trtllm") through the same save as `save`. With `rank`,
    /// the source's rank section goes into `rank_<rank>` (`from_rank` picks
    /// one when the source has several). Returns `{"read", "format",
    /// "skipped", "written", "total"}`.
    #[pyo3(signature = (path, format="auto", rank=None, from_rank=None))]
    fn import_file<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        format: &str,
        rank: Option<u32>,
        from_rank: Option<u32>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let format = match format {
            "auto" => None,
            name => match ranktune_formats::by_name(name) {
                Some(f) => Some(f),
                None => {
                    let names: Vec<String> =
                        FORMATS.iter().map(|f| format!("{:?}", f.name())).collect();
                    return Err(PyValueError::new_err(format!(
                        "format={name:?}: use \"auto\" or one of {}",
                        names.join(", ")
                    )));
                }
            },
        };
        if from_rank.is_some() && rank.is_none() {
            return Err(PyValueError::new_err("from_rank needs rank (the section to place it in)"));
        }
        let store = store(&self.location)?;
        let target = self.location.clone();
        let (src, report) = py
            .allow_threads(move || -> Result<_, PyErrText> {
                let mut src = load_source(&path, format).map_err(PyErrText::Plain)?;
                if let Some(to) = rank {
                    src.data = place_in_rank(std::mem::take(&mut src.data), from_rank, to)
                        .map_err(|e| {
                            PyErrText::Plain(format!(
                                "placing {} into rank_{to}: {}",
                                path.display(),
                                Chain(&e)
                            ))
                        })?;
                }
                let report = store.save(&src.data).map_err(PyErrText::Cache)?;
                Ok((src, report))
            })
            .map_err(|e| match e {
                PyErrText::Plain(m) => errors::msg(m),
                PyErrText::Cache(e) => errors::cache(&format!("saving into {target}"), e),
            })?;
        warn_all(py, &src.warnings)?;
        warn_all(py, &report.warnings)?;
        let d = PyDict::new(py);
        d.set_item("read", src.data.len())?;
        d.set_item(
            "format",
            match (src.empty, src.format) {
                (false, Some(f)) => f.name(),
                _ => "empty",
            },
        )?;
        d.set_item("skipped", src.skipped)?;
        d.set_item("written", report.written)?;
        d.set_item("total", report.total)?;
        Ok(d)
    }

    /// Writes the cache in another tuner's format to `path`: `"trtllm"`
    /// (TensorRT-LLM) or `"flashinfer"` (one file), `"vllm-moe"` or
    /// `"triton"` (a folder of files), as `ranktune cache export` does —
    /// atomically, an existing file only with `force=True`. Returns
    /// `{"written", "skipped", "files"}`.
    #[pyo3(signature = (path, format="trtllm", force=false))]
    fn export<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        format: &str,
        force: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let Some(format) = ranktune_formats::by_name(format).filter(|f| f.writer().is_some())
        else {
            let names: Vec<String> =
                ranktune_formats::writable().map(|f| format!("{:?}", f.name())).collect();
            return Err(PyValueError::new_err(format!(
                "format={format:?}: use one of {}",
                names.join(", ")
            )));
        };
        if let Some(p) = self.location.as_path().filter(|p| !p.exists()) {
            return Err(errors::msg(format!("{} does not exist", p.display())));
        }
        let store = store(&self.location)?;
        let src = self.location.clone();
        let (warnings, exported) = py
            .allow_threads(move || -> Result<_, PyErrText> {
                let loaded = store.inspect().map_err(PyErrText::Cache)?;
                let exported = ranktune_formats::export(&loaded.data, format)
                    .map_err(|e| PyErrText::Plain(e.to_string()))?;
                let mut w = loaded.warnings;
                w.extend(exported.warnings.iter().cloned());
                let written = ranktune_formats::write(&path, format, &exported, force).map_err(
                    |e| match e {
                        e @ ExportError::Exists(_) => {
                            PyErrText::Plain(e.with_force_hint("force=True"))
                        }
                        ExportError::Cache(e) => {
                            PyErrText::Plain(format!("writing {}: {}", path.display(), Chain(&e)))
                        }
                        other => PyErrText::Plain(other.to_string()),
                    },
                )?;
                Ok((w, (exported.written, exported.skipped, written.len())))
            })
            .map_err(|e| match e {
                PyErrText::Plain(m) => errors::msg(m),
                PyErrText::Cache(e) => errors::cache(&format!("reading {src}"), e),
            })?;
        warn_all(py, &warnings)?;
        let d = PyDict::new(py);
        d.set_item("written", exported.0)?;
        d.set_item("skipped", exported.1)?;
        d.set_item("files", exported.2)?;
        Ok(d)
    }
}

impl Cache {
    /// An error when the cache is a file that does not exist: reading it
    /// would show an empty cache, and `check()` refuses it too.
    fn must_exist(&self) -> PyResult<()> {
        if let Some(path) =
            self.location.as_path().filter(|p| std::fs::symlink_metadata(p).is_err())
        {
            return Err(errors::msg(format!(
                "{} does not exist; a cache file appears with the first save",
                path.display()
            )));
        }
        Ok(())
    }
    /// The store behind this cache (for the autotune load in `rules`).
    pub(crate) fn open_store(&self) -> PyResult<Box<dyn Store + Send + Sync>> {
        store(&self.location)
    }

    /// The location as errors name it (any password redacted).
    pub(crate) fn describe(&self) -> &CacheLocation {
        &self.location
    }
}

/// An error produced without the GIL, turned into a Python one after.
enum PyErrText {
    Plain(String),
    Cache(CacheError),
}
