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

use super::protocol::{FromWorker, ToWorker};
use super::sys;
use super::worker::Worker;
use crate::failure::FailureKind;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

/// A worker that is gone (reaped), and why.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerLost {
    /// `crash`, `timeout`, `memory`, or `error` when it broke the protocol.
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
