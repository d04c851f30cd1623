"""The tuning process's side of one worker: starting it (a fork, or a
``posix_spawn`` of ``python -m ranktune._worker``) and handing it to the
Rust tuner's supervisor (``_ranktune.WorkerHandle``), which sends its
requests with their deadlines, reads its answers and standard error, ends
and reaps it, and says why it was lost -- the rules the Rust tuner's own
workers follow, written once.

Owns starting worker processes; never decides what is measured
(``measure``) or what a result means.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from typing import Any, Callable, Dict, Optional, Tuple

import ranktune
from ranktune import _ranktune
from ranktune._isolate import serve as _serve

__all__ = ["fork_worker", "spawn_worker"]

def fork_worker(run_once: Callable[[int], Any], timed: bool, memory: Optional[int]) -> Any:
    """Forks a worker that answers ``{"run": j, "reps": n}`` by running
    ``run_once(j)`` ``n`` times (``_ranktune.worker_run``: timed as
    in-process, by what each run returns when ``timed``; what it raises
    fails the candidate). It never returns into the caller's code: it
    leaves by ``os._exit``."""
    parent_sock, child_sock, err_r, err_w = _channel()
    try:
        parent = os.getpid()
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
            _serve.prepare_worker(parent, memory)

            def handle(req: Dict[str, Any]) -> Dict[str, Any]:
                if "init" in req:
                    return {"error": "a forked worker takes no init message", "kind": "error"}
                j = req["run"]
                return _ranktune.worker_run(lambda: run_once(j), req["reps"], timed, memory)  # type: ignore[no-any-return]

            _ranktune.worker_serve(child_sock.fileno(), handle)
            code = 0
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
    return _adopt(pid, parent_sock, err_r, memory)


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


def spawn_worker(memory: Optional[int]) -> Any:
    """Starts ``python -m ranktune._worker`` (this interpreter) with the
    protocol on its standard input and output (one socket) and its
    standard error on a pipe (``_ranktune.WorkerHandle.spawn``, the Rust
    tuner's start of a worker program); it sets its signals first, and its memory
    limit -- ``memory`` over its own size -- once each bucket is set up
    (its imports made and the arguments rebuilt: a fresh interpreter
    starts far smaller than this process, so this process's size is no
    measure of it)."""
    args = ["-m", "ranktune._worker", "--parent", str(os.getpid())]
    if memory is not None:
        args += ["--memory", str(memory)]
    env = {}
    # The worker imports this very ranktune package: where it is not in a
    # site directory (a fresh interpreter finds those itself), its parent
    # directory goes on the worker's PYTHONPATH. A site directory is never
    # put there, where it would come before the standard library.
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(ranktune.__file__)))
    if pkg_root not in _site_dirs():
        env["PYTHONPATH"] = os.pathsep.join([pkg_root] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    # Started as the Rust tuner starts a worker program.
    return _ranktune.WorkerHandle.spawn(sys.executable, args, env, memory)


def _adopt(pid: int, sock: socket.socket, err_fd: int, memory: Optional[int]) -> Any:
    """The started worker, handed to the Rust tuner's supervisor
    (``_ranktune.WorkerHandle``), which owns both descriptors from here on
    and reaps it (a handle that cannot be made kills and reaps it here)."""
    try:
        return _ranktune.WorkerHandle(pid, sock.detach(), err_fd, memory)
    except BaseException:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise
