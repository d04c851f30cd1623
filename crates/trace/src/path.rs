//! Where each rank writes: the per-rank path rule, and the start-time check
//! that the place is writable.
//!
//! [`rank_path`] turns one user-given template into this rank's file, so that
//! every rank of a job can be given the same setting and still write its own
//! file. The rule is the same for every world size, so scripts need one
//! pattern:
//!
//! | template | rank 3 writes |
//! | --- | --- |
//! | `trace.json` | `trace_3.json` |
//! | `out/trace.json` | `out/trace_3.json` |
//! | `trace.json.gz` | `trace_3.json.gz` (gzip) |
//! | `trace` (no extension) | `trace_3.json` |
//! | `trace.txt` (other extension) | `trace_3.txt` |
//! | `traces/` or an existing directory `traces` | `traces/trace_3.json` |
//! | `run42/{host}-r{rank}.json` | `run42/node7-r3.json` (no extra suffix) |
//!
//! Placeholders: `{rank}`, `{world_size}`, `{local_rank}`, `{pid}`, `{host}`.
//! A template with placeholders is used exactly as expanded; if it cannot
//! tell the ranks of a multi-rank job apart (no `{rank}`, no `{pid}`, and not
//! both `{host}` and `{local_rank}`) it is an error rather than a silent
//! collision. An unknown `{name}` is an error; other braces are literal.
//!
//! This module never writes trace data; [`prepare`] only creates the
//! directory and a probe file it removes again.

use super::TraceError;
use ranktune_core::rank::RankInfo;
use std::fs;
use std::path::{Path, PathBuf};

/// This rank's trace file for `template` (see the module docs for the rule).
///
/// `pid` and `host` fill the `{pid}` and `{host}` placeholders. The only
/// filesystem access is checking whether `template` names an existing
/// directory.
///
/// ```
/// use ranktune_core::rank::{RankInfo, RankSource};
/// use ranktune_trace::rank_path;
/// use std::path::Path;
/// let r = RankInfo { rank: 1, world_size: 2, local_rank: 1, source: RankSource::Explicit };
/// let p = rank_path(Path::new("trace.json.gz"), &r, 42, "node7").unwrap();
/// assert_eq!(p, Path::new("trace_1.json.gz"));
/// let p = rank_path(Path::new("run/{host}-r{rank}.json"), &r, 42, "node7").unwrap();
/// assert_eq!(p, Path::new("run/node7-r1.json"));
/// ```
pub fn rank_path(
    template: &Path,
    rank: &RankInfo,
    pid: u32,
    host: &str,
) -> Result<PathBuf, TraceError> {
    let text = template.to_str().ok_or_else(|| TraceError::NotUnicode(template.to_path_buf()))?;
    if text.trim().is_empty() {
        return Err(TraceError::EmptyPath);
    }
    let (expanded, used) = expand(text, rank, pid, host)?;
    if used.any() && rank.world_size > 1 && !used.distinguishes_ranks() {
        return Err(TraceError::AmbiguousTemplate {
            template: text.to_string(),
            world_size: rank.world_size,
        });
    }
    let is_dir = expanded.ends_with('/')
        || expanded.ends_with(std::path::MAIN_SEPARATOR)
        || Path::new(&expanded).is_dir();
    if is_dir {
        return Ok(Path::new(&expanded).join(format!("trace_{}.json", rank.rank)));
    }
    if used.any() {
        return Ok(PathBuf::from(expanded));
    }
    let path = Path::new(text);
    // Not a directory and not ending in a separator, so there is a file name.
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(text);
    let r = rank.rank;
    let new_name = if let Some(stem) = name.strip_suffix(".json.gz").filter(|s| !s.is_empty()) {
        format!("{stem}_{r}.json.gz")
    } else {
        match name.rfind('.') {
            Some(dot) if dot > 0 => format!("{}_{r}{}", &name[..dot], &name[dot..]),
            _ => format!("{name}_{r}.json"),
        }
    };
    Ok(path.with_file_name(new_name))
}

/// The files that [`rank_path`] could have made from `template` and that
/// exist now, for any rank, world size, local rank, pid and host, sorted:
/// how analysis finds a job's files from the template the job was given
/// (`traces` finds `traces_0.json`, `traces_1.json`, …; `run/{host}-r{rank}.json`
/// finds `run/node7-r0.json`, …). A placeholder matches a number
/// (`{host}`: any name); the rest of the path must match exactly.
///
/// Reads only directory listings, never a file.
///
/// ```
/// use ranktune_trace::rank_files;
/// let dir = tempfile::tempdir()?;
/// for name in ["traces_0.json", "traces_1.json", "traces_x.json", "other_2.json"] {
///     std::fs::write(dir.path().join(name), "{}")?;
/// }
/// let found = rank_files(&dir.path().join("traces"))?;
/// assert_eq!(found, [dir.path().join("traces_0.json"), dir.path().join("traces_1.json")]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn rank_files(template: &Path) -> Result<Vec<PathBuf>, TraceError> {
    const R: u32 = 4_294_967_295;
    const W: u32 = 4_294_967_294;
    const L: u32 = 4_294_967_293;
    const P: u32 = 4_294_967_292;
    const HOST: &str = "\u{1}host\u{1}";
    let info = |world_size| RankInfo {
        rank: R,
        world_size,
        local_rank: L,
        source: ranktune_core::rank::RankSource::Explicit,
    };
    let path = match rank_path(template, &info(W), P, HOST) {
        Err(TraceError::AmbiguousTemplate { .. }) => rank_path(template, &info(1), P, HOST)?,
        other => other?,
    };
    let text = path.to_str().ok_or_else(|| TraceError::NotUnicode(path.clone()))?;
    let sentinels = [R, W, L, P].map(|n| n.to_string());
    let absolute = text.starts_with('/');
    let mut found = vec![if absolute { PathBuf::from("/") } else { PathBuf::new() }];
    for comp in text.split('/').filter(|c| !c.is_empty()) {
        let tokens = tokenize(comp, &sentinels, HOST);
        let literal = tokens.iter().all(|t| matches!(t, Token::Lit(_)));
        let mut next = Vec::new();
        for dir in &found {
            if literal {
                next.push(dir.join(comp));
                continue;
            }
            let listing = if dir.as_os_str().is_empty() { Path::new(".") } else { dir.as_path() };
            let Ok(entries) = fs::read_dir(listing) else { continue };
            for e in entries.filter_map(Result::ok) {
                if let Some(name) = e.file_name().to_str() {
                    if matches_tokens(name, &tokens) {
                        next.push(dir.join(name));
                    }
                }
            }
        }
        found = next;
    }
    let mut files: Vec<PathBuf> = found.into_iter().filter(|p| p.is_file()).collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// A piece of one path component of an expanded template.
#[derive(Debug)]
enum Token {
    Lit(String),
    /// A number placeholder: one or more digits.
    Digits,
    /// `{host}`: one or more characters.
    Any,
}

fn tokenize(comp: &str, sentinels: &[String; 4], host: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut rest = comp;
    loop {
        let next = sentinels
            .iter()
            .map(|s| (s.as_str(), false))
            .chain([(host, true)])
            .filter_map(|(s, is_host)| rest.find(s).map(|at| (at, s.len(), is_host)))
            .min_by_key(|(at, _, _)| *at);
        match next {
            Some((at, len, is_host)) => {
                if at > 0 {
                    out.push(Token::Lit(rest[..at].to_string()));
                }
                out.push(if is_host { Token::Any } else { Token::Digits });
                rest = &rest[at + len..];
            }
            None => {
                if !rest.is_empty() {
                    out.push(Token::Lit(rest.to_string()));
                }
                return out;
            }
        }
    }
}

fn matches_tokens(name: &str, tokens: &[Token]) -> bool {
    let Some((first, more)) = tokens.split_first() else {
        return name.is_empty();
    };
    match first {
        Token::Lit(l) => name.strip_prefix(l.as_str()).is_some_and(|r| matches_tokens(r, more)),
        Token::Digits => {
            let n = name.bytes().take_while(u8::is_ascii_digit).count();
            (1..=n).any(|k| matches_tokens(&name[k..], more))
        }
        Token::Any => name
            .char_indices()
            .skip(1)
            .map(|(i, _)| i)
            .chain([name.len()])
            .any(|k| k > 0 && matches_tokens(&name[k..], more)),
    }
}

/// Which placeholders a template used.
#[derive(Default)]
struct Used {
    rank: bool,
    local_rank: bool,
    pid: bool,
    host: bool,
    world_size: bool,
}

impl Used {
    fn any(&self) -> bool {
        self.rank || self.local_rank || self.pid || self.host || self.world_size
    }
    fn distinguishes_ranks(&self) -> bool {
        self.rank || self.pid || (self.host && self.local_rank)
    }
}

fn expand(text: &str, rank: &RankInfo, pid: u32, host: &str) -> Result<(String, Used), TraceError> {
    let mut out = String::with_capacity(text.len() + 16);
    let mut used = Used::default();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}');
        let name = close.map(|c| &after[..c]);
        match name {
            Some(name) if is_placeholder_name(name) => {
                match name {
                    "rank" => {
                        used.rank = true;
                        out.push_str(&rank.rank.to_string());
                    }
                    "world_size" => {
                        used.world_size = true;
                        out.push_str(&rank.world_size.to_string());
                    }
                    "local_rank" => {
                        used.local_rank = true;
                        out.push_str(&rank.local_rank.to_string());
                    }
                    "pid" => {
                        used.pid = true;
                        out.push_str(&pid.to_string());
                    }
                    "host" => {
                        used.host = true;
                        out.push_str(host);
                    }
                    other => {
                        return Err(TraceError::UnknownPlaceholder {
                            name: other.to_string(),
                            template: text.to_string(),
                        })
                    }
                }
                rest = &after[name.len() + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok((out, used))
}

/// `{word}` with an identifier inside is meant as a placeholder; anything
/// else (`{}`, `{a b}`) is a literal brace.
fn is_placeholder_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Makes sure `path` can be written now: creates its directory, refuses a
/// directory in its place, and creates and removes a probe file beside it.
///
/// Called at session start so that a bad place is an error before a long
/// run, not after it.
pub fn prepare(path: &Path) -> Result<(), TraceError> {
    let not_writable = |source| TraceError::NotWritable { path: path.to_path_buf(), source };
    if path.is_dir() {
        return Err(TraceError::IsDirectory(path.to_path_buf()));
    }
    let dir = parent_dir(path);
    if dir.exists() && !dir.is_dir() {
        let msg = format!("{} exists and is not a directory", dir.display());
        return Err(not_writable(std::io::Error::new(std::io::ErrorKind::NotADirectory, msg)));
    }
    fs::create_dir_all(&dir).map_err(not_writable)?;
    let probe = dir.join(format!(
        ".{}.probe-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("trace"),
        std::process::id()
    ));
    fs::OpenOptions::new().write(true).create_new(true).open(&probe).map_err(not_writable)?;
    // The probe is ours; failing to remove it leaves a harmless empty file.
    let _ = fs::remove_file(&probe);
    Ok(())
}

/// The directory a file path lives in (`.` for a bare name).
pub(crate) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ranktune_core::rank::RankSource;

    fn info(rank: u32, world_size: u32, local_rank: u32) -> RankInfo {
        RankInfo { rank, world_size, local_rank, source: RankSource::Explicit }
    }

    /// The path table: (template, rank, world size, local rank, expected).
    #[test]
    fn path_table() {
        let dir = tempfile::tempdir().unwrap();
        let existing = dir.path().join("traces");
        fs::create_dir(&existing).unwrap();
        let existing = existing.to_str().unwrap().to_string();
        let table: Vec<(String, u32, u32, u32, String)> = vec![
            // The reference's examples.
            ("trace.json".into(), 0, 2, 0, "trace_0.json".into()),
            ("trace.json".into(), 1, 2, 1, "trace_1.json".into()),
            (existing.clone(), 2, 4, 2, format!("{existing}/trace_2.json")),
            // Same rule for a 1-rank job.
            ("trace.json".into(), 0, 1, 0, "trace_0.json".into()),
            ("out/trace.json".into(), 3, 8, 3, "out/trace_3.json".into()),
            ("/abs/out/trace.json".into(), 5, 8, 5, "/abs/out/trace_5.json".into()),
            // gzip keeps .json.gz at the end.
            ("trace.json.gz".into(), 0, 2, 0, "trace_0.json.gz".into()),
            ("out/run.json.gz".into(), 7, 8, 7, "out/run_7.json.gz".into()),
            // No extension gets .json; other extensions are kept.
            ("trace".into(), 4, 8, 4, "trace_4.json".into()),
            ("out/trace".into(), 4, 8, 4, "out/trace_4.json".into()),
            ("trace.txt".into(), 1, 2, 1, "trace_1.txt".into()),
            ("run.v2.json".into(), 1, 2, 1, "run.v2_1.json".into()),
            ("trace.gz".into(), 1, 2, 1, "trace_1.gz".into()),
            (".trace".into(), 1, 2, 1, ".trace_1.json".into()),
            // Trailing slash: a directory (created at start).
            ("newdir/".into(), 6, 8, 6, "newdir/trace_6.json".into()),
            (format!("{existing}/"), 2, 4, 2, format!("{existing}/trace_2.json")),
            // Placeholders: expanded, no extra suffix.
            ("run42/{host}-r{rank}.json".into(), 3, 8, 3, "run42/node7-r3.json".into()),
            ("t-{rank}-of-{world_size}.json".into(), 3, 8, 3, "t-3-of-8.json".into()),
            ("{host}/{local_rank}.json.gz".into(), 9, 16, 1, "node7/1.json.gz".into()),
            ("p{pid}.json".into(), 3, 8, 3, "p4242.json".into()),
            ("{rank}".into(), 3, 8, 3, "3".into()),
            ("r{rank}/".into(), 3, 8, 3, "r3/trace_3.json".into()),
            // Any placeholder is fine for one rank.
            ("{host}.json".into(), 0, 1, 0, "node7.json".into()),
            // Braces that are not placeholders stay literal.
            ("a{}b{x y}.json".into(), 1, 2, 1, "a{}b{x y}_1.json".into()),
            ("a{rank.json".into(), 1, 2, 1, "a{rank_1.json".into()),
        ];
        for (template, rank, world, local, want) in table {
            let got = rank_path(Path::new(&template), &info(rank, world, local), 4242, "node7")
                .unwrap_or_else(|e| panic!("{template}: {e}"));
            assert_eq!(got, PathBuf::from(&want), "template {template:?} rank {rank}");
        }
    }

    #[test]
    fn path_errors() {
        let r = info(1, 2, 1);
        let err = |t: &str| rank_path(Path::new(t), &r, 1, "h").unwrap_err();
        assert!(matches!(err(""), TraceError::EmptyPath));
        assert!(matches!(err("  "), TraceError::EmptyPath));
        let e = err("run/{node}.json");
        assert!(matches!(&e, TraceError::UnknownPlaceholder { name, .. } if name == "node"), "{e}");
        assert!(e.to_string().contains("{rank}"), "{e}");
        // Placeholders that cannot tell ranks apart would collide.
        for t in ["{host}.json", "{world_size}.json", "{local_rank}.json"] {
            assert!(matches!(err(t), TraceError::AmbiguousTemplate { .. }), "{t}");
        }
        assert!(rank_path(Path::new("{host}-{local_rank}.json"), &r, 1, "h").is_ok());
    }

    #[test]
    fn distinct_ranks_get_distinct_files() {
        for t in ["trace.json", "trace.json.gz", "t", "d/", "x/{rank}.json", "{pid}"] {
            let files: std::collections::BTreeSet<_> = (0..8)
                .map(|k| rank_path(Path::new(t), &info(k, 8, k), 100 + k, "h").unwrap())
                .collect();
            assert_eq!(files.len(), 8, "{t}");
        }
    }

    /// What the recorder wrote for a template, analysis finds from the
    /// same template, and nothing else.
    #[test]
    fn rank_files_finds_what_rank_path_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for t in ["traces", "out/run.json.gz", "r{rank}/x-{pid}.json", "{host}-{local_rank}.json"] {
            let template = d.join(t);
            let mut want = Vec::new();
            for k in 0..3 {
                let p = rank_path(&template, &info(k, 3, k), 100 + k, "node7").unwrap();
                fs::create_dir_all(p.parent().unwrap()).unwrap();
                fs::write(&p, "{}").unwrap();
                want.push(p);
            }
            want.sort();
            assert_eq!(rank_files(&template).unwrap(), want, "{t}");
        }
        // Near misses are not the template's files.
        for name in
            ["traces_.json", "traces_1x.json", "traces_1.json.bak", "traces_1", "xtraces_1.json"]
        {
            fs::write(d.join(name), "{}").unwrap();
        }
        assert_eq!(rank_files(&d.join("traces")).unwrap().len(), 3);
        assert!(rank_files(&d.join("nothing")).unwrap().is_empty());
        assert!(rank_files(&d.join("missing/dir/t.json")).unwrap().is_empty());
    }

    #[test]
    fn prepare_creates_the_directory_and_rejects_bad_places() {
        let dir = tempfile::tempdir().unwrap();
        let target = rank_path(&dir.path().join("a/b/"), &info(2, 4, 2), 1, "h").unwrap();
        prepare(&target).unwrap();
        assert!(dir.path().join("a/b").is_dir());
        assert_eq!(fs::read_dir(dir.path().join("a/b")).unwrap().count(), 0, "probe removed");

        // A file where a directory should be: unwritable, even for root.
        let file = dir.path().join("file");
        fs::write(&file, "x").unwrap();
        let e = prepare(&file.join("trace_0.json")).unwrap_err();
        assert!(matches!(e, TraceError::NotWritable { .. }), "{e}");
        assert!(e.to_string().contains("RANKTUNE_TRACE"), "{e}");

        // A directory where the file should be.
        fs::create_dir(dir.path().join("trace_0.json")).unwrap();
        let e = prepare(&dir.path().join("trace_0.json")).unwrap_err();
        assert!(matches!(e, TraceError::IsDirectory(_)), "{e}");
    }
}
