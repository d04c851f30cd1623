//! Input discovery and rank detection: turns the command line's files,
//! directories and globs into trace files, each with its rank, its clock
//! base and how the rank was found.
//!
//! Rank sources, in order: an explicit `--rank FILE=N`; the file's
//! `"distributedInfo": {"rank": N}`; a `-rank-N`, `rankN` (also `rank_N`,
//! `rank-N`) or trailing `_N` in the file name. Two files claiming one rank
//! are an error. It reads only each file's header (up to the first event),
//! except for an object-form trace with no rank in its header, name or
//! `--rank`, which is read to its end in case `distributedInfo` follows the
//! events. `baseTimeNanoseconds` is taken from the header (where Kineto and
//! ranktune write it); without one, times are taken as absolute.

use super::reader::TraceReader;
use super::AnalyzeError;
use std::path::{Path, PathBuf};

/// How a file's rank was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankSource {
    /// `--rank FILE=N`.
    Explicit,
    /// `distributedInfo.rank` in the file.
    DistributedInfo,
    /// A pattern in the file name.
    FileName,
    /// The only input, with no rank anywhere: rank 0.
    Default,
}

impl RankSource {
    /// Short description for messages.
    pub fn describe(self) -> &'static str {
        match self {
            RankSource::Explicit => "from --rank",
            RankSource::DistributedInfo => "from distributedInfo",
            RankSource::FileName => "from its name",
            RankSource::Default => "only input, no rank given",
        }
    }
}

/// One trace file with its rank.
#[derive(Debug, Clone)]
pub struct RankedInput {
    /// The rank.
    pub rank: u32,
    /// The file.
    pub path: PathBuf,
    /// How the rank was found.
    pub source: RankSource,
    /// `baseTimeNanoseconds` of the file (0 when absent: times are absolute).
    pub base_ns: i128,
    /// `distributedInfo.world_size`, if present.
    pub world_size: Option<u32>,
    /// `distributedInfo.backend`, if present.
    pub backend: Option<String>,
    /// The run the file belongs to (`otherData.run_id`, written by ranktune's
    /// recorder), if present.
    pub run_id: Option<String>,
}

/// The resolved inputs, sorted by rank, and files that were left out.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    /// The traces, sorted by rank.
    pub inputs: Vec<RankedInput>,
    /// Warnings: inputs that are not traces, single-rank defaults.
    pub warnings: Vec<String>,
}

/// Expands files, directories (their `*.json` and `*.json.gz` files) and
/// globs into a sorted, de-duplicated list of files.
pub fn expand(inputs: &[String]) -> Result<Vec<PathBuf>, AnalyzeError> {
    let mut out = Vec::new();
    for input in inputs {
        let path = Path::new(input);
        if path.is_dir() {
            let rd = std::fs::read_dir(path)
                .map_err(|source| AnalyzeError::Io { path: input.clone(), source })?;
            let mut found: Vec<PathBuf> = rd
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file() && is_trace_name(p))
                .collect();
            if found.is_empty() {
                return Err(AnalyzeError::BadInput {
                    input: input.clone(),
                    why: "directory holds no *.json or *.json.gz files".into(),
                });
            }
            found.sort();
            out.extend(found);
        } else if path.exists() {
            out.push(path.to_path_buf());
        } else if input.contains(['*', '?', '[']) {
            let paths = glob::glob(input).map_err(|e| AnalyzeError::BadInput {
                input: input.clone(),
                why: format!("bad glob pattern: {e}"),
            })?;
            let mut found: Vec<PathBuf> =
                paths.filter_map(Result::ok).filter(|p| p.is_file()).collect();
            if found.is_empty() {
                return Err(AnalyzeError::BadInput {
                    input: input.clone(),
                    why: "glob matches no files".into(),
                });
            }
            found.sort();
            out.extend(found);
        } else {
            return Err(AnalyzeError::BadInput {
                input: input.clone(),
                why: "no such file or directory".into(),
            });
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.canonicalize().unwrap_or_else(|_| p.clone())));
    Ok(out)
}

fn is_trace_name(p: &Path) -> bool {
    let n = p.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    n.ends_with(".json") || n.ends_with(".json.gz")
}

/// The rank written in a file name, if any: `-rank-N`, `rankN`/`rank_N`/
/// `rank-N` (any case), or `_N` at the end of the name before its
/// extensions (`trace_3.json`, `trace_3.json.gz`, `x_3.pt.trace.json`).
///
/// ```
/// use ranktune_trace_analyze::rank_from_name;
/// assert_eq!(rank_from_name("trace_3.json"), Some(3));
/// assert_eq!(rank_from_name("trace.json-rank-0.gz"), Some(0));
/// assert_eq!(rank_from_name("worker_rank12.1700000000.pt.trace.json"), Some(12));
/// assert_eq!(rank_from_name("host_4711.1700000000.pt.trace.json"), None);
/// ```
pub fn rank_from_name(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    let b = lower.as_bytes();
    let digits_at = |i: usize| -> Option<u32> {
        let end = i + b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if end == i || end - i > 9 {
            return None;
        }
        lower[i..end].parse().ok()
    };
    let mut i = 0;
    while let Some(p) = lower[i..].find("rank") {
        let mut j = i + p + 4;
        if matches!(b.get(j), Some(b'_') | Some(b'-')) {
            j += 1;
        }
        if let Some(r) = digits_at(j) {
            return Some(r);
        }
        i += p + 4;
    }
    let mut stem = lower.as_str();
    for ext in [".gz", ".json", ".pt.trace", ".trace"] {
        stem = stem.strip_suffix(ext).unwrap_or(stem);
    }
    let us = stem.rfind('_')?;
    let tail = &stem[us + 1..];
    if !tail.is_empty() && tail.len() <= 9 && tail.bytes().all(|c| c.is_ascii_digit()) {
        return tail.parse().ok();
    }
    None
}

/// Parses `FILE=N` as given to `--rank`.
pub fn parse_rank_arg(s: &str) -> Result<(PathBuf, u32), String> {
    let (file, n) = s.rsplit_once('=').ok_or_else(|| format!("expected FILE=N, got {s:?}"))?;
    let n: u32 = n.trim().parse().map_err(|_| format!("rank in {s:?} is not a number"))?;
    Ok((PathBuf::from(file), n))
}

fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Expands `inputs`, reads each file's header and assigns ranks. Files
/// that are not traces are left out with a warning.
pub fn resolve(inputs: &[String], explicit: &[(PathBuf, u32)]) -> Result<Resolved, AnalyzeError> {
    let files = expand(inputs)?;
    for (f, _) in explicit {
        if !files.iter().any(|p| same_file(p, f)) {
            return Err(AnalyzeError::BadInput {
                input: f.display().to_string(),
                why: "named by --rank but not among the inputs".into(),
            });
        }
    }
    let mut res = Resolved::default();
    let mut unranked = Vec::new();
    for path in files {
        let mut reader = match TraceReader::open(&path) {
            Ok(r) => r,
            Err(e @ AnalyzeError::NotATrace { .. }) => {
                res.warnings.push(format!("skipped {e}"));
                continue;
            }
            Err(e) => return Err(e),
        };
        if reader.meta("ranktuneMerged").is_some() {
            res.warnings.push(format!(
                "skipped {}: it is the output of `ranktune trace merge`, not one rank's trace",
                path.display()
            ));
            continue;
        }
        let mut info = reader.meta("distributedInfo").cloned();
        let mut base = reader.meta("baseTimeNanoseconds").cloned();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let named =
            explicit.iter().any(|(f, _)| same_file(&path, f)) || rank_from_name(&name).is_some();
        if info.is_none() && !named && reader.form() == super::reader::Form::Object {
            // The rank may follow the events (rare): read to the end.
            reader.drain()?;
            info = reader.meta("distributedInfo").cloned();
            base = base.or_else(|| reader.meta("baseTimeNanoseconds").cloned());
        }
        let base_value = base.as_ref().and_then(|v| {
            v.as_u64()
                .map(i128::from)
                .or_else(|| v.as_i64().map(i128::from))
                .or_else(|| v.as_f64().filter(|f| f.is_finite()).map(|f| f as i128))
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        });
        // A clock base is nanoseconds since the Unix epoch: anything outside
        // 0..=i64::MAX (year 2262) is not a time, and would overflow the
        // shifts below.
        let base_ns = match (base.as_ref(), base_value) {
            (None, _) => 0,
            (Some(_), Some(b)) if (0..=i128::from(i64::MAX)).contains(&b) => b,
            (Some(raw), _) => {
                res.warnings.push(format!(
                    "{}: baseTimeNanoseconds {raw} is not a time in nanoseconds since 1970; \
                     its times are taken as absolute",
                    path.display()
                ));
                0
            }
        };
        let info_rank = info
            .as_ref()
            .and_then(|i| i.get("rank"))
            .and_then(|r| r.as_u64().or_else(|| r.as_str()?.parse().ok()))
            .and_then(|r| u32::try_from(r).ok());
        let world_size = info
            .as_ref()
            .and_then(|i| i.get("world_size"))
            .and_then(|r| r.as_u64())
            .and_then(|r| u32::try_from(r).ok());
        let backend = info
            .as_ref()
            .and_then(|i| i.get("backend"))
            .and_then(|r| r.as_str())
            .map(str::to_owned);
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let found = explicit
            .iter()
            .find(|(f, _)| same_file(&path, f))
            .map(|(_, r)| (*r, RankSource::Explicit))
            .or(info_rank.map(|r| (r, RankSource::DistributedInfo)))
            .or(rank_from_name(&name).map(|r| (r, RankSource::FileName)));
        let mut input = RankedInput {
            rank: 0,
            path: path.clone(),
            source: RankSource::Default,
            base_ns,
            world_size,
            backend,
            run_id: None,
        };
        match found {
            Some((rank, source)) => {
                input.rank = rank;
                input.source = source;
                res.inputs.push(input);
            }
            None => unranked.push(input),
        }
    }
    if !unranked.is_empty() {
        if unranked.len() == 1 && res.inputs.is_empty() {
            let mut only = unranked.remove(0);
            res.warnings.push(format!(
                "{}: no rank in the file or its name; treating it as rank 0",
                only.path.display()
            ));
            only.rank = 0;
            res.inputs.push(only);
        } else {
            return Err(AnalyzeError::NoRank { path: unranked[0].path.display().to_string() });
        }
    }
    if res.inputs.is_empty() {
        let mut why = inputs.join(", ");
        for w in &res.warnings {
            why.push_str("; ");
            why.push_str(w);
        }
        return Err(AnalyzeError::NoTraces(why));
    }
    res.inputs.sort_by_key(|i| i.rank);
    for w in res.inputs.windows(2) {
        if w[0].rank == w[1].rank {
            return Err(AnalyzeError::RankConflict {
                rank: w[0].rank,
                first: w[0].path.display().to_string(),
                first_how: w[0].source.describe().into(),
                second: w[1].path.display().to_string(),
                second_how: w[1].source.describe().into(),
            });
        }
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(rank_from_name("trace_0.json"), Some(0));
        assert_eq!(rank_from_name("trace_17.json.gz"), Some(17));
        assert_eq!(rank_from_name("Rank3.json"), Some(3));
        assert_eq!(rank_from_name("job-rank-5.pt.trace.json"), Some(5));
        assert_eq!(rank_from_name("rank_2_host_9.json"), Some(2));
        assert_eq!(rank_from_name("host_4711.1700000000.pt.trace.json"), None);
        assert_eq!(rank_from_name("trace.json"), None);
        assert_eq!(rank_from_name("frank.json"), None);
    }

    #[test]
    fn rank_args() {
        assert_eq!(parse_rank_arg("a=b.json=3").unwrap(), (PathBuf::from("a=b.json"), 3));
        assert!(parse_rank_arg("x.json").is_err());
        assert!(parse_rank_arg("x.json=-1").is_err());
    }
}
