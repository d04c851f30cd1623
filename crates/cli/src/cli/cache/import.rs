//! `ranktune cache import`: read caches (ranktune, TensorRT-LLM, vLLM/SGLang
//! fused-MoE configs, FlashInfer or Triton autotune files, detected by
//! `ranktune_formats::read_source`) and save their entries into a
//! cache through the same locked, merging save the tuner uses, so many
//! imports into one cache can run at once. Reading a source never modifies
//! it.

use super::common::{
    load_source, location, open_store, shown, source_formats, won_by_text, Format,
};
use crate::cli::ExitCode;
use anyhow::{Context, Result};
use ranktune_cache::{merge, place_in_rank, CacheData};
use std::path::PathBuf;
use tracing::warn;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The cache to import into (created if missing): a file, or
    /// `redis://host[:port][/db][?prefix=NAME]`.
    pub cache: PathBuf,
    /// Files to import (vllm-moe and triton: also folders of their files,
    /// such as Triton's cache directory).
    #[arg(required = true)]
    pub src: Vec<PathBuf>,
    /// Format of the source files.
    #[arg(long, value_parser = source_formats(), default_value = "auto")]
    pub format: Format,
    /// Place the sources' rank section into `rank_<R>` (a source with
    /// several rank sections also needs --from-rank). `shared` stays shared.
    #[arg(long, value_name = "R")]
    pub rank: Option<u32>,
    /// With --rank: which rank section of the sources to take.
    #[arg(long, value_name = "N", requires = "rank")]
    pub from_rank: Option<u32>,
}

pub fn run(args: ImportArgs) -> Result<ExitCode> {
    let target = location(&args.cache)?;
    // Read and check every source before writing anything.
    let mut sources = Vec::with_capacity(args.src.len());
    for path in &args.src {
        let mut source = load_source(path, args.format)?;
        if let Some(to) = args.rank {
            source.data = place_in_rank(source.data, args.from_rank, to)
                .with_context(|| format!("placing {} into rank_{to}", shown(path)))?;
        }
        println!(
            "read {} entries from {} ({}{})",
            source.data.len(),
            shown(path),
            match (source.empty, source.format) {
                (false, Some(format)) => format.name(),
                _ => "empty",
            },
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
            shown(&args.src[c.winner]),
            won_by_text(c.won_by)
        );
    }
    let report = match open_store(&target)?.save(&merged.data) {
        Ok(report) => report,
        Err(e) => {
            // A Redis error already names the save and the location.
            let what = format!("saving into {target}");
            return Err(if e.to_string().starts_with(&what) {
                anyhow::Error::new(e)
            } else {
                anyhow::Error::new(e).context(what)
            });
        }
    };
    for w in &report.warnings {
        warn!("{w}");
    }
    println!("imported {} entries into {target} (it now holds {})", report.written, report.total);
    Ok(ExitCode::SUCCESS)
}
