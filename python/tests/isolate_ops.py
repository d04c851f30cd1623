"""Candidates for the isolation tests and bench: module-level functions (a
spawned worker imports them by name) that return, crash, hang or allocate
without bound for real. Light on purpose: a spawned worker imports it."""

import ctypes
import json
import os
import signal
import time


def double(n):
    return n * 2


def double_too(n):
    return n + n


def segfault(n):
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    return n * 2


def kill_segv(n):
    os.kill(os.getpid(), signal.SIGSEGV)
    return n * 2


def abort(n):
    os.abort()


def hang(n):
    while True:
        time.sleep(0.01)


def hoard(n):
    held = []
    while True:
        held.append(bytearray(32 << 20))


def exits(n):
    os._exit(3)


def raises(n):
    raise ValueError("bad tile")


def segfault_on_rank_1(n):
    if os.environ.get("RANK") == "1":
        ctypes.string_at(0)
    return n * 2


def sleepy(n, tactic):
    time.sleep(tactic / 1000)
    return n * 2


def probe(*args, **kwargs):
    """Records what it was called with (ISOLATE_PROBE names the file)."""
    path = os.environ.get("ISOLATE_PROBE")
    if path and not os.path.exists(path):
        with open(path + ".tmp", "w") as f:
            json.dump({"args": [_shape_of(a) for a in args],
                       "kwargs": {k: _shape_of(v) for k, v in kwargs.items()},
                       "pid": os.getpid()}, f)
        os.rename(path + ".tmp", path)
    return 0


def quiet(*args, **kwargs):
    return 0


def _shape_of(v):
    t = type(v)
    if t.__module__ == "torch" and t.__name__ in ("Tensor", "Parameter"):
        return {"tensor": [list(v.shape), list(v.stride()), v.storage_offset(), str(v.dtype),
                           str(v.device), v.is_contiguous(), v.requires_grad]}
    if t.__module__ == "numpy" and t.__name__ == "ndarray":
        return {"ndarray": [list(v.shape), list(v.strides), v.dtype.str]}
    if isinstance(v, (list, tuple)):
        return {t.__name__: [_shape_of(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": [[k, _shape_of(x)] for k, x in v.items()]}
    return {t.__name__: repr(v)}


def spin(n, tactic):
    """Busy for ``tactic`` µs (the bench's candidates)."""
    end = time.perf_counter() + tactic * 1e-6
    while time.perf_counter() < end:
        pass
    return n


def reads_stdin(n):
    """Reads its standard input to the end (a worker's is empty)."""
    os.read(0, 1 << 16)
    return n * 2


def breaks_enum(*args, **kwargs):
    """Raises after making the arguments' enum impossible to rebuild (as a
    candidate that leaves shared state half-written would)."""
    import spawn_ops

    spawn_ops.Tile = None
    raise ValueError("broke it")
