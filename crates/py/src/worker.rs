//! `WorkerHandle` and `WorkerPool`: the tuning process's side of the
//! measuring workers Python starts (a fork running the user's callables,
//! or a spawned `python -m ranktune._worker`), supervised by the Rust
//! tuner's own handle and pool (`ranktune_tune::isolation::adopted`):
//! requests and their deadlines, the answer's line, the end of its
//! standard error, reaping and why a worker was lost; one worker at a time,
//! the time limit's reference, a start that failed failing the bucket.
//!
//! Owns only the conversion of messages and the release of the GIL while
//! it waits; it never starts a process (Python's start callable does) and
//! never decides anything. No Rust lock is held while Python code runs:
//! a pool is taken out of its slot for the length of a call.

use crate::convert;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use ranktune_tune::isolation::adopted::{self, AdoptedPool, AdoptedWorker};
use ranktune_tune::isolation::protocol::ToWorker;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<WorkerHandle>()?;
    m.add_class::<WorkerPool>()?;
    m.add_function(wrap_pyfunction!(reap_ended, m)?)?;
    m.add_function(wrap_pyfunction!(worker_prepare, m)?)?;
    m.add_function(wrap_pyfunction!(worker_limit_memory, m)?)?;
    Ok(())
}

/// A protocol message of the tuner's side from a Python dict.
fn to_worker(m: &Bound<'_, PyAny>) -> PyResult<ToWorker> {
    let value = convert::from_py(m, "message").map_err(|e| PyTypeError::new_err(format!("{e}")))?;
    serde_json::from_value(value)
        .map_err(|e| PyValueError::new_err(format!("not a protocol message of the tuner: {e}")))
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
    /// The worker, taken out (for a pool); `None` once closed.
    fn take(&self) -> Option<AdoptedWorker> {
        self.worker.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

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
        let msg = message.map(to_worker).transpose()?;
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

/// An op's workers under the tuner's pool policy:
/// `WorkerPool(limits)` (an `IsolationLimits`).
#[pyclass(module = "ranktune._ranktune", frozen)]
pub(crate) struct WorkerPool {
    /// Taken out while a call runs (see the module docs).
    slot: Mutex<Option<AdoptedPool>>,
    /// (starts, seconds), as of the last call.
    starts: Mutex<(u32, f64)>,
}

impl WorkerPool {
    /// Runs `f` on the pool, taken out of its slot (no lock held while it
    /// runs, so `f` may call Python).
    fn with_pool<T>(&self, f: impl FnOnce(&mut AdoptedPool) -> T) -> PyResult<T> {
        let taken = self.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(mut pool) = taken else {
            return Err(PyValueError::new_err(
                "this WorkerPool is in use by another thread; use one pool per thread at a time",
            ));
        };
        let out = f(&mut pool);
        *self.starts.lock().unwrap_or_else(|p| p.into_inner()) = pool.starts();
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(pool);
        Ok(out)
    }
}

#[pymethods]
impl WorkerPool {
    #[new]
    fn new(limits: PyRef<'_, crate::isolate::IsolationLimits>) -> Self {
        WorkerPool {
            slot: Mutex::new(Some(AdoptedPool::new(limits.limits().clone()))),
            starts: Mutex::new((0, 0.0)),
        }
    }

    /// A new bucket: its own time reference, and a kept worker takes the
    /// bucket's `init` before it runs anything.
    fn new_bucket(&self) -> PyResult<()> {
        self.with_pool(AdoptedPool::new_bucket)
    }

    /// Runs candidate `position` `reps` times (`fallback`: it is the op's
    /// fallback): the worker's time of the runs (µs, a float), or `(kind,
    /// reason, hard)` when it failed (`hard`: it cost the worker — a crash,
    /// a time-out, an exhausted memory — and goes on the blocklist, by the
    /// tuner's rule, `FailureKind::is_hard`). Starts a worker first when none runs:
    /// `start()` returns `(WorkerHandle, hello)`, `hello` the message it must
    /// answer `ready` to (None: its first answer, unasked); a kept worker
    /// is sent `init` (a protocol message, or None) first.
    #[pyo3(signature = (position, reps, fallback, init, start))]
    fn run(
        &self,
        py: Python<'_>,
        position: usize,
        reps: u32,
        fallback: bool,
        init: Option<&Bound<'_, PyAny>>,
        start: PyObject,
    ) -> PyResult<PyObject> {
        let init = init.map(to_worker).transpose()?;
        // Python's error from `start`, kept to raise after the run.
        let mut raised: Option<PyErr> = None;
        let got = self.with_pool(|pool| {
            py.allow_threads(|| {
                pool.run(position, reps, fallback, init.as_ref(), || {
                    Python::with_gil(|py| -> std::io::Result<(AdoptedWorker, Option<ToWorker>)> {
                        let started = (|| -> PyResult<_> {
                            let (handle, hello): (
                                PyRef<'_, WorkerHandle>,
                                Option<Bound<'_, PyAny>>,
                            ) = start.bind(py).call0()?.extract()?;
                            let hello = hello.as_ref().map(to_worker).transpose()?;
                            let worker = handle.take().ok_or_else(|| {
                                PyValueError::new_err("start() returned a closed WorkerHandle")
                            })?;
                            Ok((worker, hello))
                        })();
                        started.map_err(|e| {
                            let text = e.to_string();
                            raised = Some(e);
                            std::io::Error::other(text)
                        })
                    })
                })
            })
        })?;
        if let Some(e) = raised.filter(|e| !e.is_instance_of::<pyo3::exceptions::PyOSError>(py)) {
            // Not an OSError (a bug, an interrupt): the caller's to see.
            return Err(e);
        }
        match got {
            Ok(us) => Ok(us.into_pyobject(py)?.into_any().unbind()),
            Err(f) => {
                let hard = f.kind.is_hard();
                Ok((f.kind.as_str(), f.message, hard).into_pyobject(py)?.into_any().unbind())
            }
        }
    }

    /// Ends the worker: `wait`, until it exited; else it is told to exit
    /// and reaped later (`reap_ended`).
    #[pyo3(signature = (wait=true))]
    fn end(&self, py: Python<'_>, wait: bool) -> PyResult<()> {
        py.allow_threads(|| self.with_pool(|p| p.end(wait)))
    }

    /// Kills the worker at once (an interrupted measure).
    fn kill(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| self.with_pool(AdoptedPool::kill))
    }

    /// The running worker's process id (None while none runs, or while a
    /// call runs).
    #[getter]
    fn worker_pid(&self) -> Option<i32> {
        self.slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(AdoptedPool::worker_pid)
    }

    /// Workers started.
    #[getter]
    fn starts(&self) -> u32 {
        self.starts.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    /// Seconds those starts took, until each worker was ready.
    #[getter]
    fn start_seconds(&self) -> f64 {
        self.starts.lock().unwrap_or_else(|p| p.into_inner()).1
    }
}

/// Reaps the workers told to exit that have; `wait`: all of them, killing
/// one that does not exit within the grace period.
#[pyfunction]
#[pyo3(signature = (wait=false))]
fn reap_ended(py: Python<'_>, wait: bool) {
    py.allow_threads(|| adopted::reap_ended(wait));
}

/// `worker_prepare(parent)`: sets this process up as a measuring worker,
/// as the tuner's own workers are (`isolation::setup::prepare`: SIGINT and
/// SIGTERM ignored, the crash signals' defaults, SIGKILL when the parent
/// dies); False when its parent is no longer `parent`.
#[pyfunction]
fn worker_prepare(parent: i32) -> bool {
    ranktune_tune::isolation::setup::prepare(parent)
}

/// `worker_limit_memory(extra)`: limits this worker's address space to its
/// own size now plus `extra` bytes (None: lifts the limit); the limit set.
/// `OSError` when it cannot.
#[pyfunction]
fn worker_limit_memory(extra: Option<u64>) -> PyResult<Option<u64>> {
    ranktune_tune::isolation::setup::limit_memory(extra)
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))
}
