//! `ranktune cache import`: read caches (ranktune or TensorRT-LLM format) and
//! save their entries into a cache through the same locked, merging save the
//! tuner uses, so many imports into one cache can run at once.
//!
//! Also owns [`load_source`], the format-detecting reader that `diff` and
//! `merge` use for their inputs. Reading a source never modifies it.

use anyhow::{bail, Context, Result};
use ranktune_cache::merge::{merge, place_in_rank};
use ranktune_cache::trtllm::{self, convert};
use ranktune_cache::{read_cache_bytes, CacheData, Store};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tracing::warn;

/// Source file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Decide from the file's shape (a `format` field means ranktune).
    Auto,
    /// A ranktune cache file.
    Ranktune,
    /// A TensorRT-LLM autotuner cache file.
    Trtllm,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The cache to import into (created if missing).
    pub cache: PathBuf,
    /// Files to import.
    #[arg(required = true)]
    pub src: Vec<PathBuf>,
    /// Format of the source files.
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    pub format: Format,
    /// Place the sources' rank section into `rank_<R>` (a source with
    /// several rank sections also needs --from-rank). `shared` stays shared.
    #[arg(long, value_name = "R")]
    pub rank: Option<u32>,
    /// With --rank: which rank section of the sources to take.
    #[arg(long, value_name = "N", requires = "rank")]
    pub from_rank: Option<u32>,
}

/// A source read into memory.
pub struct Source {
    /// Its entries.
    pub data: CacheData,
    /// The format it was read as.
    pub format: Format,
    /// Entries skipped because they did not parse.
    pub skipped: usize,
    /// The file held nothing but blanks (read as an empty cache).
    pub empty: bool,
}

/// Reads one cache file in the given (or detected) format. Bad entries are
/// skipped with a warning naming them; a file that is not JSON is an error
/// and is left exactly as it is.
pub fn load_source(path: &Path, format: Format) -> Result<Source> {
    let bytes = read_cache_bytes(path)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        warn!("{} is an empty file; it adds nothing", path.display());
        return Ok(Source { data: CacheData::default(), format, skipped: 0, empty: true });
    }
    let doc = convert::parse_document(&bytes)
        .with_context(|| format!("{} cannot be read as a cache", path.display()))?;
    let format = match format {
        Format::Auto if doc.get("format").is_some() => Format::Ranktune,
        Format::Auto if trtllm::looks_like_trtllm(&doc) => Format::Trtllm,
        Format::Auto => bail!(
            "cannot tell the format of {}: it has no \"format\" field (ranktune) and does not \
             look like a TensorRT-LLM cache; pass --format",
            path.display()
        ),
        f => f,
    };
    match format {
        Format::Trtllm => {
            let imported = trtllm::import(&doc)
                .with_context(|| format!("{} is not a TensorRT-LLM cache", path.display()))?;
            for w in &imported.warnings {
                warn!("{}: {w}", path.display());
            }
            Ok(Source { data: imported.data, format, skipped: imported.skipped, empty: false })
        }
        _ => {
            let loaded = super::open_store(path)?
                .inspect()
                .with_context(|| format!("reading {}", path.display()))?;
            for w in &loaded.warnings {
                warn!("{}: {w}", path.display());
            }
            Ok(Source {
                data: loaded.data,
                format: Format::Ranktune,
                skipped: loaded.bad_entries,
                empty: false,
            })
        }
    }
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Auto => "auto",
        Format::Ranktune => "ranktune",
        Format::Trtllm => "trtllm",
    }
}

pub fn run(args: ImportArgs) -> Result<ExitCode> {
    // Read and check every source before writing anything.
    let mut sources = Vec::with_capacity(args.src.len());
    for path in &args.src {
        let mut source = load_source(path, args.format)?;
        if let Some(to) = args.rank {
            source.data = place_in_rank(source.data, args.from_rank, to)
                .with_context(|| format!("placing {} into rank_{to}", path.display()))?;
        }
        println!(
            "read {} entries from {} ({}{})",
            source.data.len(),
            path.display(),
            if source.empty { "empty" } else { format_name(source.format) },
            if source.skipped > 0 {
                format!(", {} bad entries skipped", source.skipped)
            } else {
                String::new()
            }
        );
        sources.push(source);
    }
    let datas: Vec<CacheData> = sources.into_iter().map(|s| s.data).collect();
    let merged = merge(&datas);
    for c in &merged.conflicts {
        println!(
            "conflict {} {}: kept {} from {} ({})",
            c.section,
            c.key,
            c.kept.tactic,
            args.src[c.winner].display(),
            super::merge::won_by_text(c.won_by)
        );
    }
    let report = super::open_store(&args.cache)?
        .save(&merged.data)
        .with_context(|| format!("saving into {}", args.cache.display()))?;
    for w in &report.warnings {
        warn!("{w}");
    }
    println!(
        "imported {} entries into {} (it now holds {})",
        report.written,
        args.cache.display(),
        report.total
    );
    Ok(ExitCode::SUCCESS)
}
