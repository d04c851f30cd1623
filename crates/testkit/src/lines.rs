//! Reading a child's output pipe line by line on a thread: a test can wait,
//! with a bound, for the line that says the child reached some point, while
//! the child goes on printing, and still get every byte at the end.
//!
//! Owns: one reader thread per pipe, which drains it to its end (so a chatty
//! child never blocks on a full pipe). Never: waits without a bound for a
//! line, or drops output (every byte is kept for [`LineReader::finish`]).

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The lines of one pipe, read on a thread as the child writes them.
///
/// Lines come without their line ending (`\n` or `\r\n`, as
/// `BufRead::lines` gives them); bytes that are not UTF-8 are replaced.
pub struct LineReader {
    rx: Receiver<String>,
    reader: JoinHandle<Vec<u8>>,
}

impl LineReader {
    /// Starts reading `pipe` (e.g. a child's `stdout.take()`) on a thread.
    pub fn read(pipe: impl Read + Send + 'static) -> Self {
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut pipe = BufReader::new(pipe);
            let (mut all, mut line) = (Vec::new(), Vec::new());
            // A read error ends the pipe as its end does: the child is gone.
            while pipe.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                all.extend_from_slice(&line);
                let text = String::from_utf8_lossy(&line);
                let text =
                    text.strip_suffix('\n').map_or(&*text, |t| t.strip_suffix('\r').unwrap_or(t));
                let _ = tx.send(text.to_owned());
                line.clear();
            }
            all
        });
        LineReader { rx, reader }
    }

    /// The next line not yet taken, waiting at most `limit` for it.
    ///
    /// # Errors
    /// `Timeout` when none came in time; `Disconnected` when the pipe ended
    /// (the child exited or closed it) with no line left.
    pub fn next_within(&self, limit: Duration) -> Result<String, RecvTimeoutError> {
        self.rx.recv_timeout(limit)
    }

    /// Takes lines until one satisfies `wanted`, and returns it, waiting at
    /// most `limit` in all.
    ///
    /// # Errors
    /// `Timeout` when no such line came in time; `Disconnected` when the
    /// pipe ended first (the child exited or closed it).
    pub fn wait_for(
        &self,
        mut wanted: impl FnMut(&str) -> bool,
        limit: Duration,
    ) -> Result<String, RecvTimeoutError> {
        let deadline = Instant::now() + limit;
        loop {
            let line = self.next_within(deadline.saturating_duration_since(Instant::now()))?;
            if wanted(&line) {
                return Ok(line);
            }
        }
    }

    /// Waits for the pipe's end (the child exited or closed it), then
    /// returns the lines not taken yet.
    pub fn rest(self) -> Vec<String> {
        let _ = self.reader.join();
        self.rx.try_iter().collect()
    }

    /// Waits for the pipe's end (the child exited or closed it), then
    /// returns everything read from it, taken lines included.
    pub fn finish(self) -> Vec<u8> {
        self.reader.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn lines_are_taken_one_by_one_and_all_bytes_kept() {
        let text = b"one\r\nsaved 1\nsaved 2\n\xff tail".to_vec();
        let lines = LineReader::read(Cursor::new(text.clone()));
        let limit = Duration::from_secs(60);
        assert_eq!(lines.next_within(limit).as_deref(), Ok("one"));
        assert_eq!(lines.wait_for(|l| l.starts_with("saved"), limit).as_deref(), Ok("saved 1"));
        assert_eq!(lines.finish(), text);

        let lines = LineReader::read(Cursor::new(text));
        let never = lines.wait_for(|l| l == "never", limit);
        assert_eq!(never, Err(RecvTimeoutError::Disconnected), "the pipe ended first");
        let lines = LineReader::read(Cursor::new(b"a\nb".to_vec()));
        assert_eq!(lines.next_within(limit).as_deref(), Ok("a"));
        assert_eq!(lines.rest(), ["b"]);

        let (_keep, pipe) = std::os::unix::net::UnixStream::pair().unwrap();
        let silent = LineReader::read(pipe);
        let short = Duration::from_millis(10);
        assert_eq!(silent.next_within(short), Err(RecvTimeoutError::Timeout));
    }
}
