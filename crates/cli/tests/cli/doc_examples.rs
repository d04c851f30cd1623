//! Every command example in README.md and docs/*.md runs, and its output is
//! compared with the page: a change that alters what a command prints fails
//! here until the page says the same (issue: a newcomer's first hour, round
//! 2, item 1).
//!
//! # What counts as an example
//!
//! A fenced block (```` ``` ````, ```` ```text ````, ```` ```console ````,
//! ```` ```sh ````) whose first line starts with `$ `. Each `$ ` line is a
//! command, run with `bash` in a directory of the page's own (one per page,
//! so a page's commands see the files its earlier commands made); the lines
//! up to the next `$ ` line are what it prints (stdout and stderr
//! together). `ranktune` is this build's binary.
//!
//! # Placeholders for what varies
//!
//! Whitespace runs compare as one space (column widths follow the values).
//! `[..]` in a line matches any text (times, paths, timestamps, the tactic
//! a machine picked); a line that is just `…` matches any number of lines,
//! none included. Nothing else is loose.
//!
//! # Directives
//!
//! HTML comments right above a block (invisible on the rendered page):
//! - `<!-- doc-test: setup: COMMANDS -->` runs COMMANDS first (shell; must
//!   succeed; their output is not compared). `$REPO` is the repository.
//! - `<!-- doc-test: cleanup: COMMANDS -->` runs COMMANDS after the block,
//!   whatever happened (e.g. stops a server the setup started).
//! - `<!-- doc-test: needs: PROGRAM -->` runs the block only where PROGRAM
//!   is on `PATH` (`example:NAME`: where the workspace example NAME is
//!   built, as `cargo test` at the workspace root does); elsewhere it is
//!   skipped loudly, and in CI that fails.
//!
//! `cargo run -p CRATE --example NAME -- ARGS` on a page runs the example
//! this test build has already built, with ARGS (a nested cargo would
//! wait for the build lock the running `cargo test` may hold).
//! - `<!-- doc-test: skip: WHY -->` does not run the block; WHY is required
//!   and printed (e.g. it needs a GPU, a cluster or MPI).
//!
//! A page's commands share its directory and its shell variables: what one
//! `export`s, the next sees, and `$?` is the previous command's status.
//!
//! # Any machine
//!
//! No expected output may depend on the machine (CPU model and features,
//! core count, host, user, clock): such a part is masked where the page
//! makes its input, never by trimming what the page expects. The commands
//! run without the caller's `RANKTUNE_*` variables, except
//! `RANKTUNE_TEST_MACHINE` (`MODEL;CAPABILITY;CORES`), which CI sets for a
//! second run of this test so that the pages are proven under another
//! machine's identity too.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root (this crate is `crates/cli`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[derive(Debug)]
struct Example {
    line: usize,
    command: String,
    expected: Vec<String>,
}

#[derive(Debug, Default)]
struct Block {
    line: usize,
    setup: Vec<String>,
    cleanup: Vec<String>,
    needs: Vec<String>,
    skip: Option<String>,
    examples: Vec<Example>,
}

/// The runnable blocks of a page.
fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        let lang = fence.strip_prefix("```").map(str::trim);
        let shell = matches!(lang, Some("" | "text" | "console" | "sh" | "shell"));
        if !shell {
            if lang.is_some() {
                // Another language's block: skip to its end.
                i += 1;
                while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                    i += 1;
                }
            }
            i += 1;
            continue;
        }
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push((i + 1, lines[i]));
            i += 1;
        }
        i += 1;
        if !body.first().is_some_and(|(_, l)| l.starts_with("$ ")) {
            continue;
        }
        let mut block = Block { line: start + 1, ..Block::default() };
        // Directives: the comment lines right above the fence.
        let mut j = start;
        while j > 0 && lines[j - 1].trim_start().starts_with("<!-- doc-test:") {
            j -= 1;
            let d = lines[j].trim();
            let d = d.trim_start_matches("<!-- doc-test:").trim_end_matches("-->").trim();
            if let Some(why) = d.strip_prefix("skip:") {
                block.skip = Some(why.trim().to_string());
            } else if let Some(cmd) = d.strip_prefix("setup:") {
                block.setup.insert(0, cmd.trim().to_string());
            } else if let Some(cmd) = d.strip_prefix("cleanup:") {
                block.cleanup.insert(0, cmd.trim().to_string());
            } else if let Some(program) = d.strip_prefix("needs:") {
                block.needs.push(program.trim().to_string());
            } else {
                panic!("line {}: unknown doc-test directive {d:?}", j + 1);
            }
        }
        for (n, l) in body {
            if let Some(cmd) = l.strip_prefix("$ ") {
                block.examples.push(Example {
                    line: n,
                    command: cmd.to_string(),
                    expected: vec![],
                });
            } else if let Some(ex) = block.examples.last_mut() {
                ex.expected.push(l.to_string());
            }
        }
        out.push(block);
    }
    out
}

fn normalize(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One line against its pattern: `[..]` matches any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || line.len() < first.len() + last.len() || !line.ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Lines against patterns: a `…` pattern line matches any number of lines.
fn lines_match(pattern: &[String], lines: &[String]) -> bool {
    match pattern.split_first() {
        None => lines.is_empty(),
        Some((p, rest)) if p == "…" => (0..=lines.len()).any(|k| lines_match(rest, &lines[k..])),
        Some((p, rest)) => {
            lines.first().is_some_and(|l| line_matches(p, l)) && lines_match(rest, &lines[1..])
        }
    }
}

/// Trailing blank lines dropped, whitespace normalized.
fn tidy(lines: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = lines.into_iter().map(|l| normalize(&l)).collect();
    while v.last().is_some_and(String::is_empty) {
        v.pop();
    }
    v
}

/// Runs `command` with bash in `dir`, with the variables the page's earlier
/// commands exported (kept in `env`); its stdout and stderr together.
fn run(dir: &Path, env: &Path, command: &str) -> (bool, String) {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_ranktune"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("timeout");
    let script = format!(
        "source \"$DOC_ENV\" 2>/dev/null; exec 2>&1\n{CARGO_SHIM}\n(exit ${{DOC_LAST_RC:-0}})\n{command}\nrc=$?; export DOC_LAST_RC=$rc; export -p > \"$DOC_ENV\"; exit $rc"
    );
    cmd.args(["300", "bash", "-c", &script])
        .env("DOC_ENV", env)
        .current_dir(dir)
        .env("PATH", path)
        .env("REPO", repo())
        .env("DOC_EXAMPLES", examples_dir())
        .env("COLUMNS", "100");
    for (k, _) in std::env::vars() {
        let launcher = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "CI"];
        // The test machine's identity (ranktune_cache::TEST_MACHINE_ENV)
        // passes through: CI runs the pages again under another machine's.
        if (k.starts_with("RANKTUNE_") && k != ranktune_cache::TEST_MACHINE_ENV)
            || k.starts_with("TLLM_")
            || k.starts_with("OMPI_")
            || k.starts_with("PMI_")
            || k.starts_with("SLURM_")
            || launcher.contains(&k.as_str())
        {
            cmd.env_remove(k);
        }
    }
    match cmd.output() {
        Ok(out) => (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned()),
        Err(e) => (false, format!("cannot run bash: {e}")),
    }
}

/// `cargo run -p CRATE --example NAME -- ARGS` as the built example.
const CARGO_SHIM: &str = r#"cargo() {
  if [ "$1" = run ]; then
    local name="" ; shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
      if [ "$1" = --example ]; then name="$2"; shift; fi
      shift
    done
    [ "$1" = -- ] && shift
    "$DOC_EXAMPLES/$name" "$@"
  else
    command cargo "$@"
  fi
}"#;

/// Where cargo puts this build's examples (next to the binary).
fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ranktune")).parent().unwrap().join("examples")
}

fn on_path(program: &str) -> bool {
    if let Some(example) = program.strip_prefix("example:") {
        return examples_dir().join(example).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// The pages whose examples run.
fn pages() -> Vec<PathBuf> {
    let root = repo();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

#[test]
fn every_command_example_in_the_docs_prints_what_the_page_says() {
    let only = std::env::var("RANKTUNE_DOC_PAGE").ok();
    let root = repo();
    let scratch = tempfile::tempdir().unwrap();
    let (mut ran, mut skipped, mut failures) = (0, Vec::new(), Vec::new());
    for page in pages() {
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = scratch.path().join(name.replace('/', "_"));
        std::fs::create_dir_all(&dir).unwrap();
        let env = scratch.path().join(format!("{}.env", name.replace('/', "_")));
        for block in blocks(&text) {
            if let Some(why) = block.skip {
                assert!(!why.is_empty(), "{name}:{}: a skip needs a reason", block.line);
                skipped.push(format!("{name}:{}: {why}", block.line));
                continue;
            }
            if let Some(missing) = block.needs.iter().find(|p| !on_path(p)) {
                let why = format!("{name}:{}: {missing} is not installed", block.line);
                assert!(!ranktune_testkit::redis::in_ci(), "{why}; CI must install it");
                eprintln!("SKIPPED (not in CI): {why}");
                skipped.push(why);
                continue;
            }
            for setup in &block.setup {
                let (ok, out) = run(&dir, &env, setup);
                assert!(ok, "{name}:{}: setup `{setup}` failed:\n{out}", block.line);
            }
            for ex in &block.examples {
                ran += 1;
                let (_, out) = run(&dir, &env, &ex.command);
                let actual = tidy(out.lines().map(str::to_string));
                let expected = tidy(ex.expected.iter().cloned());
                if !lines_match(&expected, &actual) {
                    failures.push(format!(
                        "{name}:{}: `{}`\n--- the page says:\n{}\n--- it prints:\n{}\n",
                        ex.line,
                        ex.command,
                        ex.expected.join("\n"),
                        out.trim_end()
                    ));
                }
            }
            for cleanup in &block.cleanup {
                run(&dir, &env, cleanup);
            }
        }
    }
    eprintln!("doc examples: {ran} ran, {} blocks not run:", skipped.len());
    for s in &skipped {
        eprintln!("  {s}");
    }
    assert!(only.is_some() || ran >= 60, "only {ran} examples found");
    assert!(
        failures.is_empty(),
        "{} of {ran} examples differ:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_matcher_is_strict_outside_its_placeholders() {
    let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(lines_match(&p(&["a [..] c"]), &p(&["a b c"])));
    assert!(!lines_match(&p(&["a [..] c"]), &p(&["a b d"])));
    assert!(lines_match(&p(&["x", "…", "z"]), &p(&["x", "1", "2", "z"])));
    assert!(lines_match(&p(&["x", "…", "z"]), &p(&["x", "z"])));
    assert!(!lines_match(&p(&["x", "…", "z"]), &p(&["x", "1"])));
    assert!(!lines_match(&p(&["x"]), &p(&["x", "extra"])));
    assert_eq!(normalize("  a   b  "), "a b");
    let b = blocks(
        "<!-- doc-test: skip: needs MPI -->\n```\n$ mpirun x\nout\n```\n```rust\n$ no\n```\n",
    );
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].skip.as_deref(), Some("needs MPI"));
    assert_eq!(b[0].examples[0].expected, vec!["out".to_string()]);
}
