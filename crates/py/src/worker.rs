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
use pyo3::types::PyList;
use ranktune_tune::isolation::adopted::{self, AdoptedPool, AdoptedWorker, WorkerLost};
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
    m.add_function(wrap_pyfunction!(worker_serve, m)?)?;
    m.add_function(wrap_pyfunction!(worker_run, m)?)?;
    Ok(())
}

/// A failure that cost the worker: `(i, kind, reason)`, `i` indexing the
/// measured positions.
type HardFailure = (usize, &'static str, String);

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

    /// `WorkerHandle.spawn(program, args, env, memory=None)`: starts
    /// `program args` as a worker, as the Rust tuner starts a worker
    /// program: the protocol on its standard input and output (one
    /// socket), its standard error on a pipe, the worker's signals set
    /// between fork and exec, `env` (a dict) on top of this process's
    /// environment. The worker sets its own memory limit; `memory` (bytes
    /// it may add) is for the reasons. `OSError` when it cannot start.
    #[staticmethod]
    #[pyo3(signature = (program, args, env, memory=None))]
    fn spawn(
        py: Python<'_>,
        program: std::path::PathBuf,
        args: Vec<String>,
        env: std::collections::HashMap<String, String>,
        memory: Option<u64>,
    ) -> PyResult<Self> {
        let mut limits = ranktune_tune::isolation::Limits::for_local_ranks(1);
        limits.memory = memory;
        let cmd = ranktune_tune::isolation::WorkerCommand {
            program: program.into_os_string(),
            args: args.into_iter().map(Into::into).collect(),
            env: env.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
            spec: serde_json::Value::Null,
            limits,
        };
        let worker = py
            .allow_threads(|| AdoptedWorker::spawn(&cmd))
            .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
        Ok(WorkerHandle { pid: worker.pid(), worker: Mutex::new(Some(worker)) })
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

    /// Runs candidate `j` `reps` times (`fallback`: it is the op's
    /// fallback): the worker's time of the runs (µs), or why it failed.
    /// Starts a worker first when none runs (see `measure`). `start`'s
    /// OSError fails the candidate; anything else it raises is raised.
    fn request(
        &self,
        py: Python<'_>,
        j: usize,
        reps: u32,
        fallback: bool,
        init: Option<&ToWorker>,
        start: &PyObject,
    ) -> PyResult<Result<f64, WorkerLost>> {
        // Python's error from `start`, kept to raise after the run.
        let mut raised: Option<PyErr> = None;
        let got = self.with_pool(|pool| {
            py.allow_threads(|| {
                pool.run(j, reps, fallback, init, || {
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
        Ok(got)
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

    /// `measure(positions, start, init, fork, warmup=None, samples=None)`:
    /// measures one bucket's candidates at `positions` in the worker, with
    /// the in-process statistic: `(stats, hard)`, `stats` one dict (or
    /// `{"error": ...}`) per position, `hard` the `(i, kind, reason)` of
    /// the failures that cost the worker (a crash, a time-out, an exhausted
    /// memory: the tuner's rule, `FailureKind::is_hard`), `i` indexing
    /// `positions`. A worker is started when none runs: `start()` returns
    /// `(WorkerHandle, hello)`, `hello` the message it must answer `ready`
    /// to (None: its first answer, unasked); a kept worker is sent `init`
    /// (the bucket's protocol message, or None) first. The per-request
    /// time limit's reference is the fallback's (position 0). After the
    /// bucket a forked worker (`fork`) ends, its inputs being this call's;
    /// a spawned one is kept for the next bucket. Interrupted, the worker
    /// is killed at once.
    #[pyo3(signature = (positions, start, init, fork, warmup=None, samples=None))]
    #[allow(clippy::too_many_arguments)]
    fn measure<'py>(
        &self,
        py: Python<'py>,
        positions: Vec<usize>,
        start: PyObject,
        init: Option<&Bound<'py, PyAny>>,
        fork: bool,
        warmup: Option<u32>,
        samples: Option<u32>,
    ) -> PyResult<(Bound<'py, PyList>, Vec<HardFailure>)> {
        let init = init.map(to_worker).transpose()?;
        self.with_pool(AdoptedPool::new_bucket)?;
        let mut hard = Vec::new();
        let got =
            crate::isolate::measure_requests(py, positions.len(), warmup, samples, |j, reps| {
                let fallback = positions[j] == 0;
                Ok(match self.request(py, j, reps.max(1), fallback, init.as_ref(), &start)? {
                    Ok(us) => Ok(us),
                    Err(f) => {
                        if f.kind.is_hard() {
                            hard.push((j, f.kind.as_str(), f.message.clone()));
                        }
                        Err(f.message)
                    }
                })
            });
        match got {
            Ok(stats) => {
                if fork {
                    py.allow_threads(|| self.with_pool(|p| p.end(false)))?;
                }
                Ok((stats, hard))
            }
            Err(e) => {
                py.allow_threads(|| self.with_pool(AdoptedPool::kill))?;
                Err(e)
            }
        }
    }

    /// Ends the worker: `wait`, until it exited; else it is told to exit
    /// and reaped later (`reap_ended`).
    #[pyo3(signature = (wait=true))]
    fn end(&self, py: Python<'_>, wait: bool) -> PyResult<()> {
        py.allow_threads(|| self.with_pool(|p| p.end(wait)))
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

/// `worker_serve(fd, handle, ready=True)`: a worker's loop on the socket
/// `fd`, the tuner's own (`isolation::serve`): says `ready` first (unless
/// `ready=False`: a spawned worker says it after its `init`), then answers
/// each request with `handle(request)` (the request and the answer as the
/// protocol's dicts) until the end of input. A line that is not a request
/// is answered with why, without calling `handle`. What `handle` raises,
/// or an answer that is not a worker's message, ends the loop and is
/// raised. The GIL is released while it waits for a line.
#[pyfunction]
#[pyo3(signature = (fd, handle, ready=true))]
fn worker_serve(py: Python<'_>, fd: i32, handle: Py<PyAny>, ready: bool) -> PyResult<()> {
    use ranktune_tune::isolation::protocol::{ErrorKind, FromWorker};
    let mut raised: Option<PyErr> = None;
    py.allow_threads(|| {
        ranktune_tune::isolation::serve::serve(fd, ready, &mut |request| {
            let request = match request {
                Ok(r) => r,
                Err(e) => {
                    return Some(FromWorker::Error { error: e.to_string(), kind: ErrorKind::Error })
                }
            };
            Python::with_gil(|py| {
                let answered = (|| -> PyResult<FromWorker> {
                    let value = serde_json::to_value(&request)
                        .map_err(|e| PyValueError::new_err(e.to_string()))?;
                    let reply = handle.bind(py).call1((convert::to_py(py, &value)?,))?;
                    let reply = convert::from_py(&reply, "the answer")?;
                    serde_json::from_value(reply).map_err(|e| {
                        PyValueError::new_err(format!("not a protocol message of the worker: {e}"))
                    })
                })();
                answered.map_err(|e| raised = Some(e)).ok()
            })
        })
    });
    raised.map_or(Ok(()), Err)
}

/// `worker_run(run_once, reps, timed, memory)`: a worker's answer to
/// `{"run": p, "reps": reps}`: runs `run_once()` `reps` times, timed as
/// in-process measuring times them (the wall clock around all of them, or
/// -- `timed`, a `timer=` or CUDA events -- the sum of the seconds each
/// call returned, checked as `tune_measure` checks them), and answers
/// `{"us": total}`; or, when a run raised an `Exception`, `{"error":
/// "Type: message", "kind": ...}`: kind `memory` when it is a
/// `MemoryError` or names an allocator's failure (the tuner's
/// `reasons::memory_line`), with the limit (`memory` bytes, or none),
/// else `error`. A `KeyboardInterrupt` or `SystemExit` is raised.
#[pyfunction]
fn worker_run<'py>(
    py: Python<'py>,
    run_once: &Bound<'py, PyAny>,
    reps: u32,
    timed: bool,
    memory: Option<u64>,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    use ranktune_tune::isolation::reasons;
    let d = pyo3::types::PyDict::new(py);
    let started = std::time::Instant::now();
    let mut total = 0.0;
    for _ in 0..reps {
        let got = match run_once.call0() {
            Ok(v) if timed => crate::tune::timer_seconds(&v).map(|s| total += s * 1e6),
            Ok(_) => Ok(()),
            Err(e) if !e.is_instance_of::<pyo3::exceptions::PyException>(py) => return Err(e),
            Err(e) => {
                let text = crate::tune::exception_text(py, &e);
                let memory_error = e.is_instance_of::<pyo3::exceptions::PyMemoryError>(py);
                if memory_error || reasons::memory_line(&text).is_some() {
                    let limit = memory.map(reasons::mib).unwrap_or_else(|| "none".to_string());
                    d.set_item("error", format!("limit {limit} ({})", reasons::last_line(&text)))?;
                    d.set_item("kind", "memory")?;
                    return Ok(d);
                }
                Err(text)
            }
        };
        if let Err(why) = got {
            d.set_item("error", why)?;
            d.set_item("kind", "error")?;
            return Ok(d);
        }
    }
    let us = if timed { total } else { started.elapsed().as_secs_f64() * 1e6 };
    d.set_item("us", us)?;
    Ok(d)
}
