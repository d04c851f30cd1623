//! A worker process that another program started, supervised by the
//! tuner's own rules: the Python package forks or spawns its workers itself
//! (they run Python callables), and hands each one's pid and descriptors to
//! an [`AdoptedWorker`], so that sending a request, its deadline, reading
//! the answer, keeping the end of its standard error, reaping it and
//! judging why it was lost ([`reasons::classify`](super::reasons::classify))
//! are the tuner's, written once.
//!
//! Owns the adopted worker's handle; never starts a process and never
//! decides what is measured.

use super::pool::Pool;
use super::protocol::{FromWorker, ToWorker};
use super::sys;
use super::worker::Worker;
use super::{Limits, WorkerCommand};
use crate::failure::FailureKind;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

/// A worker that is gone (reaped), or a candidate that failed in one, and
/// why.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerLost {
    /// `crash`, `timeout`, `memory` (hard: they cost the worker), or
    /// `error`/`panic` (the candidate's own failure, or a broken protocol).
    pub kind: FailureKind,
    /// The reason, as [`reasons::classify`](super::reasons::classify) words it.
    pub message: String,
}

/// A started worker process (see the module docs).
pub struct AdoptedWorker {
    worker: Worker,
}

impl AdoptedWorker {
    /// Takes over the worker `pid`: the parent's end of its protocol socket
    /// and the read end of its standard error (both made non-blocking
    /// here), and the memory it may add (bytes; for reasons). From here on
    /// this handle reaps it: dropping the handle ends it (the end of its
    /// input, then SIGKILL after a grace period).
    pub fn adopt(
        pid: i32,
        sock: OwnedFd,
        stderr: OwnedFd,
        memory: Option<u64>,
    ) -> std::io::Result<AdoptedWorker> {
        sys::set_nonblocking(sock.as_raw_fd())?;
        sys::set_nonblocking(stderr.as_raw_fd())?;
        Ok(AdoptedWorker { worker: Worker::new(pid, sock, stderr, memory) })
    }

    /// Starts `cmd`'s program as a worker that sets its own memory limit
    /// (a fresh interpreter starts far smaller than this process, so no
    /// limit fits it at exec): its standard input and output one socket,
    /// its standard error a pipe, the worker's signals set between fork
    /// and exec, `cmd.env` on top of this process's environment.
    /// `cmd.limits.memory` is what it may add, for the reasons; `cmd.spec`
    /// is not used (the caller's init carries it).
    pub fn spawn(cmd: &WorkerCommand) -> std::io::Result<AdoptedWorker> {
        super::spawn::start_program(cmd, None).map(|worker| AdoptedWorker { worker })
    }

    /// Its process id.
    pub fn pid(&self) -> i32 {
        self.worker.pid()
    }

    /// Sends `msg` (when given) and waits up to `limit` (for the send too)
    /// for the next answer. `Err`: the worker is gone (reaped), and why.
    pub fn request(
        &mut self,
        msg: Option<&ToWorker>,
        limit: Duration,
    ) -> Result<FromWorker, WorkerLost> {
        self.worker.request(msg, limit).map_err(|l| WorkerLost { kind: l.kind, message: l.message })
    }

    /// Kills and reaps it now.
    pub fn kill(&mut self) {
        self.worker.kill();
    }

    /// Tells it to exit (the end of its input) without waiting; reap it
    /// later with [`AdoptedWorker::try_reap`] or by dropping the handle.
    pub fn tell_to_end(&self) {
        self.worker.tell_to_end();
    }

    /// Reaps it if it has ended; true once it is reaped.
    pub fn try_reap(&mut self) -> bool {
        self.worker.try_reap()
    }
}

/// The workers of one op, started by someone else: the tuner's own pool
/// policy (one worker at a time, reused while it stays healthy, a new one
/// after a loss; the time limit's reference, the fallback's slowest
/// request per run; a start that failed fails the bucket's later
/// candidates with its reason) around workers the caller starts. A worker
/// may be kept for the op's next bucket, which then sends it its `init`
/// first ([`AdoptedPool::new_bucket`]).
pub struct AdoptedPool {
    pool: Pool,
    /// The kept worker has not taken this bucket's `init` yet.
    needs_init: bool,
}

impl AdoptedPool {
    /// A pool under `limits`, with no worker yet.
    pub fn new(limits: Limits) -> AdoptedPool {
        AdoptedPool { pool: Pool::with_limits(limits), needs_init: false }
    }

    /// A new bucket: its own time reference, no failed start yet, and a
    /// kept worker takes the bucket's `init` before it runs anything.
    pub fn new_bucket(&mut self) {
        self.pool.new_bucket();
        self.needs_init = self.pool.has_worker();
    }

    /// Runs candidate `position` `reps` times (`fallback`: it is the op's
    /// fallback) and returns the worker's time of the runs, µs. A worker is
    /// started first when none runs: `start` makes one, with the message it
    /// must answer `ready` to (`None`: its first answer, unasked); a kept
    /// one is sent `init` first (when given).
    pub fn run(
        &mut self,
        position: usize,
        reps: u32,
        fallback: bool,
        init: Option<&ToWorker>,
        start: impl FnOnce() -> std::io::Result<(AdoptedWorker, Option<ToWorker>)>,
    ) -> Result<f64, WorkerLost> {
        let failed = |f: super::pool::Failed| WorkerLost { kind: f.kind, message: f.message };
        if self.needs_init {
            self.needs_init = false;
            if let Some(init) = init {
                self.pool.reinit(init).map_err(failed)?;
            }
        }
        if !self.pool.has_worker() {
            self.pool.start_with(|| start().map(|(w, hello)| (w.worker, hello))).map_err(failed)?;
        }
        self.pool.run(position, reps, fallback).map_err(failed)
    }

    /// Workers started, and the seconds they took until ready.
    pub fn starts(&self) -> (u32, f64) {
        (self.pool.starts, self.pool.start_seconds)
    }

    /// The running worker's process id.
    pub fn worker_pid(&self) -> Option<i32> {
        self.pool.worker_pid()
    }

    /// Ends the worker: `wait`, until it exited (SIGKILL after a grace
    /// period); else it is told to exit and reaped later ([`reap_ended`]),
    /// so the caller need not wait for a forked copy of a big process to be
    /// torn down.
    pub fn end(&mut self, wait: bool) {
        if let Some(w) = self.pool.take_worker() {
            if wait {
                drop(w);
            } else {
                end_later(w);
            }
        }
    }

    /// Kills the worker at once (an interrupted measure).
    pub fn kill(&mut self) {
        if let Some(mut w) = self.pool.take_worker() {
            w.kill();
        }
    }
}

impl Drop for AdoptedPool {
    /// A dropped pool's worker is told to exit and reaped later: a drop
    /// (a garbage collection, in Python) never waits for it.
    fn drop(&mut self) {
        self.end(false);
    }
}

/// Workers told to exit and not reaped yet.
static ENDING: Mutex<Vec<Worker>> = Mutex::new(Vec::new());

fn end_later(w: Worker) {
    w.tell_to_end();
    ENDING.lock().unwrap_or_else(|p| p.into_inner()).push(w);
    reap_ended(false);
}

/// Reaps the workers told to exit that have; `wait`: all of them, killing
/// one that does not exit within the grace period.
pub fn reap_ended(wait: bool) {
    let mut ending = std::mem::take(&mut *ENDING.lock().unwrap_or_else(|p| p.into_inner()));
    if !wait {
        ending.retain_mut(|w| !w.try_reap());
    }
    // What is left: waited for by its drop (wait), or kept for later.
    if wait {
        drop(ending);
    } else {
        ENDING.lock().unwrap_or_else(|p| p.into_inner()).append(&mut ending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::protocol::{Init, PROTOCOL_VERSION};

    /// A real child that never reads its socket nor answers.
    fn silent_child() -> (AdoptedWorker, OwnedFd, OwnedFd, std::process::Child) {
        let child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let (parent_sock, child_sock) = sys::socket_pair().unwrap();
        let (err_read, err_write) = sys::pipe().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let w = AdoptedWorker::adopt(pid, parent_sock, err_read, None).unwrap();
        (w, child_sock, err_write, child)
    }

    #[test]
    fn a_worker_that_stops_reading_times_out_on_the_send_and_is_reaped() {
        let (mut w, _sock, _err, _child) = silent_child();
        // Far more than a socket's buffer: the send blocks on a full buffer.
        let init = Init {
            protocol: PROTOCOL_VERSION,
            op: "op".into(),
            bucket: vec![],
            candidates: vec![],
            spec: serde_json::json!("x".repeat(8 << 20)),
        };
        let t0 = std::time::Instant::now();
        let lost =
            w.request(Some(&ToWorker::Init { init }), Duration::from_millis(300)).unwrap_err();
        assert_eq!(lost.kind, FailureKind::Timeout, "{lost:?}");
        assert!(lost.message.contains("sending it a request"), "{}", lost.message);
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        assert!(w.try_reap(), "the worker was killed and reaped");
    }

    #[test]
    fn a_silent_worker_times_out_and_one_told_to_end_is_reaped_once_gone() {
        let (mut w, _sock, _err, _child) = silent_child();
        let lost = w.request(None, Duration::from_millis(100)).unwrap_err();
        assert_eq!(lost.kind, FailureKind::Timeout);
        assert!(lost.message.starts_with("timed out after"), "{}", lost.message);
        let (mut w, _sock, _err, _child) = silent_child();
        w.tell_to_end();
        assert!(!w.try_reap(), "sleep does not read its input: still running");
        w.kill();
        assert!(w.try_reap());
    }
}
