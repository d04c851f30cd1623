//! The wire protocol between a launcher and the rank processes it starts:
//! both sides of it, the writer a child rank uses and the reader the
//! [`Launcher`](super::Launcher) uses.
//!
//! A child rank writes two kinds of output, on two streams:
//!
//! - **stderr: progress lines and everything else.** A progress line is the
//!   prefix [`PROGRESS_PREFIX`], a space, the number of steps done, a space
//!   and the number of steps in all, e.g. `ranktune-progress 3 12`. A child
//!   writes `… 0 <total>` when it knows its total and one line after each
//!   step. Every other stderr line (logs, warnings, the error of a failing
//!   rank) is text for people, which the launcher passes on with the rank.
//! - **stdout: one result document.** When it has finished, a child writes
//!   its result as one JSON object on one line (see [`write_result`]). The
//!   reader takes the *last* stdout line that starts with `{` and ignores
//!   every other line, so stray output before the document does no harm.
//!
//! How bad input reads (the launcher never fails because of a line):
//!
//! - A stderr line whose first word is the prefix is always progress; a count
//!   that is missing or not a number reads as 0. Any other line is text,
//!   whatever it holds.
//! - A result document that is missing, cut short (a child killed while
//!   writing it) or not the expected JSON is a [`ResultError`]; the launcher
//!   reports that rank as one that printed no result.
//!
//! This module only formats and parses: it never starts processes and never
//! decides what a failure means for the job.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::Write;

/// First word of every progress line a child rank writes to stderr.
pub const PROGRESS_PREFIX: &str = "ranktune-progress";

/// One progress line, without its newline: `ranktune-progress <done> <total>`.
///
/// ```
/// assert_eq!(ranktune_launch::progress_line(3, 12), "ranktune-progress 3 12");
/// ```
pub fn progress_line(done: u64, total: u64) -> String {
    format!("{PROGRESS_PREFIX} {done} {total}")
}

/// One stderr line of a child rank, as the launcher reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StderrLine<'a> {
    /// A progress line: steps done and steps in all (0 where unreadable).
    Progress {
        /// Steps this rank has done.
        done: u64,
        /// Steps this rank has in all.
        total: u64,
    },
    /// Any other line, for people.
    Text(&'a str),
}

/// Reads one stderr line of a child rank (without its line ending).
///
/// ```
/// use ranktune_launch::{parse_stderr_line, StderrLine};
/// assert_eq!(parse_stderr_line("ranktune-progress 3 12"), StderrLine::Progress { done: 3, total: 12 });
/// assert_eq!(parse_stderr_line(" WARN slow"), StderrLine::Text(" WARN slow"));
/// ```
pub fn parse_stderr_line(line: &str) -> StderrLine<'_> {
    let mut words = line.split_whitespace();
    if words.next() != Some(PROGRESS_PREFIX) {
        return StderrLine::Text(line);
    }
    let mut count = || words.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let done = count();
    let total = count();
    StderrLine::Progress { done, total }
}

/// The child side of the progress lines: counts steps and writes one line
/// per step to its writer (stderr for a real child rank).
///
/// Writing is best effort: a launcher that has gone away must not make the
/// rank fail, so write errors are ignored.
///
/// With this crate's `fault-injection` feature (tests only, never in real
/// builds), the writer also plays a crashed rank:
/// `RANKTUNE_TEST_DIE_AT=<rank>:<n>` makes rank `<rank>` abort when it has
/// reported `<n>` steps done (before its step `<n>`, counting from 0), with no
/// cleanup. Without the feature that variable is never read.
#[derive(Debug)]
pub struct ProgressWriter<W: Write> {
    out: W,
    done: u64,
    total: u64,
    #[cfg(feature = "fault-injection")]
    die_at: Option<u64>,
}

impl ProgressWriter<std::io::Stderr> {
    /// A writer to this process's stderr, which has written `… 0 <total>`.
    pub fn stderr(total: u64) -> Self {
        ProgressWriter::start(std::io::stderr(), total)
    }
}

impl<W: Write> ProgressWriter<W> {
    /// A writer to `out`, which has written `… 0 <total>`.
    pub fn start(out: W, total: u64) -> Self {
        let mut w = ProgressWriter {
            out,
            done: 0,
            total,
            #[cfg(feature = "fault-injection")]
            die_at: super::fault::die_at_from_env(),
        };
        w.write();
        w
    }

    /// Counts one more step done and writes its line.
    pub fn step(&mut self) {
        self.done += 1;
        self.write();
    }

    /// Steps done so far.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Steps in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The writer, e.g. to read what a test wrote.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn write(&mut self) {
        // One write per line, so a line never mixes with another writer's.
        let line = progress_line(self.done, self.total) + "\n";
        let _ = self.out.write_all(line.as_bytes());
        let _ = self.out.flush();
        #[cfg(feature = "fault-injection")]
        super::fault::maybe_die(self.die_at, self.done, self.total);
    }
}

/// Writes `result` as the child's result document: one JSON object on one
/// line, then a newline, then flushes. Encodes before writing, so a value
/// that cannot be encoded writes nothing.
///
/// ```
/// let mut out = Vec::new();
/// ranktune_launch::write_result(&mut out, &serde_json::json!({"rank": 1})).unwrap();
/// assert_eq!(out, b"{\"rank\":1}\n");
/// ```
pub fn write_result<W: Write, T: Serialize + ?Sized>(
    mut out: W,
    result: &T,
) -> std::io::Result<()> {
    let line = serde_json::to_string(result)?;
    writeln!(out, "{line}")?;
    out.flush()
}

/// Why a child's stdout held no usable result document.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResultError {
    /// No stdout line starts with `{`.
    #[error("no result document on stdout")]
    Missing,
    /// The last line starting with `{` is not the expected document (cut
    /// short, or another shape).
    #[error("the result document on stdout is not valid")]
    Invalid(#[source] serde_json::Error),
}

/// Reads a child's result document from everything it wrote to stdout.
///
/// ```
/// let doc: serde_json::Value = ranktune_launch::read_result("starting\n{\"rank\":1}\n").unwrap();
/// assert_eq!(doc["rank"], 1);
/// ```
pub fn read_result<T: DeserializeOwned>(stdout: &str) -> Result<T, ResultError> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or(ResultError::Missing)?;
    serde_json::from_str(line).map_err(ResultError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Doc {
        rank: u32,
        rows: Vec<String>,
    }

    #[test]
    fn progress_lines_round_trip() {
        for (done, total) in [(0, 0), (0, 12), (7, 12), (u64::MAX, u64::MAX)] {
            let line = progress_line(done, total);
            assert_eq!(parse_stderr_line(&line), StderrLine::Progress { done, total });
        }
        assert_eq!(
            parse_stderr_line("  ranktune-progress   4\t9  "),
            StderrLine::Progress { done: 4, total: 9 }
        );
        assert_eq!(
            parse_stderr_line("ranktune-progress 4 9 extra words"),
            StderrLine::Progress { done: 4, total: 9 }
        );
    }

    #[test]
    fn bad_progress_lines_read_as_zero_and_other_lines_as_text() {
        let zero = |done, total| StderrLine::Progress { done, total };
        assert_eq!(parse_stderr_line("ranktune-progress"), zero(0, 0));
        assert_eq!(parse_stderr_line("ranktune-progress x 9"), zero(0, 9));
        assert_eq!(parse_stderr_line("ranktune-progress 3 -1"), zero(3, 0));
        assert_eq!(parse_stderr_line("ranktune-progress 3.5 9"), zero(0, 9));
        for text in [
            "",
            "   ",
            "ranktune-progress3 9",
            "ranktune-progresses 1 2",
            "warning: ranktune-progress 1 2",
            "error: loading the tuning cache",
        ] {
            assert_eq!(parse_stderr_line(text), StderrLine::Text(text), "{text:?}");
        }
    }

    #[test]
    fn the_writer_writes_a_line_at_start_and_after_each_step() {
        let mut w = ProgressWriter::start(Vec::new(), 2);
        w.step();
        w.step();
        assert_eq!((w.done(), w.total()), (2, 2));
        let out = String::from_utf8(w.into_inner()).unwrap();
        assert_eq!(out, "ranktune-progress 0 2\nranktune-progress 1 2\nranktune-progress 2 2\n");
    }

    #[test]
    fn result_documents_round_trip_and_the_last_one_wins() {
        let doc = Doc { rank: 3, rows: vec!["a\nb".into(), "{".into()] };
        let mut out = b"log line\n{\"rank\":9,\"rows\":[]}\n".to_vec();
        write_result(&mut out, &doc).unwrap();
        out.extend_from_slice(b"trailing text\n");
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out.lines().filter(|l| l.starts_with('{')).count(), 2);
        assert_eq!(read_result::<Doc>(&out).unwrap(), doc);
        assert_eq!(read_result::<Doc>("  {\"rank\":1,\"rows\":[]}").unwrap().rank, 1);
    }

    #[test]
    fn missing_truncated_and_wrong_documents_are_errors() {
        assert!(matches!(read_result::<Doc>(""), Err(ResultError::Missing)));
        assert!(matches!(read_result::<Doc>("no json here\n[1,2]\n"), Err(ResultError::Missing)));
        let mut full = Vec::new();
        write_result(&mut full, &Doc { rank: 1, rows: vec!["x".into()] }).unwrap();
        let full = String::from_utf8(full).unwrap();
        for cut in 1..full.trim_end().len() {
            let truncated = &full[..cut];
            assert!(
                matches!(read_result::<Doc>(truncated), Err(ResultError::Invalid(_))),
                "{truncated:?}"
            );
        }
        assert!(matches!(
            read_result::<Doc>("{\"rank\":\"one\",\"rows\":[]}"),
            Err(ResultError::Invalid(_))
        ));
        // A cut-short document after a good one: the last one counts.
        let two = format!("{full}{}", &full[..5]);
        assert!(matches!(read_result::<Doc>(&two), Err(ResultError::Invalid(_))));
    }
}
