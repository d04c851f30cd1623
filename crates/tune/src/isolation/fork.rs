//! A worker forked from the tuning process: it inherits the op, the
//! bucket's inputs and the tuner's timer, and serves `run` requests until
//! its socket closes.
//!
//! Owns the child's life, from `fork` to `_exit`: between the two only
//! async-signal-safe calls run until the serve loop starts (the parent may
//! have other threads, whose locks the child must not need), and the child
//! never returns into the parent's code, never logs and never touches the
//! cache or a trace (its crash-signal handlers are reset, and the panic hook
//! installed before the first fork writes only the panic's text in a worker).

use super::protocol::{ErrorKind, FromWorker, ToWorker};
use super::sys::{self, raw, Forked};
use super::worker::Worker;
use super::Limits;
use std::io;
use std::os::fd::RawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

/// Set in a forked worker right after the fork: the hook of
/// [`route_worker_panics`] then writes a panic's text to the worker's
/// standard error (the parent's pipe) and runs no other hook.
static IN_WORKER: AtomicBool = AtomicBool::new(false);

/// Installs, once per process and before its first fork, a panic hook that
/// in a forked worker only writes the panic's text to standard error (the
/// tuning process's own hook may export a trace or log: never from a
/// worker), and elsewhere calls the hook it replaced.
///
/// Why not `set_hook` in the child: it takes std's hook lock for writing,
/// and a thread of the tuning process that was running a panic hook at the
/// instant of the fork holds that lock for ever in the child (which has no
/// such thread), so the worker never said it was ready. Reading the hook
/// at a panic takes the lock only for reading, which a vanished reader
/// does not block. (A hook that the program sets after its first isolated
/// tune replaces this one, and then runs in workers too.)
fn route_worker_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_WORKER.load(Ordering::Relaxed) {
                let _ = sys::write_all(2, format!("{info}\n").as_bytes());
            } else {
                previous(info);
            }
        }));
    });
}

/// What a worker does with `run p reps`: the time of the runs (µs), or the
/// failure's kind and text.
pub(crate) type Serve<'a> = dyn FnMut(usize, u32) -> Result<f64, (ErrorKind, String)> + 'a;

/// Exit status of a worker whose serve loop panicked (not a candidate: the
/// candidates' panics are caught by `serve`).
const PANICKED: i32 = 70;
/// Exit status of a worker that could not set its memory limit.
const NO_LIMIT: i32 = 71;

/// Forks a worker that answers requests with `serve` under `limits`.
pub(crate) fn start(limits: &Limits, serve: &mut Serve<'_>) -> io::Result<Worker> {
    let (parent_sock, child_sock) = sys::socket_pair()?;
    let (err_read, err_write) = sys::pipe()?;
    sys::set_nonblocking(raw(&parent_sock))?;
    sys::set_nonblocking(raw(&err_read))?;
    // Read now: the child may not allocate before its limit is set.
    let page = sys::page_size().unwrap_or(4096);
    route_worker_panics();
    // The parent's pid, compared in the child to notice a
    // parent that died before the death signal was armed.
    let parent = sys::own_pid();
    // SAFETY: the child below makes only child-safe calls until
    // `serve_loop`, and leaves by `_exit` (serve_loop never returns).
    match unsafe { sys::fork() }? {
        Forked::Child => {
            IN_WORKER.store(true, Ordering::Relaxed);
            sys::close(raw(&parent_sock));
            sys::close(raw(&err_read));
            // Its output and errors go to the parent's pipe, never to the
            // job's own output (a `--json` document, a terminal).
            let err = raw(&err_write);
            if sys::dup_onto(err, 1).is_err() || sys::dup_onto(err, 2).is_err() {
                sys::exit_now(NO_LIMIT);
            }
            sys::worker_signals();
            if sys::parent_pid() != parent {
                sys::exit_now(0);
            }
            // The limit is over what the child inherited, measured here; a
            // size it cannot read is a limit it cannot set.
            if let Some(memory) = limits.memory {
                let limit = sys::vm_size_now(page).map(|size| size.saturating_add(memory));
                if limit.is_none_or(|bytes| sys::limit_address_space(bytes).is_err()) {
                    sys::exit_now(NO_LIMIT);
                }
            }
            serve_loop(raw(&child_sock), serve)
        }
        Forked::Parent(pid) => {
            drop(child_sock);
            drop(err_write);
            Ok(Worker::new(pid, parent_sock, err_read, limits.memory))
        }
    }
}

/// The child's life after set-up: says `ready`, answers requests, exits 0
/// at the end of its input. Never returns.
fn serve_loop(fd: RawFd, serve: &mut Serve<'_>) -> ! {
    // A panic's text goes to the parent's pipe, for the reason (the hook of
    // `route_worker_panics`).
    let code = catch_unwind(AssertUnwindSafe(|| serve_requests(fd, serve))).unwrap_or(PANICKED);
    sys::exit_now(code)
}

/// Answers requests until the end of input; the exit status.
fn serve_requests(fd: RawFd, serve: &mut Serve<'_>) -> i32 {
    super::serve::serve(fd, true, &mut |request| {
        Some(match request {
            Ok(ToWorker::Run { run, reps }) => match serve(run, reps) {
                Ok(us) => FromWorker::Us { us },
                Err((kind, error)) => FromWorker::Error { error, kind },
            },
            Ok(ToWorker::Init { .. }) => FromWorker::Error {
                error: "a forked worker takes no init message".to_string(),
                kind: ErrorKind::Error,
            },
            Err(e) => FromWorker::Error { error: e.to_string(), kind: ErrorKind::Error },
        })
    });
    0
}
