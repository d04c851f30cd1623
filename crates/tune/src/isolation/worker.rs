//! The tuner's side of one worker process: send a request, wait for the
//! answer within a deadline, and when the worker dies or overruns, reap it
//! and say why (signal, timeout, memory) as a [`Lost`].
//!
//! Owns one worker's descriptors, its pid and its end. It never decides
//! which candidate to run or what a failure means for the tune (the bench
//! does), and never starts a worker itself (`fork` and `spawn` do).

use super::protocol::{self, FromWorker, ToWorker, MAX_LINE};
use super::reasons;
use super::sys::{self, Reaped};
use crate::failure::FailureKind;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// How much of a worker's standard error is kept (its end), for reasons.
const STDERR_KEEP: usize = 8 << 10;
/// How often a waiting parent checks that the worker is still alive, when
/// its sockets stay open (a sibling process may hold a copy of them).
const ALIVE_CHECK: Duration = Duration::from_millis(50);
/// How long a worker may take to exit after its requests end.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// A worker that is gone (reaped), and why.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Lost {
    /// Crash, timeout or memory (or error, when the worker broke the protocol).
    pub(crate) kind: FailureKind,
    /// The reason: `crashed: SIGSEGV (signal 11)`, `timed out after …`.
    pub(crate) message: String,
}

/// One live worker process.
pub(crate) struct Worker {
    pid: libc::pid_t,
    /// Requests out, answers in.
    sock: OwnedFd,
    /// Its standard error (and output), non-blocking; `None` once closed.
    stderr: Option<OwnedFd>,
    /// Bytes of an answer line read so far.
    inbuf: Vec<u8>,
    /// The end of its standard error.
    errtail: Vec<u8>,
    /// The memory it may add (bytes), for reasons.
    memory: Option<u64>,
    /// Set once reaped: `Drop` then has nothing to do.
    reaped: bool,
}

impl Worker {
    /// Takes over a started worker: its pid, the parent's end of its socket
    /// and the read end of its standard error, both already non-blocking.
    pub(crate) fn new(
        pid: libc::pid_t,
        sock: OwnedFd,
        stderr: OwnedFd,
        memory: Option<u64>,
    ) -> Worker {
        Worker {
            pid,
            sock,
            stderr: Some(stderr),
            inbuf: Vec::new(),
            errtail: Vec::new(),
            memory,
            reaped: false,
        }
    }

    /// Sends `msg` (when given) and waits up to `limit` for the next answer.
    /// `Err`: the worker is gone (reaped; drop it) and why.
    pub(crate) fn request(
        &mut self,
        msg: Option<&ToWorker>,
        limit: Duration,
    ) -> Result<FromWorker, Lost> {
        let t0 = Instant::now();
        if let Some(msg) = msg {
            // A worker that stops reading (a full socket buffer) is timed
            // out by the same limit as its answer.
            match sys::write_all_until(self.sock.as_raw_fd(), &protocol::encode(msg), t0 + limit) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    let why = format!(
                        "timed out after {:.1} s (limit {:.1} s) sending it a request",
                        t0.elapsed().as_secs_f64(),
                        limit.as_secs_f64()
                    );
                    return Err(self.kill_for(FailureKind::Timeout, why));
                }
                // It closed its end: it died (or is dying).
                Err(_) => return Err(self.died()),
            }
        }
        loop {
            if let Some(line) = self.take_line() {
                return match protocol::decode::<FromWorker>(&line) {
                    Ok(m) => Ok(m),
                    Err(e) => Err(self.kill_for(FailureKind::Crash, e.to_string())),
                };
            }
            if self.inbuf.len() > MAX_LINE {
                let why = format!("the worker wrote more than {MAX_LINE} bytes without a newline");
                return Err(self.kill_for(FailureKind::Crash, why));
            }
            let spent = t0.elapsed();
            if spent >= limit {
                let why = format!(
                    "timed out after {:.1} s (limit {:.1} s)",
                    spent.as_secs_f64(),
                    limit.as_secs_f64()
                );
                return Err(self.kill_for(FailureKind::Timeout, why));
            }
            let wait = (limit - spent).min(ALIVE_CHECK);
            let err_fd = self.stderr.as_ref().map_or(-1, |f| f.as_raw_fd());
            let ready = match sys::poll_readable([self.sock.as_raw_fd(), err_fd], wait) {
                Ok(r) => r,
                Err(e) => return Err(self.kill_for(FailureKind::Error, format!("poll: {e}"))),
            };
            if ready[1] {
                self.drain_stderr();
            }
            if ready[0] {
                match self.read_answer() {
                    Ok(true) => {}
                    Ok(false) => return Err(self.died()),
                    Err(e) => {
                        return Err(self.kill_for(FailureKind::Error, format!("reading: {e}")))
                    }
                }
            } else if !ready[1] {
                // Nothing to read: is it still there?
                match sys::reap(self.pid, false) {
                    Ok(Some(r)) => return Err(self.lost_by(r)),
                    Ok(None) => {}
                    Err(e) => return Err(self.kill_for(FailureKind::Error, format!("wait4: {e}"))),
                }
            }
        }
    }

    /// Kills and reaps the worker now (an interrupted measure, a worker
    /// that answered out of turn).
    pub(crate) fn kill(&mut self) {
        if !self.reaped {
            sys::kill(self.pid);
            let _ = sys::reap(self.pid, true);
            self.reaped = true;
        }
    }

    /// Tells the worker to exit (the end of its input) without waiting.
    pub(crate) fn tell_to_end(&self) {
        // SAFETY: shutdown on our own descriptor.
        unsafe { libc::shutdown(self.sock.as_raw_fd(), libc::SHUT_WR) };
    }

    /// Reaps the worker if it has ended; true once it is reaped (or its
    /// status cannot be had: nothing is left to wait for).
    pub(crate) fn try_reap(&mut self) -> bool {
        if !self.reaped && !matches!(sys::reap(self.pid, false), Ok(None)) {
            self.reaped = true;
        }
        self.reaped
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// A complete line from `inbuf`, if there is one.
    fn take_line(&mut self) -> Option<Vec<u8>> {
        let end = self.inbuf.iter().position(|&b| b == b'\n')?;
        let rest = self.inbuf.split_off(end + 1);
        Some(std::mem::replace(&mut self.inbuf, rest))
    }

    /// Reads what the socket has. `Ok(false)`: end of file.
    fn read_answer(&mut self) -> std::io::Result<bool> {
        let mut buf = [0u8; 4096];
        loop {
            match sys::read(self.sock.as_raw_fd(), &mut buf) {
                Ok(0) => return Ok(false),
                Ok(n) => self.inbuf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads what the standard error has, keeping its end.
    fn drain_stderr(&mut self) {
        let Some(fd) = self.stderr.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        let mut buf = [0u8; 4096];
        loop {
            match sys::read(fd, &mut buf) {
                Ok(0) => {
                    self.stderr = None;
                    return;
                }
                Ok(n) => {
                    self.errtail.extend_from_slice(&buf[..n]);
                    if self.errtail.len() > STDERR_KEEP {
                        let cut = self.errtail.len() - STDERR_KEEP;
                        self.errtail.drain(..cut);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.stderr = None;
                    return;
                }
            }
        }
    }

    /// The worker closed its socket: reap it (it is exiting) and say why.
    fn died(&mut self) -> Lost {
        let deadline = Instant::now() + EXIT_GRACE;
        loop {
            match sys::reap(self.pid, false) {
                Ok(Some(r)) => return self.lost_by(r),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(None) | Err(_) => {
                    return self.kill_for(
                        FailureKind::Crash,
                        "closed its connection without exiting".to_string(),
                    )
                }
            }
        }
    }

    /// Kills and reaps the worker; the failure is `kind` with `why`, as
    /// [`reasons::classify`] judges it.
    fn kill_for(&mut self, kind: FailureKind, why: String) -> Lost {
        sys::kill(self.pid);
        let reaped = sys::reap(self.pid, true).ok().flatten();
        self.reaped = true;
        self.drain_stderr();
        self.judge(reaped, Some((kind, why)))
    }

    /// Why a reaped worker ended by itself.
    fn lost_by(&mut self, r: Reaped) -> Lost {
        self.reaped = true;
        self.drain_stderr();
        self.judge(Some(r), None)
    }

    /// [`reasons::classify`] of what this supervisor saw.
    fn judge(&self, r: Option<Reaped>, killed_for: Option<(FailureKind, String)>) -> Lost {
        let err = String::from_utf8_lossy(&self.errtail);
        let (kind, message) = reasons::classify(&reasons::Ending {
            exit: r.map(|r| r.exit),
            max_rss: r.map_or(0, |r| r.max_rss),
            killed_for,
            memory_limit: self.memory,
            stderr: &err,
        });
        Lost { kind, message }
    }
}

impl Drop for Worker {
    /// Ends the worker: closing its socket tells it to exit; one that does
    /// not within a grace period is killed. Always reaped.
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        // SAFETY: shutdown on our own descriptor; the worker reads end of
        // file, exits, and its end of the socket closes.
        unsafe { libc::shutdown(self.sock.as_raw_fd(), libc::SHUT_WR) };
        let deadline = Instant::now() + EXIT_GRACE;
        let _ = sys::poll_readable([self.sock.as_raw_fd()], EXIT_GRACE);
        while Instant::now() < deadline {
            match sys::reap(self.pid, false) {
                Ok(None) => std::thread::sleep(Duration::from_micros(50)),
                Ok(Some(_)) | Err(_) => return,
            }
        }
        sys::kill(self.pid);
        let _ = sys::reap(self.pid, true);
    }
}
