"""The worker's side of isolated measuring, shared by a forked worker
(``handle.fork_worker``) and a spawned one (``ranktune._worker``): its
set-up (signals, ``PR_SET_PDEATHSIG``, the address-space limit). Its
loop over the protocol's requests, how it times runs and how it answers
a candidate's failure are the Rust tuner's (``_ranktune.worker_serve``,
``_ranktune.worker_run``).

Owns only what runs inside a worker process; never starts one.
"""

from __future__ import annotations

import faulthandler
import os
import sys
from typing import Optional

from ranktune import _ranktune

__all__ = ["prepare_worker", "stdin_from_devnull", "limit_memory", "flush_std", "SERVE_FAILED", "NO_LIMIT"]

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


def flush_std() -> None:
    for f in (sys.stdout, sys.stderr):
        try:
            if f is not None:
                f.flush()
        except (OSError, ValueError):
            pass


