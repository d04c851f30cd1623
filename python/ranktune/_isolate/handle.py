"""The tuning process's side of one worker: starting it (a fork, or a
``posix_spawn`` of ``python -m ranktune._worker``), its requests with
their deadlines, and its end -- SIGKILL, reaping with ``wait4`` (and its
peak resident memory) and the reason it was lost.

Owns worker processes and their file descriptors; never decides what is
measured (``measure``) or what a result means.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

import ranktune
from ranktune import _ranktune
from ranktune._isolate import serve as _serve
from ranktune._isolate.reasons import Lost

__all__ = ["Worker", "fork_worker", "spawn_worker", "end_later", "reap_ended"]

# As the Rust worker handle (worker.rs).
_STDERR_KEEP = 8 << 10
_ALIVE_CHECK = 0.05
_EXIT_GRACE = 2.0
# Exit status of a worker whose own loop failed (not a candidate).
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
            # A worker that stops reading (a full socket buffer) is timed
            # out by the same limit as its answer.
            self.sock.settimeout(limit)
            try:
                self.sock.sendall(line)
            except socket.timeout:
                spent = time.monotonic() - t0
                raise self._kill_for(
                    "timeout", f"timed out after {spent:.1f} s (limit {limit:.1f} s) sending it a request"
                ) from None
            except OSError:
                raise self._died() from None
            finally:
                self.sock.settimeout(None)
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
        """Kills and reaps the worker; the failure is ``kind`` with ``why``,
        as the tuner's rule judges it (``_judge``)."""
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
        return self._judge(r, (kind, why))

    def _lost_by(self, r: Tuple[int, int], killed: bool = False) -> Lost:
        """Why the reaped worker ended by itself."""
        return self._judge(r, None)

    def _judge(self, r: Optional[Tuple[int, int]], killed_for: Optional[Tuple[str, str]]) -> Lost:
        """The Rust rule (``isolation::reasons::classify``) on what was seen:
        its wait status and peak memory, whether we killed it and why, its
        memory limit and the tail of its standard error."""
        self._drain_stderr()
        kind, why = _ranktune.reason_classify(
            r[0] if r is not None else None,
            r[1] if r is not None else 0,
            killed_for,
            self.memory,
            self.errtail.decode("utf-8", "replace"),
        )
        return Lost(kind, why)

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


def fork_worker(runner: Callable[[int, int], float], memory: Optional[int]) -> Worker:
    """Forks a worker that answers ``{"run": j, "reps": n}`` with
    ``runner(j, n)`` (µs of the ``n`` runs); what it raises fails the
    candidate (``failure_reply``). It never returns into the caller's code:
    it leaves by ``os._exit``."""
    parent_sock, child_sock, err_r, err_w = _channel()
    try:
        address_limit = _serve.vm_size() + memory if memory is not None else None
        parent = os.getpid()
        _serve.libc()
        _serve.flush_std()
        pid = os.fork()
    except BaseException:
        _close_all(parent_sock, child_sock, err_r, err_w)
        raise
    if pid == 0:  # the child
        code = _serve.SERVE_FAILED
        try:
            parent_sock.close()
            os.close(err_r)
            # Its output and errors go to the parent's pipe, never to the
            # job's own output, and its input is empty (a candidate that
            # reads it must not take the job's).
            os.dup2(err_w, 1)
            os.dup2(err_w, 2)
            _serve.stdin_from_devnull()
            _serve.prepare_worker(parent, address_limit)

            def handle(req: Dict[str, Any]) -> Dict[str, Any]:
                if "init" in req:
                    return {"error": "a forked worker takes no init message", "kind": "error"}
                try:
                    return {"us": float(runner(req["run"], req["reps"]))}
                except Exception as e:  # noqa: BLE001 -- the candidate's failure, answered
                    return _serve.failure_reply(e, memory)

            code = _serve.serve(child_sock.fileno(), handle)
        except BaseException:  # noqa: BLE001 -- reported on the pipe; the child must not return
            try:
                traceback.print_exc()
                _serve.flush_std()
            except BaseException:  # noqa: BLE001
                pass
        finally:
            os._exit(code)
    child_sock.close()
    os.close(err_w)
    os.set_blocking(err_r, False)
    return Worker(pid, parent_sock, err_r, memory)


def _channel() -> Tuple[socket.socket, socket.socket, int, int]:
    """A new worker's socket pair and standard error pipe (nothing left
    open when one of them cannot be made)."""
    parent_sock, child_sock = socket.socketpair()
    try:
        err_r, err_w = os.pipe()
    except BaseException:
        _close_all(parent_sock, child_sock)
        raise
    return parent_sock, child_sock, err_r, err_w


def _close_all(*ends: Any) -> None:
    """Closes sockets and descriptors, each once, whatever the others do."""
    for end in ends:
        try:
            if isinstance(end, socket.socket):
                end.close()
            else:
                os.close(end)
        except OSError:
            pass


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
    parent_sock, child_sock, err_r, err_w = _channel()
    argv = [sys.executable, "-m", "ranktune._worker", "--parent", str(os.getpid())]
    if memory is not None:
        argv += ["--memory", str(memory)]
    env = dict(os.environ)
    # The worker imports this very ranktune package: where it is not in a
    # site directory (a fresh interpreter finds those itself), its parent
    # directory goes on the worker's PYTHONPATH. A site directory is never
    # put there, where it would come before the standard library.
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(ranktune.__file__)))
    if pkg_root not in _site_dirs():
        env["PYTHONPATH"] = os.pathsep.join([pkg_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    actions = [
        (os.POSIX_SPAWN_DUP2, child_sock.fileno(), 0),
        (os.POSIX_SPAWN_DUP2, child_sock.fileno(), 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
    ]
    try:
        pid = os.posix_spawn(sys.executable, argv, env, file_actions=actions)
    except BaseException:
        _close_all(parent_sock, err_r)
        raise
    finally:
        _close_all(child_sock, err_w)
    os.set_blocking(err_r, False)
    return Worker(pid, parent_sock, err_r, memory)


# Workers told to exit (their socket shut) and not reaped yet.
_ENDING: List[Worker] = []
# Re-entrant: a dropped pool's finalizer (``measure``) may run inside
# ``reap_ended`` on the same thread (a garbage collection there).
_ENDING_LOCK = threading.RLock()


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


