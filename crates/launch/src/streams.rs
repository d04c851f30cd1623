//! Reading one started rank: a thread drains its stdout into a string, a
//! thread reads its stderr line by line, sends progress and text lines to
//! the launcher, and keeps the last text lines for a failure message.
//!
//! Readers never stop before the end of a stream (bad UTF-8 is read
//! lossily, a send to a launcher that stopped listening is ignored), so a
//! rank can never block on a full pipe.

use super::protocol::{parse_stderr_line, StderrLine};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ExitStatus};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// How many of a rank's last stderr text lines a failure message shows.
pub const STDERR_TAIL_LINES: usize = 20;

/// What a rank's stderr reader sends to the launcher.
pub(super) enum Event {
    Progress { rank: u32, done: u64, total: u64 },
    Line { rank: u32, line: String },
}

/// A started rank and the threads reading its output.
pub(super) struct Rank {
    rank: u32,
    proc: Child,
    /// Everything it wrote to stdout.
    stdout: JoinHandle<String>,
    /// Its last stderr text lines.
    stderr: JoinHandle<VecDeque<String>>,
}

impl Rank {
    /// Starts reading `proc`'s stdout and stderr.
    pub(super) fn follow(rank: u32, mut proc: Child, tx: mpsc::Sender<Event>) -> Rank {
        let out = proc.stdout.take();
        let err = proc.stderr.take();
        let stdout = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut o) = out {
                let _ = o.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        });
        let stderr = std::thread::spawn(move || {
            let mut tail = VecDeque::new();
            if let Some(e) = err {
                for_each_line(e, |line| match parse_stderr_line(&line) {
                    StderrLine::Progress { done, total } => {
                        let _ = tx.send(Event::Progress { rank, done, total });
                    }
                    StderrLine::Text(_) => {
                        if tail.len() >= STDERR_TAIL_LINES {
                            tail.pop_front();
                        }
                        tail.push_back(line.clone());
                        let _ = tx.send(Event::Line { rank, line });
                    }
                });
            }
            tail
        });
        Rank { rank, proc, stdout, stderr }
    }

    /// Kills the process and reaps it (when another rank could not start).
    pub(super) fn stop(mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }

    /// Sends `sig` to the process (it has not been reaped, so its pid is
    /// still its own). A rank that already exited ignores it.
    pub(super) fn signal(&self, sig: i32) {
        let _ = super::sys::send_signal(self.proc.id(), sig);
    }

    /// Whether the process has exited (reaping it; [`Rank::wait`] still
    /// returns its status).
    pub(super) fn has_exited(&mut self) -> bool {
        !matches!(self.proc.try_wait(), Ok(None))
    }

    /// Kills the process (SIGKILL) without reaping it; nothing for one that
    /// has been reaped.
    pub(super) fn kill(&mut self) {
        let _ = self.proc.kill();
    }

    /// Waits for the process and for its readers.
    pub(super) fn wait(mut self) -> std::io::Result<Ended> {
        let status = self.proc.wait()?;
        Ok(Ended {
            status,
            stdout: self.stdout.join().unwrap_or_default(),
            stderr_tail: self.stderr.join().unwrap_or_default().into(),
        })
    }

    /// Its rank.
    pub(super) fn rank(&self) -> u32 {
        self.rank
    }
}

/// A rank that has exited, and everything it wrote.
pub(super) struct Ended {
    pub(super) status: ExitStatus,
    /// Everything it wrote to stdout (lossy UTF-8).
    pub(super) stdout: String,
    /// Its last stderr text lines.
    pub(super) stderr_tail: Vec<String>,
}

/// Calls `f` with each line of `r` (lossy UTF-8, without `\n` or `\r\n`)
/// until its end or a read error.
fn for_each_line(r: impl Read, mut f: impl FnMut(String)) {
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                    if buf.last() == Some(&b'\r') {
                        buf.pop();
                    }
                }
                f(String::from_utf8_lossy(&buf).into_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for_each_line(input, |l| out.push(l));
        out
    }

    #[test]
    fn lines_are_split_lossily_and_never_stop_early() {
        assert_eq!(lines(b""), Vec::<String>::new());
        assert_eq!(lines(b"a\nb\r\n\nlast"), ["a", "b", "", "last"]);
        assert_eq!(lines(b"bad \xff byte\nafter\n"), ["bad \u{fffd} byte", "after"]);
    }
}
