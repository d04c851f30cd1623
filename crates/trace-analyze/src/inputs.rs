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
//!
//! Runs: files of different runs are never mixed silently. A file's run is
//! its `otherData.run_id` (written by ranktune's recorder) together with its
//! `distributedInfo.world_size`; files without either (older ranktune files,
//! PyTorch traces) are told apart by world size alone. When the inputs hold
//! more than one run, only the newest complete run is kept (complete: every
//! rank `0..world_size` is there; newest: the latest clock base, or file
//! modification time for files without one; without a complete run, the
//! newest run) and the files left out are named in one warning.
//! [`ResolveOptions::all_runs`] keeps them all.

use super::reader::TraceReader;
use super::AnalyzeError;
use std::path::{Path, PathBuf};

/// How a file's rank was found (the evidence for it; where a process's own
/// rank comes from is `ranktune_core::rank::RankSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankEvidence {
    /// `--rank FILE=N`.
    Explicit,
    /// `distributedInfo.rank` in the file.
    DistributedInfo,
    /// A pattern in the file name.
    FileName,
    /// The only input, with no rank anywhere: rank 0.
    Default,
}

impl RankEvidence {
    /// Short description for messages.
    pub fn describe(self) -> &'static str {
        match self {
            RankEvidence::Explicit => "from --rank",
            RankEvidence::DistributedInfo => "from distributedInfo",
            RankEvidence::FileName => "from its name",
            RankEvidence::Default => "only input, no rank given",
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
    pub source: RankEvidence,
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
    /// Warnings: inputs that are not traces, single-rank defaults, files of
    /// other runs left out.
    pub warnings: Vec<String>,
    /// Traces of other runs that were left out (see the module docs), by
    /// path.
    pub left_out: Vec<RankedInput>,
}

impl Resolved {
    /// The run of the inputs: `None` when none is recorded or the inputs
    /// mix several (`all_runs`).
    pub fn run_id(&self) -> Option<&str> {
        let first = self.inputs.first().and_then(|i| i.run_id.as_deref());
        let one = self.inputs.iter().all(|i| i.run_id.as_deref() == first);
        first.filter(|_| one)
    }
}

/// Options of [`resolve_with`].
#[derive(Debug, Clone, Default)]
pub struct ResolveOptions {
    /// Keep the files of every run instead of only the newest complete one.
    pub all_runs: bool,
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
/// that are not traces, and traces of other runs than the newest complete
/// one (see the module docs), are left out with a warning.
pub fn resolve(inputs: &[String], explicit: &[(PathBuf, u32)]) -> Result<Resolved, AnalyzeError> {
    resolve_with(inputs, explicit, &ResolveOptions::default())
}

/// [`resolve`] with options. One step per function: the inputs expanded
/// and the `--rank` files checked against them, each file's header read
/// into a [`RankedInput`], the one file without a rank made rank 0, the
/// newest complete run kept, and the ranks checked for conflicts.
pub fn resolve_with(
    inputs: &[String],
    explicit: &[(PathBuf, u32)],
    opts: &ResolveOptions,
) -> Result<Resolved, AnalyzeError> {
    let files = expand(inputs)?;
    check_explicit(&files, explicit)?;
    let mut res = Resolved::default();
    let mut unranked = Vec::new();
    for path in files {
        match read_input(path, explicit, &mut res.warnings)? {
            Some((input, true)) => res.inputs.push(input),
            Some((input, false)) => unranked.push(input),
            None => {}
        }
    }
    place_unranked(&mut res, unranked)?;
    if res.inputs.is_empty() {
        return Err(no_traces(inputs, &res.warnings));
    }
    if !opts.all_runs {
        keep_newest_run(&mut res);
    }
    res.inputs.sort_by_key(|i| i.rank);
    check_conflicts(&res.inputs)?;
    Ok(res)
}

/// Every file named by `--rank` must be among the inputs.
fn check_explicit(files: &[PathBuf], explicit: &[(PathBuf, u32)]) -> Result<(), AnalyzeError> {
    for (f, _) in explicit {
        if !files.iter().any(|p| same_file(p, f)) {
            return Err(AnalyzeError::BadInput {
                input: f.display().to_string(),
                why: "named by --rank but not among the inputs".into(),
            });
        }
    }
    Ok(())
}

/// One file's header as a [`RankedInput`], and whether its rank was found
/// (else it is rank 0 for now, [`RankEvidence::Default`]); `None`, with a
/// warning, when the file is not one rank's trace.
fn read_input(
    path: PathBuf,
    explicit: &[(PathBuf, u32)],
    warnings: &mut Vec<String>,
) -> Result<Option<(RankedInput, bool)>, AnalyzeError> {
    let mut reader = match TraceReader::open(&path) {
        Ok(r) => r,
        Err(e @ AnalyzeError::NotATrace { .. }) => {
            warnings.push(format!("skipped {e}"));
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    if reader.meta("ranktuneMerged").is_some() {
        warnings.push(format!(
            "skipped {}: it is the output of `ranktune trace merge`, not one rank's trace",
            path.display()
        ));
        return Ok(None);
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let named =
        explicit.iter().any(|(f, _)| same_file(&path, f)) || rank_from_name(&name).is_some();
    let (info, base) = header_meta(&mut reader, named)?;
    let base_ns = clock_base(&path, base.as_ref(), warnings);
    let field = |key: &str| info.as_ref().and_then(|i| i.get(key));
    let info_rank = field("rank")
        .and_then(|r| r.as_u64().or_else(|| r.as_str()?.parse().ok()))
        .and_then(|r| u32::try_from(r).ok());
    let world_size =
        field("world_size").and_then(|r| r.as_u64()).and_then(|r| u32::try_from(r).ok());
    let backend = field("backend").and_then(|r| r.as_str()).map(str::to_owned);
    let run_id = reader
        .meta("otherData")
        .and_then(|o| o.get("run_id"))
        .and_then(|r| r.as_str())
        .map(str::to_owned);
    let found = explicit
        .iter()
        .find(|(f, _)| same_file(&path, f))
        .map(|(_, r)| (*r, RankEvidence::Explicit))
        .or(info_rank.map(|r| (r, RankEvidence::DistributedInfo)))
        .or(rank_from_name(&name).map(|r| (r, RankEvidence::FileName)));
    let (rank, source) = found.unwrap_or((0, RankEvidence::Default));
    let input = RankedInput { rank, path, source, base_ns, world_size, backend, run_id };
    Ok(Some((input, found.is_some())))
}

/// A file's `distributedInfo` and `baseTimeNanoseconds`. They come before
/// the events; when the rank is nowhere else (`named` is false) and the
/// file is in object form, the file is read to the end for a
/// `distributedInfo` after them (rare).
fn header_meta(
    reader: &mut TraceReader,
    named: bool,
) -> Result<(Option<serde_json::Value>, Option<serde_json::Value>), AnalyzeError> {
    let mut info = reader.meta("distributedInfo").cloned();
    let mut base = reader.meta("baseTimeNanoseconds").cloned();
    if info.is_none() && !named && reader.form() == super::reader::Form::Object {
        reader.drain()?;
        info = reader.meta("distributedInfo").cloned();
        base = base.or_else(|| reader.meta("baseTimeNanoseconds").cloned());
    }
    Ok((info, base))
}

/// The file's clock base in ns (0 without one). A clock base is
/// nanoseconds since the Unix epoch: anything outside 0..=i64::MAX (year
/// 2262) is not a time, and would overflow the merge's shifts; it is taken
/// as 0, with a warning.
fn clock_base(path: &Path, base: Option<&serde_json::Value>, warnings: &mut Vec<String>) -> i128 {
    let value = base.and_then(|v| {
        v.as_u64()
            .map(i128::from)
            .or_else(|| v.as_i64().map(i128::from))
            .or_else(|| v.as_f64().filter(|f| f.is_finite()).map(|f| f as i128))
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    });
    match (base, value) {
        (None, _) => 0,
        (Some(_), Some(b)) if (0..=i128::from(i64::MAX)).contains(&b) => b,
        (Some(raw), _) => {
            warnings.push(format!(
                "{}: baseTimeNanoseconds {raw} is not a time in nanoseconds since 1970; \
                 its times are taken as absolute",
                path.display()
            ));
            0
        }
    }
}

/// Files without a rank: the only input becomes rank 0 (with a warning);
/// among others, one is an error.
fn place_unranked(res: &mut Resolved, mut unranked: Vec<RankedInput>) -> Result<(), AnalyzeError> {
    if unranked.is_empty() {
        return Ok(());
    }
    if unranked.len() == 1 && res.inputs.is_empty() {
        let mut only = unranked.remove(0);
        res.warnings.push(format!(
            "{}: no rank in the file or its name; treating it as rank 0",
            only.path.display()
        ));
        only.rank = 0;
        res.inputs.push(only);
        Ok(())
    } else {
        Err(AnalyzeError::NoRank { path: unranked[0].path.display().to_string() })
    }
}

/// No trace among `inputs`: the error names them and every warning.
fn no_traces(inputs: &[String], warnings: &[String]) -> AnalyzeError {
    let mut why = inputs.join(", ");
    for w in warnings {
        why.push_str("; ");
        why.push_str(w);
    }
    AnalyzeError::NoTraces(why)
}

/// Two files of one rank (in `inputs`, sorted by rank) are an error.
fn check_conflicts(inputs: &[RankedInput]) -> Result<(), AnalyzeError> {
    for w in inputs.windows(2) {
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
    Ok(())
}

/// A run's key: its id and world size.
type RunKey = (Option<String>, Option<u32>);

/// Describes a run for messages.
fn describe_run(key: &RunKey) -> String {
    match key {
        (Some(id), Some(ws)) => format!("run {id}, world size {ws}"),
        (Some(id), None) => format!("run {id}"),
        (None, Some(ws)) => format!("world size {ws}, no run id"),
        (None, None) => "no run id or world size".to_string(),
    }
}

/// When a file was made, for choosing the newest run: its clock base, or
/// its modification time when it has none.
fn made_ns(input: &RankedInput) -> i128 {
    if input.base_ns > 0 {
        return input.base_ns;
    }
    std::fs::metadata(&input.path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

/// The ranks `0..world_size` a run has no file of (at most 64 listed).
fn missing_ranks(key: &RunKey, files: &[RankedInput]) -> Vec<u32> {
    match key.1 {
        Some(ws) => (0..ws).filter(|r| !files.iter().any(|f| f.rank == *r)).take(64).collect(),
        None => Vec::new(),
    }
}

/// Keeps only the newest complete run of `res.inputs` (see the module docs)
/// and names the files left out in one warning.
fn keep_newest_run(res: &mut Resolved) {
    let mut runs: Vec<(RunKey, Vec<RankedInput>)> = Vec::new();
    for input in std::mem::take(&mut res.inputs) {
        let key = (input.run_id.clone(), input.world_size);
        match runs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, files)) => files.push(input),
            None => runs.push((key, vec![input])),
        }
    }
    if runs.is_empty() {
        return;
    }
    // Newest first.
    runs.sort_by_cached_key(|(_, files)| std::cmp::Reverse(files.iter().map(made_ns).max()));
    let chosen = runs.iter().position(|(k, f)| missing_ranks(k, f).is_empty()).unwrap_or(0);
    let (key, files) = runs.remove(chosen);
    let gaps = missing_ranks(&key, &files);
    if !gaps.is_empty() {
        let list: Vec<String> = gaps.iter().map(u32::to_string).collect();
        res.warnings.push(format!(
            "incomplete run ({}): no trace of rank{} {}{}",
            describe_run(&key),
            if gaps.len() == 1 { "" } else { "s" },
            list.join(", "),
            if runs.is_empty() {
                ""
            } else {
                "; no run among the inputs is complete, using the newest"
            }
        ));
    }
    res.inputs = files;
    if runs.is_empty() {
        return;
    }
    let mut left: Vec<RankedInput> = runs.into_iter().flat_map(|(_, f)| f).collect();
    left.sort_by(|a, b| a.path.cmp(&b.path));
    let names: Vec<String> = left
        .iter()
        .map(|f| {
            format!(
                "{} (rank {}, {})",
                f.path.display(),
                f.rank,
                describe_run(&(f.run_id.clone(), f.world_size))
            )
        })
        .collect();
    res.warnings.push(format!(
        "left out {} file{} of other runs: {}; using the newest{} run ({}); pass --all-runs to keep every file",
        left.len(),
        if left.len() == 1 { "" } else { "s" },
        names.join(", "),
        if gaps.is_empty() { " complete" } else { "" },
        describe_run(&key)
    ));
    res.left_out = left;
}

/// The number of workers for `jobs` (0: the cores) and `files` inputs.
pub(crate) fn workers(jobs: usize, files: usize) -> usize {
    let jobs =
        if jobs == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { jobs };
    jobs.clamp(1, files.max(1))
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

    /// Writes a ranktune-style header with one event.
    fn write(dir: &Path, name: &str, rank: u32, ws: u32, run: Option<&str>, base: u64) -> String {
        let run = run.map_or("null".to_string(), |r| format!("{r:?}"));
        let text = format!(
            "{{\"distributedInfo\": {{\"rank\": {rank}, \"world_size\": {ws}}},\n\
             \"otherData\": {{\"run_id\": {run}}},\n\"baseTimeNanoseconds\": {base},\n\
             \"traceEvents\": [{{\"ph\":\"X\",\"name\":\"w\",\"pid\":{rank},\"tid\":1,\"ts\":1,\"dur\":2}}]}}"
        );
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    fn ranks(r: &Resolved) -> Vec<(u32, String)> {
        r.inputs
            .iter()
            .map(|i| (i.rank, i.path.file_name().unwrap().to_string_lossy().into_owned()))
            .collect()
    }

    /// A 4-rank run, then a 2-rank run into the same directory: the second
    /// overwrote ranks 0 and 1; ranks 2 and 3 are the first run's.
    #[test]
    fn only_the_newest_complete_run_is_used() {
        let dir = tempfile::tempdir().unwrap();
        for r in 2..4 {
            write(dir.path(), &format!("trace_{r}.json"), r, 4, Some("old"), 1_000);
        }
        for r in 0..2 {
            write(dir.path(), &format!("trace_{r}.json"), r, 2, Some("new"), 2_000);
        }
        let input = [dir.path().display().to_string()];
        let res = resolve(&input, &[]).unwrap();
        assert_eq!(ranks(&res), [(0, "trace_0.json".into()), (1, "trace_1.json".into())]);
        assert_eq!(res.left_out.len(), 2);
        let w = res.warnings.join("\n");
        assert!(w.contains("left out 2 files of other runs"), "{w}");
        assert!(w.contains("trace_2.json (rank 2, run old, world size 4)"), "{w}");
        assert!(w.contains("trace_3.json") && w.contains("--all-runs"), "{w}");
        assert!(w.contains("using the newest complete run (run new, world size 2)"), "{w}");

        let all = resolve_with(&input, &[], &ResolveOptions { all_runs: true }).unwrap();
        assert_eq!(all.inputs.len(), 4);
        assert!(all.left_out.is_empty() && all.warnings.is_empty(), "{:?}", all.warnings);
    }

    /// The same world size but another run id is another run; a newer run
    /// that lacks a rank loses to an older complete one.
    #[test]
    fn run_ids_tell_runs_apart_and_incomplete_runs_lose() {
        let dir = tempfile::tempdir().unwrap();
        for r in 0..2 {
            write(dir.path(), &format!("a_{r}.json"), r, 2, Some("a"), 1_000);
        }
        write(dir.path(), "b_0.json", 0, 2, Some("b"), 2_000);
        let res = resolve(&[dir.path().display().to_string()], &[]).unwrap();
        assert_eq!(ranks(&res), [(0, "a_0.json".into()), (1, "a_1.json".into())]);
        let w = res.warnings.join("\n");
        assert!(w.contains("b_0.json (rank 0, run b, world size 2)"), "{w}");

        // Only the incomplete run: used, and the gap is named.
        let one = resolve(&[dir.path().join("b_0.json").display().to_string()], &[]).unwrap();
        assert_eq!(one.inputs.len(), 1);
        assert!(one.warnings.join("").contains("no trace of rank 1"), "{:?}", one.warnings);
    }

    /// Files without run ids (older ranktune files, PyTorch traces) of one
    /// world size stay one run, with no warning.
    #[test]
    fn files_without_run_ids_stay_together() {
        let dir = tempfile::tempdir().unwrap();
        for r in 0..3 {
            write(dir.path(), &format!("trace_{r}.json"), r, 3, None, 1_000 + u64::from(r));
        }
        let res = resolve(&[dir.path().display().to_string()], &[]).unwrap();
        assert_eq!(res.inputs.len(), 3);
        assert!(res.warnings.is_empty() && res.left_out.is_empty(), "{:?}", res.warnings);
    }
}
