"""The worker's side of isolated measuring, shared by a forked worker
(``handle.fork_worker``) and a spawned one (``ranktune._worker``): its
set-up (signals, ``PR_SET_PDEATHSIG``, the address-space limit), how it
times runs and how it answers a candidate's failure. Its loop over the
protocol's requests is the Rust tuner's (``_ranktune.worker_serve``).

Owns only what runs inside a worker process; never starts one.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import time
from typing import Any, Callable, Dict, Optional

from ranktune import _ranktune

__all__ = [
    "prepare_worker", "stdin_from_devnull", "limit_memory", "failure_reply", "TimerError", "timed_runs",
    "flush_std", "SERVE_FAILED", "NO_LIMIT",
]  # fmt: skip

# Exit status of a worker whose own loop failed (not a candidate).
SERVE_FAILED = 70
NO_LIMIT = 71

def prepare_worker(parent: int, memory: Optional[int]) -> None:
    """Sets a worker up as the Rust tuner's workers are set up
    (``_ranktune.worker_prepare``: ``isolation::setup``): SIGINT and
    SIGTERM ignored (the tuner decides when its worker ends), the crash
    signals' default actions back (and no ``faulthandler`` dump: the reason
    is the signal), killed by SIGKILL when the tuning process dies; and its
    address space limited to ``memory`` bytes over its own size, read here
    in the worker. Exits at once when the tuning process is already gone."""
    faulthandler.disable()
    if not _ranktune.worker_prepare(parent):
        os._exit(0)
    if memory is not None:
        limit_memory(memory)


def stdin_from_devnull() -> None:
    """Points this worker's standard input (descriptor 0) at ``/dev/null``:
    a candidate that reads it gets an end of file, never the protocol's
    bytes (a spawned worker's socket was there) nor the job's input."""
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        if null != 0:
            os.dup2(null, 0)
    finally:
        if null != 0:
            os.close(null)


def limit_memory(memory: Optional[int]) -> None:
    """Limits this worker's address space to ``memory`` bytes over its own
    size now (None: lifts the limit; the soft limit, so a spawned worker
    sets it again for each bucket); exits when it cannot."""
    try:
        _ranktune.worker_limit_memory(memory)
    except OSError as e:
        os.write(2, f"cannot set the memory limit: {e}\n".encode())
        os._exit(NO_LIMIT)


def failure_reply(e: BaseException, memory: Optional[int]) -> Dict[str, Any]:
    """The protocol's error answer for an exception a candidate raised:
    kind ``memory`` when it says an allocation failed (``MemoryError``,
    a CUDA or CPU allocator's out-of-memory), else ``error``, with the text
    ``tune_measure`` gives in-process (``Type: message``): the Rust rule,
    ``_ranktune.reason_failure_reply``."""
    if isinstance(e, TimerError):
        return {"error": str(e), "kind": "error"}
    text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return _ranktune.reason_failure_reply(text, isinstance(e, MemoryError), memory)  # type: ignore[no-any-return]


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


def flush_std() -> None:
    for f in (sys.stdout, sys.stderr):
        try:
            if f is not None:
                f.flush()
        except (OSError, ValueError):
            pass


