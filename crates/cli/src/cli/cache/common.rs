//! What several `cache` subcommands share: the `--format` flag (its values
//! from the formats' registry, `ranktune_formats::FORMATS`), reading a
//! source cache with its warnings logged, opening a store the same way
//! everywhere, and a few ways of printing cache values. Subcommand modules
//! use this one and never each other.

use anyhow::Context;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use ranktune_cache::{CacheError, CacheLocation, FileStore, Store, WonBy};
use ranktune_formats::{read_source, Source, FORMATS};
use std::path::Path;
use tracing::warn;

/// A `--format` value of the subcommands that read caches: `auto` (decide
/// from the file) or one of the registry's formats
/// (`ranktune_formats::FORMATS`).
#[derive(Clone, Copy, Debug)]
pub struct Format(Option<&'static dyn ranktune_formats::Format>);

/// The `--format` values of the subcommands that read caches: `auto`, then
/// every format of the registry, each with its help line.
pub(super) fn source_formats() -> impl TypedValueParser<Value = Format> {
    let auto = PossibleValue::new("auto")
        .help("Decide from the file's name and shape (the import says which)");
    let values = std::iter::once(auto)
        .chain(FORMATS.iter().map(|f| PossibleValue::new(f.name()).help(f.about())));
    PossibleValuesParser::new(values).map(|name| Format(ranktune_formats::by_name(&name)))
}

/// The `--format` values of `cache export`: the formats ranktune writes.
pub(super) fn export_formats(
) -> impl TypedValueParser<Value = &'static dyn ranktune_formats::Format> {
    let values = ranktune_formats::writable()
        .filter_map(|f| f.writer().map(|w| PossibleValue::new(f.name()).help(w.about)));
    PossibleValuesParser::new(values).try_map(|name| {
        ranktune_formats::by_name(&name).ok_or_else(|| format!("no format {name:?}"))
    })
}

/// The cache location an argument names: a file path, or a Redis URL
/// (`ranktune_cache::CacheLocation`, the one parser of locations).
pub(super) fn location(arg: &Path) -> anyhow::Result<CacheLocation> {
    Ok(CacheLocation::parse_os(arg.as_os_str())?)
}

/// How messages name the cache an argument names: the path, or the URL
/// with its password redacted.
pub(super) fn shown(arg: &Path) -> String {
    match CacheLocation::parse_os(arg.as_os_str()) {
        Ok(loc) => loc.to_string(),
        Err(_) => ranktune_cache::redact_text(&arg.to_string_lossy()),
    }
}

/// Reads one cache in the given (or detected) format, logging each warning
/// (bad entries skipped, an empty file). A file that is not JSON is an
/// error and is left exactly as it is. A Redis location is read as a
/// ranktune cache, without side effects.
pub(super) fn load_source(path: &Path, format: Format) -> anyhow::Result<Source> {
    let source = match location(path)? {
        CacheLocation::File(_) => read_source(path, format.0)?,
        loc @ CacheLocation::Redis(_) => {
            if format.0.is_some_and(|f| f.name() == "trtllm") {
                anyhow::bail!(
                    "{loc} is a ranktune cache on Redis; --format trtllm reads files only"
                );
            }
            let loaded = open_store(&loc)?.inspect().with_context(|| format!("reading {loc}"))?;
            Source {
                data: loaded.data,
                format: ranktune_formats::by_name("ranktune"),
                skipped: loaded.bad_entries,
                empty: false,
                warnings: loaded.warnings,
            }
        }
    };
    for w in &source.warnings {
        warn!("{w}");
    }
    Ok(source)
}

/// What `show` and `check` read: a ranktune cache through its store, or a
/// file in TensorRT-LLM's own format (what `ranktune.trtllm`'s drop-in
/// keeps) through the `trtllm` importer, so both read either in place.
pub(super) fn inspect_any(
    loc: &CacheLocation,
    store: &dyn Store,
) -> Result<ranktune_cache::Loaded, CacheError> {
    if let Some(path) = loc.as_path() {
        let is_trtllm = ranktune_cache::read_cache_bytes(path)
            .ok()
            .and_then(|b| ranktune_formats::parse_document(&b).ok())
            .is_some_and(|doc| {
                doc.get("format").is_none() && ranktune_formats::trtllm::looks_like_trtllm(&doc)
            });
        if is_trtllm {
            let source = read_source(path, ranktune_formats::by_name("trtllm")).map_err(|e| {
                CacheError::Invalid(ranktune_core::error_chain::Chain(&e).to_string())
            })?;
            return Ok(ranktune_cache::Loaded {
                data: source.data,
                warnings: source.warnings,
                bad_entries: source.skipped,
                moved_aside: None,
            });
        }
    }
    store.inspect()
}

/// True when the file at `path` holds nothing but blanks (0 bytes
/// included): the store reads it as an empty cache, but people should hear
/// that it is empty, not that it is a healthy cache.
pub(super) fn is_empty_file(loc: &CacheLocation) -> bool {
    loc.as_path().is_some_and(|path| {
        ranktune_cache::read_cache_bytes(path).is_ok_and(|b| b.iter().all(u8::is_ascii_whitespace))
    })
}

/// The store for `loc`, configured from the environment the same way for
/// every subcommand: a malformed `RANKTUNE_LOCK_TIMEOUT` (or Redis
/// variable) is an error.
pub(super) fn open_store(loc: &CacheLocation) -> anyhow::Result<Box<dyn Store + Send + Sync>> {
    loc.open().with_context(|| format!("cannot open {loc}"))
}

/// Whether `loc` exists: a file that is there (even a dangling link), or
/// saves waiting in its spool (a first save killed before its fold: the
/// tuner loads them, so `show` and `check` read them too); a Redis location
/// always does (an empty prefix is an empty cache).
pub(super) fn exists(loc: &CacheLocation) -> bool {
    match loc {
        CacheLocation::File(p) => {
            std::fs::symlink_metadata(p).is_ok() || FileStore::new(p).has_waiting_saves()
        }
        CacheLocation::Redis(_) => true,
    }
}

/// The rule that decided a conflict, in words.
pub(super) fn won_by_text(w: WonBy) -> &'static str {
    match w {
        WonBy::Newer => "newer",
        WonBy::Faster => "same age, faster",
        WonBy::Earlier => "same age and time, earlier input",
    }
}

/// `64x64,64`: a bucket as people read it, the same label `tune` prints
/// (see `ranktune_cache::bucket_label`).
pub(super) fn bucket_text(bucket: &[Vec<ranktune_cache::Dim>]) -> String {
    ranktune_cache::bucket_label(bucket)
}

/// A tactic in at most `max` characters, the same label `tune` prints (see
/// `ranktune_cache::tactic_label`).
pub(super) fn tactic_text(t: &serde_json::Value, max: usize) -> String {
    crate::cli::table::clip(&ranktune_cache::tactic_label(t), max)
}

/// True when `a` and `b` name the same file once resolved: the same path,
/// a symlink to it, or a hard link (same device and inode). False when
/// either does not exist.
pub(super) fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    }
}

/// What to do about a cache that cannot be read, for the message of a
/// command that only reads it (`show`, `check`, `prune`): a damaged file is
/// set aside by the next save (which then starts an empty cache), or can be
/// deleted; any other error's own text already says what to do.
pub(super) fn unreadable_advice(e: &ranktune_cache::CacheError, loc: &CacheLocation) -> String {
    match e {
        ranktune_cache::CacheError::Corrupt { .. } => format!(
            "the next save (`ranktune tune`, `cache import`) sets it aside as \
             {loc}.corrupt-<UTC time> and starts an empty cache; or delete it; \
             the entries in it cannot be recovered by ranktune"
        ),
        _ => String::new(),
    }
}

/// The error of a read-only command that cannot read the cache: `cannot
/// VERB LOC: why; what to do: …` when there is advice ([`unreadable_advice`]),
/// else the error with `cannot VERB LOC` as its context.
pub(super) fn cannot(
    verb: &str,
    e: ranktune_cache::CacheError,
    loc: &CacheLocation,
) -> anyhow::Error {
    match unreadable_advice(&e, loc) {
        advice if advice.is_empty() => {
            anyhow::Error::new(e).context(format!("cannot {verb} {loc}"))
        }
        advice => anyhow::anyhow!("cannot {verb} {loc}: {e}; what to do: {advice}"),
    }
}
