//! `WorkerHandle`: the tuning process's side of a measuring worker that
//! Python started (a fork running the user's callables, or a spawned
//! `python -m ranktune._worker`), supervised by the Rust tuner's own
//! handle (`ranktune_tune::isolation::adopted`): requests and their
//! deadlines, the answer's line, the end of its standard error, reaping,
//! and why it was lost.
//!
//! Owns only the conversion of messages and the release of the GIL while
//! it waits; it never starts a process and never decides anything.

use crate::convert;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use ranktune_tune::isolation::adopted::AdoptedWorker;
use ranktune_tune::isolation::protocol::ToWorker;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<WorkerHandle>()
}

/// A started worker: `WorkerHandle(pid, sock_fd, err_fd, memory)` takes
/// over the process and both descriptors (the caller must not use or close
/// them again), and reaps it.
#[pyclass(module = "ranktune._ranktune", frozen)]
pub(crate) struct WorkerHandle {
    pid: i32,
    worker: Mutex<Option<AdoptedWorker>>,
}

impl WorkerHandle {
    fn with<T>(&self, f: impl FnOnce(&mut AdoptedWorker) -> T) -> Option<T> {
        let mut slot = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_mut().map(f)
    }
}

#[pymethods]
impl WorkerHandle {
    #[new]
    #[pyo3(signature = (pid, sock_fd, err_fd, memory=None))]
    fn new(pid: i32, sock_fd: i32, err_fd: i32, memory: Option<u64>) -> PyResult<Self> {
        if pid <= 0 || sock_fd < 0 || err_fd < 0 || sock_fd == err_fd {
            return Err(PyValueError::new_err(format!(
                "WorkerHandle needs a child's pid and two open descriptors (pid {pid}, socket \
                 {sock_fd}, stderr {err_fd})"
            )));
        }
        // SAFETY: the caller hands over these descriptors (documented):
        // from here on only this handle uses and closes them.
        let (sock, err) = unsafe { (OwnedFd::from_raw_fd(sock_fd), OwnedFd::from_raw_fd(err_fd)) };
        let worker = AdoptedWorker::adopt(pid, sock, err, memory)
            .map_err(|e| PyValueError::new_err(format!("cannot take over worker {pid}: {e}")))?;
        Ok(WorkerHandle { pid, worker: Mutex::new(Some(worker)) })
    }

    /// The worker's process id.
    #[getter]
    fn pid(&self) -> i32 {
        self.pid
    }

    /// Sends `message` (a dict of the protocol's tuner side; None: send
    /// nothing) and waits up to `limit` seconds, the send included, for the
    /// next answer: `(answer dict, None)`, or `(None, (kind, reason))` when
    /// the worker is gone (reaped; the handle is then closed).
    #[pyo3(signature = (message, limit))]
    fn request(
        &self,
        py: Python<'_>,
        message: Option<&Bound<'_, PyAny>>,
        limit: f64,
    ) -> PyResult<(PyObject, Option<(&'static str, String)>)> {
        let msg: Option<ToWorker> = match message {
            None => None,
            Some(m) => {
                let value = convert::from_py(m, "message")
                    .map_err(|e| PyTypeError::new_err(format!("request: {e}")))?;
                Some(serde_json::from_value(value).map_err(|e| {
                    PyValueError::new_err(format!("not a protocol message of the tuner: {e}"))
                })?)
            }
        };
        let limit = Duration::try_from_secs_f64(limit.max(0.0)).unwrap_or(Duration::MAX);
        let answer = py.allow_threads(|| {
            let mut slot = self.worker.lock().unwrap_or_else(|p| p.into_inner());
            let w = slot.as_mut()?;
            let got = w.request(msg.as_ref(), limit);
            if got.is_err() {
                *slot = None; // reaped: its descriptors close
            }
            Some(got)
        });
        match answer {
            None => Ok((py.None(), Some(("error", "the worker was already closed".to_string())))),
            Some(Ok(ans)) => {
                let value =
                    serde_json::to_value(&ans).map_err(|e| PyValueError::new_err(e.to_string()))?;
                Ok((convert::to_py(py, &value)?, None))
            }
            Some(Err(lost)) => Ok((py.None(), Some((lost.kind.as_str(), lost.message)))),
        }
    }

    /// Kills and reaps it now; closes the handle.
    fn kill(&self, py: Python<'_>) {
        py.allow_threads(|| {
            let mut slot = self.worker.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(mut w) = slot.take() {
                w.kill();
            }
        });
    }

    /// Ends it: the end of its input, then SIGKILL after a grace period;
    /// always reaped. Closes the handle (a second call does nothing).
    fn close(&self, py: Python<'_>) {
        py.allow_threads(|| {
            let taken = self.worker.lock().unwrap_or_else(|p| p.into_inner()).take();
            drop(taken);
        });
    }

    /// Tells it to exit (the end of its input) without waiting.
    fn tell_to_end(&self) {
        self.with(|w| w.tell_to_end());
    }

    /// Reaps it if it has ended (then closes the handle); true once it is
    /// reaped or closed.
    fn try_reap(&self) -> bool {
        let mut slot = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        let reaped = slot.as_mut().is_none_or(AdoptedWorker::try_reap);
        if reaped {
            *slot = None;
        }
        reaped
    }
}
