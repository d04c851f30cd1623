"""Isolated measuring for ``ranktune.autotune(isolate=...)``: candidates are
measured in a worker process, so that one that crashes it (a segfault, an
abort), runs past its time limit or past its memory limit fails alone, with
its reason, and the tune goes on with a fresh worker.

- ``"fork"``: a worker forked (``os.fork``) from the tuning process for each
  measured bucket; it inherits the candidates, the call's arguments and the
  timer, so nothing is serialized.
- ``"spawn"``: a fresh ``python -m ranktune._worker``, for where a fork
  cannot serve (a CUDA context does not survive one); it imports the
  candidates by module and qualified name and rebuilds the arguments from
  their description (``ranktune._rebuild``). It is kept for the op's next
  buckets (each gets a new ``init``) while it stays healthy.

Both speak the worker protocol of ``crates/tune/src/isolation/protocol.rs``
(newline-delimited JSON over one Unix socket on the worker's standard input
and output, its standard error on a pipe), and every message is parsed and
written by that Rust module (``_ranktune.protocol_read``/``protocol_line``).
The limits' defaults and the per-request time limit are the Rust tuner's
(``_ranktune.IsolationLimits``: ``max(5 s, 50 x the fallback's time)``, 60 s
before anything of the bucket was timed, 120 s to start, memory as half of
``MemAvailable`` over the local ranks, an ``RLIMIT_AS`` growth over this
process's size), and so is the statistic (``_ranktune.tune_measure_timed``,
the sampler of ``tune_measure`` over runs the worker times).

Why the supervision itself (start, deadlines, SIGKILL, reaping, reasons) is
written here, in Python, and not the Rust tuner's ``isolation::pool``:

- A forked worker must run Python code -- the candidates -- in a copy of
  this interpreter. Only ``os.fork`` makes that copy sound: it runs CPython's
  own fork protocol (the import lock, the threading module's state, the
  handlers of ``os.register_at_fork``, where ``ranktune.trace`` forgets the
  parent's trace session). The Rust tuner's fork is a bare ``fork(2)`` whose
  child may run only async-signal-safe code until its Rust serve loop.
- The Rust pool and worker handle are internal to the tuner crate (they
  serve its bench of Rust ops); the bindings cannot reach them.
- Everything the supervision needs is in Python's standard library:
  ``socketpair``, ``poll``, ``wait4`` (with the worker's peak resident
  memory), ``setrlimit``, signal dispositions, ``posix_spawn``; only
  ``PR_SET_PDEATHSIG`` goes through ``ctypes``.

The reasons are worded as the Rust worker words them (``worker.rs``):
``crashed: SIGSEGV (signal 11)``, ``timed out after 1.0 s (limit 1.0 s)``,
``ran out of memory: limit 128 MiB (MemoryError)``, ``the worker exited with
status 3``. Hard failures (crash, timeout, memory) go on the cache's
blocklist (``tune.py`` records them), as the Rust tuner's do.

Owns worker processes, their limits and the classification of their
deaths. It never decides, never touches the cache, and runs only while a
bucket is measured.
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import os
import resource
import select
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

from ranktune import _ranktune, _rebuild

__all__ = ["Settings", "settings", "Measure", "Lost", "HARD"]

ISOLATE_ENV = "RANKTUNE_ISOLATE"
TIMEOUT_ENV = "RANKTUNE_CANDIDATE_TIMEOUT"
MEMORY_ENV = "RANKTUNE_CANDIDATE_MEMORY"

# The failure kinds that cost the worker (and go on the blocklist).
HARD = ("crash", "timeout", "memory")

# As the Rust worker handle (worker.rs).
_STDERR_KEEP = 8 << 10
_ALIVE_CHECK = 0.05
_EXIT_GRACE = 2.0
# Exit status of a worker whose own loop failed (not a candidate).
_SERVE_FAILED = 70
_NO_LIMIT = 71

_ON = ("1", "true", "yes", "on", "fork")
_OFF = ("0", "false", "no", "off")


# -- settings ---------------------------------------------------------------------
def _quoted(text: str) -> str:
    return json.dumps(text)


def _mode(value: Any) -> str:
    """``"off"``, ``"fork"`` or ``"spawn"`` from ``isolate=`` (None: the
    environment)."""
    if value is None:
        env = os.environ.get(ISOLATE_ENV, "").strip()
        if not env:
            return "off"
        low = env.lower()
        if low in _OFF:
            return "off"
        if low in _ON:
            return "fork"
        if low == "spawn":
            return "spawn"
        raise ValueError(
            f"{ISOLATE_ENV}={_quoted(env)} is not an isolation mode; give off (or 0), fork "
            "(or 1) to measure in forked workers, or spawn to measure in fresh Python processes"
        )
    if value is True:
        return "fork"
    if value is False:
        return "off"
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("off", "fork", "spawn"):
            return low
    raise ValueError(
        f'isolate={value!r} is not an isolation mode; give "off" (or False), "fork" (or True) '
        'to measure in forked workers, or "spawn" to measure in fresh Python processes'
    )


def _seconds(value: Any, what: str) -> float:
    """A time limit in seconds, as the CLI's ``--candidate-timeout`` reads one."""
    text = value if isinstance(value, str) else repr(value)
    try:
        v = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        raise ValueError(f"{what} {_quoted(text)} is not a number of seconds; give e.g. 30 or 2.5") from None
    if not (v > 0 and v <= 7 * 24 * 3600):
        raise ValueError(
            f"{what} {_quoted(text)} is not a usable time limit; give a number of seconds above 0 "
            "(at most a week), e.g. 30"
        )
    return v


def _mib(value: Any, what: str) -> int:
    """A memory limit in MiB, as the CLI's ``--candidate-memory`` reads one."""
    text = value if isinstance(value, str) else repr(value)
    if isinstance(value, int) and not isinstance(value, bool):
        v = value
    else:
        try:
            v = int(str(value).strip(), 10) if isinstance(value, str) else int("x")
        except ValueError:
            raise ValueError(f"{what} {_quoted(text)} is not a whole number of MiB; give e.g. 4096 (4 GiB)") from None
    if not 1 <= v <= 1 << 30:
        raise ValueError(f"{what} {_quoted(text)} is out of range; give a whole number of MiB from 1 up, e.g. 4096")
    return v


def _env(name: str) -> Optional[str]:
    v = os.environ.get(name)
    return v if v is not None and v.strip() else None


def local_ranks() -> int:
    """How many ranks run on this machine, as the launcher says
    (torchrun, Open MPI, MPICH, Slurm), else 1 -- the CLI's rule."""
    for var in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"):
        try:
            n = int(os.environ.get(var, "").strip())
        except ValueError:
            continue
        if n > 0:
            return n
    return 1


class Settings:
    """How an op's candidates are measured: ``mode`` (``"off"``, ``"fork"``,
    ``"spawn"``) and the ``limits`` (``_ranktune.IsolationLimits``)."""

    def __init__(self, mode: str, limits: Any) -> None:
        self.mode = mode
        self.limits = limits

    @property
    def on(self) -> bool:
        return self.mode != "off"


def settings(isolate: Any, timeout: Any, memory: Any) -> Settings:
    """The settings of ``isolate=``, ``candidate_timeout=`` and
    ``candidate_memory=`` (each ``None``: its environment variable). Bad
    values raise ``ValueError`` naming the argument or the variable."""
    mode = _mode(isolate)
    if mode != "off" and not (hasattr(os, "fork") and hasattr(os, "posix_spawn")):
        raise ValueError(f"isolate={mode!r} needs a POSIX system (fork, posix_spawn); this is {sys.platform}")
    if timeout is not None:
        t: Optional[float] = _seconds(timeout, "candidate_timeout=")
    else:
        env = _env(TIMEOUT_ENV)
        t = _seconds(env, TIMEOUT_ENV) if env is not None else None
    if memory is not None:
        m: Optional[int] = _mib(memory, "candidate_memory=")
    else:
        env = _env(MEMORY_ENV)
        m = _mib(env, MEMORY_ENV) if env is not None else None
    if mode == "off" and (timeout is not None or memory is not None):
        raise ValueError(
            "candidate_timeout= and candidate_memory= limit isolated workers; add isolate=\"fork\" "
            f"or \"spawn\" (or {ISOLATE_ENV}), or leave them out"
        )
    limits = _ranktune.IsolationLimits(local_ranks(), t, m) if mode != "off" else None
    return Settings(mode, limits)


# -- reasons (worded as crates/tune/src/isolation/worker.rs) -----------------------
_SIGNALS = {
    signal.SIGHUP: "SIGHUP", signal.SIGINT: "SIGINT", signal.SIGQUIT: "SIGQUIT",
    signal.SIGILL: "SIGILL", signal.SIGTRAP: "SIGTRAP", signal.SIGABRT: "SIGABRT",
    signal.SIGBUS: "SIGBUS", signal.SIGFPE: "SIGFPE", signal.SIGKILL: "SIGKILL",
    signal.SIGSEGV: "SIGSEGV", signal.SIGPIPE: "SIGPIPE", signal.SIGALRM: "SIGALRM",
    signal.SIGTERM: "SIGTERM", signal.SIGXCPU: "SIGXCPU", signal.SIGXFSZ: "SIGXFSZ",
    signal.SIGSYS: "SIGSYS",
}  # fmt: skip


def signal_name(sig: int) -> str:
    return _SIGNALS.get(sig, f"signal {sig}")  # type: ignore[call-overload]


def mib(n: int) -> str:
    """Bytes as MiB for messages: ``512 MiB``, ``1.5 MiB``."""
    m = n / (1 << 20)
    return f"{m:.0f} MiB" if m == int(m) or m >= 100 else f"{m:.1f} MiB"


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:300]
    return ""


_MEMORY_WORDS = ("memory allocation of", "bad_alloc", "memoryerror", "out of memory", "can't allocate memory", "cannot allocate memory")


def memory_line(text: str) -> Optional[str]:
    """The last line of ``text`` that says an allocation failed."""
    for line in reversed(text.splitlines()):
        low = line.strip().lower()
        if any(w in low for w in _MEMORY_WORDS):
            return line.strip()[:300]
    return None


class Lost(Exception):
    """The worker is gone (reaped), and why: ``kind`` is ``crash``,
    ``timeout``, ``memory`` (or ``error`` when it broke the protocol)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


# -- the parent's side of one worker -------------------------------------------------
class Worker:
    """One live worker process: its pid, the parent's end of its socket,
    the read end of its standard error."""

    def __init__(self, pid: int, sock: socket.socket, err_fd: int, memory: Optional[int]) -> None:
        self.pid = pid
        self.sock = sock
        self.err_fd: Optional[int] = err_fd
        self.memory = memory
        self.inbuf = b""
        self.errtail = b""
        self.reaped = False
        self.poller = select.poll()
        self.poller.register(sock.fileno(), select.POLLIN)
        self.poller.register(err_fd, select.POLLIN)

    def request(self, msg: Optional[Dict[str, Any]], limit: float) -> Dict[str, Any]:
        """Sends ``msg`` (when given) and waits up to ``limit`` seconds for
        the next answer (a dict). Raises ``Lost`` when the worker is gone."""
        t0 = time.monotonic()
        if msg is not None:
            line = _ranktune.protocol_line(msg, "tuner")
            try:
                self.sock.sendall(line)
            except OSError:
                raise self._died() from None
        poller = self.poller
        while True:
            end = self.inbuf.find(b"\n")
            if end >= 0:
                line, self.inbuf = self.inbuf[: end + 1], self.inbuf[end + 1 :]
                try:
                    return _ranktune.protocol_read(line, "worker")  # type: ignore[no-any-return]
                except ValueError as e:
                    raise self._kill_for("crash", str(e)) from None
            if len(self.inbuf) > _ranktune.PROTOCOL_MAX_LINE:
                raise self._kill_for(
                    "crash", f"the worker wrote more than {_ranktune.PROTOCOL_MAX_LINE} bytes without a newline"
                )
            spent = time.monotonic() - t0
            if spent >= limit:
                raise self._kill_for("timeout", f"timed out after {spent:.1f} s (limit {limit:.1f} s)")
            wait = min(limit - spent, _ALIVE_CHECK)
            ready = {fd for fd, _ in poller.poll(max(1, int(wait * 1000 + 0.999)))}
            if self.err_fd is not None and self.err_fd in ready:
                err = self.err_fd
                self._drain_stderr()
                if self.err_fd is None:
                    poller.unregister(err)
            if self.sock.fileno() in ready:
                try:
                    chunk = self.sock.recv(65536)
                except OSError as e:
                    raise self._kill_for("error", f"reading: {e}") from None
                if not chunk:
                    raise self._died()
                self.inbuf += chunk
            elif not ready:
                r = self._reap(block=False)
                if r is not None:
                    raise self._lost_by(r, killed=False)

    def _reap(self, block: bool) -> Optional[Tuple[int, int]]:
        """``(wait status, peak RSS in bytes)`` once it has ended; None while
        it runs. Raises ``Lost`` when its status cannot be read."""
        try:
            pid, status, ru = os.wait4(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError as e:
            self.reaped = True
            raise Lost("error", f"wait4: {e}") from None
        if pid == 0:
            return None
        self.reaped = True
        return status, int(ru.ru_maxrss) * 1024

    def _drain_stderr(self) -> None:
        if self.err_fd is None:
            return
        while True:
            try:
                chunk = os.read(self.err_fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                os.close(self.err_fd)
                self.err_fd = None
                return
            self.errtail = (self.errtail + chunk)[-_STDERR_KEEP:]

    def _died(self) -> Lost:
        """It closed its socket: reap it (it is exiting) and say why."""
        deadline = time.monotonic() + _EXIT_GRACE
        while True:
            try:
                r = self._reap(block=False)
            except Lost:
                r = None
            if r is not None:
                return self._lost_by(r, killed=False)
            if time.monotonic() >= deadline or self.reaped:
                return self._kill_for("crash", "closed its connection without exiting")
            time.sleep(0.002)

    def _kill_for(self, kind: str, why: str) -> Lost:
        """Kills and reaps the worker; the failure is ``kind`` with ``why``."""
        r = None
        if not self.reaped:  # a reaped pid may be another process's by now
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                r = self._reap(block=True)
            except Lost:
                r = None
        self.reaped = True
        self._drain_stderr()
        if kind == "timeout" or r is None:
            return Lost(kind, why)
        if not (os.WIFSIGNALED(r[0]) and os.WTERMSIG(r[0]) == signal.SIGKILL):
            # A protocol violation: its own death (if it died first) says more.
            return self._lost_by(r, killed=True)
        return Lost(kind, self._with_stderr(why))

    def _lost_by(self, r: Tuple[int, int], killed: bool) -> Lost:
        status, max_rss = r
        self._drain_stderr()
        err = self.errtail.decode("utf-8", "replace")
        limit = mib(self.memory) if self.memory is not None else "none"
        line = memory_line(err)
        if line is not None:
            return Lost("memory", f"ran out of memory: limit {limit} ({line})")
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGKILL and not killed and self.memory is not None and max_rss >= self.memory // 10 * 9:
                return Lost("memory", f"ran out of memory: limit {limit} (killed by SIGKILL at {mib(max_rss)} resident)")
            return Lost("crash", self._with_stderr(f"crashed: {signal_name(sig)} (signal {sig})"))
        return Lost("crash", self._with_stderr(f"the worker exited with status {os.WEXITSTATUS(status)}"))

    def _with_stderr(self, why: str) -> str:
        last = _last_line(self.errtail.decode("utf-8", "replace"))
        return f"{why}: {last}" if last else why

    def close(self) -> None:
        """Ends the worker: closing its socket tells it to exit; one that
        does not within a grace period is killed. Always reaped."""
        if self.reaped:
            self._close_fds()
            return
        try:
            self.sock.shutdown(socket.SHUT_WR)
            # Its end closes when it exits.
            exited = select.poll()
            exited.register(self.sock.fileno(), select.POLLIN)
            exited.poll(int(_EXIT_GRACE * 1000))
        except OSError:
            pass
        deadline = time.monotonic() + _EXIT_GRACE
        try:
            while time.monotonic() < deadline:
                if self._reap(block=False) is not None:
                    break
                time.sleep(0.0005)
            else:
                os.kill(self.pid, signal.SIGKILL)
                self._reap(block=True)
        except (Lost, ProcessLookupError):
            pass
        self.reaped = True
        self._close_fds()

    def kill(self) -> None:
        """Kills and reaps the worker at once (an interrupted measure)."""
        if not self.reaped:
            try:
                os.kill(self.pid, signal.SIGKILL)
                self._reap(block=True)
            except (Lost, ProcessLookupError):
                pass
            self.reaped = True
        self._close_fds()

    def _close_fds(self) -> None:
        self.sock.close()
        if self.err_fd is not None:
            os.close(self.err_fd)
            self.err_fd = None


# -- the worker's side -----------------------------------------------------------------
def _vm_size() -> int:
    """This process's address-space size (bytes), 0 when unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


_LIBC: List[Any] = []


def _libc() -> Any:
    """The C library (for ``prctl``) on Linux, loaded once (before a fork,
    so a forked worker does not load it again); None elsewhere."""
    if not _LIBC:
        lib = None
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL(None, use_errno=True)
                lib.prctl  # noqa: B018 -- present?
            except (OSError, AttributeError):
                lib = None
        _LIBC.append(lib)
    return _LIBC[0]


def prepare_worker(parent: int, address_limit: Optional[int]) -> None:
    """Sets a worker up as the Rust worker is (``sys.rs``,
    ``worker_signals``): SIGINT and SIGTERM ignored (the tuner decides when
    its worker ends), the crash signals' default actions back (and no
    ``faulthandler`` dump: the reason is the signal), killed by SIGKILL when
    the tuning process dies, and its address space limited. Exits at once
    when the tuning process is already gone."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    for sig in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    faulthandler.disable()
    libc = _libc()
    if libc is not None:
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)
    if address_limit is not None:
        limit_address_space(address_limit)


def limit_address_space(limit: int) -> None:
    """Sets this process's address-space limit (``RLIMIT_AS``, the soft
    one: a spawned worker sets it again for each bucket); exits when it
    cannot."""
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError) as e:
        os.write(2, f"cannot set the memory limit: {e}\n".encode())
        os._exit(_NO_LIMIT)


def failure_reply(e: BaseException, memory: Optional[int]) -> Dict[str, Any]:
    """The protocol's error answer for an exception a candidate raised:
    kind ``memory`` when it says an allocation failed (``MemoryError``,
    a CUDA or CPU allocator's out-of-memory), else ``error``, with the text
    ``tune_measure`` gives in-process (``Type: message``)."""
    if isinstance(e, TimerError):
        return {"error": str(e), "kind": "error"}
    text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    if isinstance(e, MemoryError) or memory_line(text) is not None:
        limit = mib(memory) if memory is not None else "none"
        return {"error": f"limit {limit} ({_last_line(text)})", "kind": "memory"}
    return {"error": text, "kind": "error"}


class TimerError(Exception):
    """A ``timer=`` that did not return a duration (its text is the reason,
    as in-process)."""


def timed_runs(run_once: Callable[[], Any], reps: int, timed: bool) -> float:
    """µs of ``reps`` calls of ``run_once`` as ``tune_measure`` times them
    in-process: the wall clock around all of them, or -- ``timed``, a
    ``timer=`` (or CUDA events) -- the sum of what each call returned
    (seconds)."""
    if timed:
        total = 0.0
        for _ in range(reps):
            secs = run_once()
            if isinstance(secs, bool) or not isinstance(secs, (int, float)):
                raise TimerError("timer= must return the run's duration in seconds (a float)")
            if not (secs >= 0 and secs != float("inf")):
                raise TimerError(f"timer= returned {secs}, not a duration")
            total += secs * 1e6
        return total
    t0 = time.perf_counter()
    for _ in range(reps):
        run_once()
    return (time.perf_counter() - t0) * 1e6


def serve(fd: int, handle: Callable[[Dict[str, Any]], Dict[str, Any]], ready: bool = True) -> int:
    """A worker's loop: says ``ready`` (unless ``ready=False``: a spawned
    worker says it after its init), answers each request with
    ``handle(request)`` until the end of input; the exit status."""
    sock = socket.socket(fileno=os.dup(fd))
    reader = sock.makefile("rb")
    if ready:
        sock.sendall(_ranktune.protocol_line({"ready": {"pid": os.getpid()}}, "worker"))
    while True:
        line = reader.readline(_ranktune.PROTOCOL_MAX_LINE + 1)
        if not line:
            return 0
        try:
            req = _ranktune.protocol_read(line, "tuner")
        except ValueError as e:
            reply: Dict[str, Any] = {"error": str(e), "kind": "error"}
        else:
            reply = handle(req)
        try:
            sock.sendall(_ranktune.protocol_line(reply, "worker"))
        except OSError:
            return 0


def _flush_std() -> None:
    for f in (sys.stdout, sys.stderr):
        try:
            if f is not None:
                f.flush()
        except (OSError, ValueError):
            pass


def fork_worker(runner: Callable[[int, int], float], memory: Optional[int]) -> Worker:
    """Forks a worker that answers ``{"run": j, "reps": n}`` with
    ``runner(j, n)`` (µs of the ``n`` runs); what it raises fails the
    candidate (``failure_reply``). It never returns into the caller's code:
    it leaves by ``os._exit``."""
    parent_sock, child_sock = socket.socketpair()
    err_r, err_w = os.pipe()
    address_limit = _vm_size() + memory if memory is not None else None
    parent = os.getpid()
    _libc()
    _flush_std()
    pid = os.fork()
    if pid == 0:  # the child
        code = _SERVE_FAILED
        try:
            parent_sock.close()
            os.close(err_r)
            # Its output and errors go to the parent's pipe, never to the
            # job's own output.
            os.dup2(err_w, 1)
            os.dup2(err_w, 2)
            prepare_worker(parent, address_limit)

            def handle(req: Dict[str, Any]) -> Dict[str, Any]:
                if "init" in req:
                    return {"error": "a forked worker takes no init message", "kind": "error"}
                try:
                    return {"us": float(runner(req["run"], req["reps"]))}
                except Exception as e:  # noqa: BLE001 -- the candidate's failure, answered
                    return failure_reply(e, memory)

            code = serve(child_sock.fileno(), handle)
        except BaseException:  # noqa: BLE001 -- reported on the pipe; the child must not return
            try:
                traceback.print_exc()
                _flush_std()
            except BaseException:  # noqa: BLE001
                pass
        finally:
            os._exit(code)
    child_sock.close()
    os.close(err_w)
    os.set_blocking(err_r, False)
    return Worker(pid, parent_sock, err_r, memory)


def _site_dirs() -> "set[str]":
    import site

    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        dirs.append(site.getusersitepackages())
    return {os.path.abspath(d) for d in dirs}


def spawn_worker(memory: Optional[int]) -> Worker:
    """Starts ``python -m ranktune._worker`` (this interpreter) with the
    protocol on its standard input and output (one socket) and its
    standard error on a pipe; it sets its signals first, and its memory
    limit -- ``memory`` over its own size -- once each bucket is set up
    (its imports made and the arguments rebuilt: a fresh interpreter
    starts far smaller than this process, so this process's size is no
    measure of it)."""
    parent_sock, child_sock = socket.socketpair()
    err_r, err_w = os.pipe()
    argv = [sys.executable, "-m", "ranktune._worker", "--parent", str(os.getpid())]
    if memory is not None:
        argv += ["--memory", str(memory)]
    env = dict(os.environ)
    # The worker imports this very ranktune package: where it is not in a
    # site directory (a fresh interpreter finds those itself), its parent
    # directory goes on the worker's PYTHONPATH. A site directory is never
    # put there, where it would come before the standard library.
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if pkg_root not in _site_dirs():
        env["PYTHONPATH"] = os.pathsep.join([pkg_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    actions = [
        (os.POSIX_SPAWN_DUP2, child_sock.fileno(), 0),
        (os.POSIX_SPAWN_DUP2, child_sock.fileno(), 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
    ]
    try:
        pid = os.posix_spawn(sys.executable, argv, env, file_actions=actions)
    finally:
        child_sock.close()
        os.close(err_w)
    os.set_blocking(err_r, False)
    return Worker(pid, parent_sock, err_r, memory)


# -- one measure ---------------------------------------------------------------------
class Pool:
    """An op's workers: at most one at a time; a spawned one is kept for
    the op's next bucket while healthy. Counts the starts and their cost."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.worker: Optional[Worker] = None
        self.starts = 0
        self.start_seconds = 0.0

    def close(self, wait: bool = True) -> None:
        """Ends the worker; ``wait=False``: tells it to exit and reaps it
        later (``reap_ended``), so the next bucket need not wait for the
        kernel to tear a forked copy of this process down."""
        if self.worker is not None:
            w, self.worker = self.worker, None
            if wait:
                w.close()
            else:
                end_later(w)


# Workers told to exit (their socket shut) and not reaped yet.
_ENDING: List[Worker] = []
_ENDING_LOCK = threading.Lock()


def end_later(w: Worker) -> None:
    """Tells ``w`` to exit (end of its input) without waiting for it."""
    try:
        w.sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    with _ENDING_LOCK:
        _ENDING.append(w)
    reap_ended()


def reap_ended(wait: bool = False) -> None:
    """Reaps the workers told to exit that have; ``wait``: all of them,
    killing one that does not exit within the grace period."""
    with _ENDING_LOCK:
        ending = list(_ENDING)
    for w in ending:
        if wait:
            w.close()
        else:
            try:
                done = w._reap(block=False) is not None
            except Lost:
                done = True
            if not done:
                continue
            w._close_fds()
        with _ENDING_LOCK:
            _ENDING.remove(w)


class Measure:
    """The isolated measuring of one bucket's candidates (positions
    ``run`` of the op, on one call's arguments): ``request(j, reps)`` is
    ``tune_measure_timed``'s ``run``. Policy as the Rust pool's: a worker
    is started on the first request (and after a lost one); a start that
    failed fails the bucket's later candidates with the same reason; the
    time limit's reference is the fallback's slowest request per run (any
    candidate's before the fallback was timed). ``hard`` collects
    ``(j, kind, message)`` of the crashes, time-outs and memory failures."""

    def __init__(
        self,
        pool: Pool,
        run: List[int],
        runner: Callable[[int, int], float],
        init: Optional[Dict[str, Any]],
    ) -> None:
        self.pool = pool
        self.run = run
        self.runner = runner
        self.init = init
        self.broken: Optional[str] = None
        self.ref_fallback: Optional[float] = None
        self.ref_any: Optional[float] = None
        self.hard: List[Tuple[int, str, str]] = []
        self._sent_init = False

    @property
    def limits(self) -> Any:
        return self.pool.settings.limits

    def _start(self) -> None:
        """Makes a worker ready for this bucket: a kept spawned one gets
        the bucket's ``init``; otherwise one is started (and, spawned,
        sent the ``init``). Sets ``broken`` and raises ``OSError`` when
        that fails."""
        pool = self.pool
        limit = self.limits.start_timeout
        if pool.worker is not None:
            try:
                ans = pool.worker.request({"init": self.init}, limit)
            except Lost:
                pool.worker = None  # it died in between: a fresh one below
            else:
                if "ready" in ans:
                    self._sent_init = True
                    return
                w, pool.worker = pool.worker, None
                w.kill()
                self.broken = f"the isolated worker could not start: {ans.get('error')}"
                raise OSError(self.broken)
        t0 = time.monotonic()
        try:
            if pool.settings.mode == "fork":
                worker = fork_worker(self.runner, self.limits.memory)
                hello: Optional[Dict[str, Any]] = None
            else:
                worker = spawn_worker(self.limits.memory)
                hello = {"init": self.init}
            pool.starts += 1
            try:
                ans = worker.request(hello, limit)
            except Lost as lost:
                raise OSError(lost.message) from None
            if "ready" not in ans:
                worker.kill()
                raise OSError(ans.get("error") or f"it answered {ans} instead of ready")
        except OSError as e:
            self.broken = f"the isolated worker could not start: {e}"
            raise
        finally:
            pool.start_seconds += time.monotonic() - t0
        pool.worker = worker
        self._sent_init = True

    def request(self, j: int, reps: int) -> Any:
        """Runs candidate ``j`` ``reps`` times in the worker: the time (µs,
        a float) or why it failed (a str)."""
        if self.broken is not None:
            return self.broken
        if self.pool.worker is None or not self._sent_init:
            try:
                self._start()
            except OSError:
                return self.broken
        worker = self.pool.worker
        assert worker is not None
        reps = max(1, int(reps))
        ref = self.ref_fallback if self.ref_fallback is not None else self.ref_any
        limit = self.limits.timeout_for(ref * reps if ref is not None else None)
        t0 = time.monotonic()
        try:
            ans = worker.request({"run": j, "reps": reps}, limit)
        except Lost as lost:
            self.pool.worker = None
            self._sent_init = False
            worker.close()
            if lost.kind in HARD:
                self.hard.append((j, lost.kind, lost.message))
            return lost.message
        per_run = (time.monotonic() - t0) * 1e6 / reps
        if "us" in ans:
            us = ans["us"]
            if not (isinstance(us, (int, float)) and us >= 0 and us == us and us != float("inf")):
                return f"the isolated worker sent a time that is not one: {us}"
            if self.run[j] == 0:
                self.ref_fallback = per_run if self.ref_fallback is None else max(self.ref_fallback, per_run)
            self.ref_any = per_run if self.ref_any is None else max(self.ref_any, per_run)
            return float(us)
        if "error" in ans:
            if ans.get("kind") == "memory":
                msg = f"ran out of memory: {ans['error']}"
                self.hard.append((j, "memory", msg))
                return msg
            return str(ans["error"])
        w, self.pool.worker = worker, None
        self._sent_init = False
        w.kill()
        return "the isolated worker answered ready to a run request"

    def finish(self, keep: bool) -> None:
        """The bucket is measured: a forked worker ends (its inputs were
        this call's); a spawned one is kept when ``keep``."""
        if self.pool.settings.mode == "fork":
            self.pool.close(wait=False)
        elif not keep:
            self.pool.close()

    def abort(self) -> None:
        """An interrupted measure: the worker is killed at once."""
        if self.pool.worker is not None:
            w, self.pool.worker = self.pool.worker, None
            w.kill()
