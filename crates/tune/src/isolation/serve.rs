//! The worker's side of the protocol: its loop over the tuner's requests,
//! the one loop of every worker — a Rust tuner's forked worker and the
//! workers Python starts for `ranktune.autotune` (through the bindings).
//! It says `ready` (unless the worker says it after its `init`), reads one
//! line at a time, hands each request (or why its line is not one) to the
//! worker's answer, and writes the answer's line.
//!
//! Owns the reading, the framing and the writing; what a request means is
//! the caller's. Runs in a worker only.

use super::protocol::{self, FromWorker, ProtocolError, Ready, ToWorker, MAX_LINE};
use super::sys;
use std::os::fd::RawFd;

/// Answers requests on `fd` with `answer` until the end of input (or a
/// line longer than [`MAX_LINE`], or a socket that cannot be written: the
/// tuner is gone); says `ready` first when `ready`. `answer` returning
/// `None` stops the loop at once. Returns whether the loop ended at the end
/// of input or a broken socket (`true`), rather than by `answer`.
pub fn serve(
    fd: RawFd,
    ready: bool,
    answer: &mut dyn FnMut(Result<ToWorker, ProtocolError>) -> Option<FromWorker>,
) -> bool {
    if ready {
        let hello = FromWorker::Ready { ready: Ready { pid: std::process::id() } };
        if sys::write_all(fd, &protocol::encode(&hello)).is_err() {
            return true;
        }
    }
    let mut buf = Vec::new();
    while let Some(line) = read_line(fd, &mut buf) {
        let Some(reply) = answer(protocol::decode::<ToWorker>(&line)) else { return false };
        if sys::write_all(fd, &protocol::encode(&reply)).is_err() {
            return true;
        }
    }
    true
}

/// The next line from `fd` (blocking); `None` at the end of input, on an
/// error, or for a line longer than [`MAX_LINE`].
fn read_line(fd: RawFd, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    loop {
        if let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let rest = buf.split_off(end + 1);
            return Some(std::mem::replace(buf, rest));
        }
        if buf.len() > MAX_LINE {
            return None;
        }
        let mut chunk = [0u8; 4096];
        match sys::read(fd, &mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
