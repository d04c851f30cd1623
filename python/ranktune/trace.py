"""Per-rank profiling traces from Python.

``start(path)`` records into this rank's file (the same path rule as the
CLI's ``--trace``: ``trace.json`` becomes ``trace_<rank>.json``, a path
ending in ``/`` is a directory, ``{rank}``/``{pid}``/``{host}``
placeholders), ``span(name, **args)`` records a span (context manager or
decorator), ``step()`` ends an iteration, ``stop()`` writes the file
atomically. ``summary(paths)`` and ``merge(paths, out)`` are ``ranktune
trace summary --json`` and ``ranktune trace merge``.

Signals and exits
-----------------
The Rust session installs no signal handler when started from Python, so
Python's own handling stays as it is:

- normal exit, ``sys.exit`` and an uncaught exception (``KeyboardInterrupt``
  from Ctrl-C included: Python's default SIGINT handler raises it) write
  the trace from an ``atexit`` hook;
- SIGTERM: if the program has not set a SIGTERM handler (Python's default
  is to die at once without running ``atexit``), ``start`` installs one
  that writes the trace and then dies by SIGTERM as before (same exit
  status). If the program has its own handler, ``start`` wraps it: the
  trace is written first, then the program's handler runs. Handlers set
  after ``start`` replace ours; call ``stop()`` from them.
- Python runs signal handlers only in the main thread between bytecodes:
  a main thread blocked in a long native call writes the trace when that
  call returns. SIGKILL cannot be caught; the trace is then lost.
- ``start`` from a thread other than the main thread installs no SIGTERM
  handler (Python allows that only in the main thread); atexit still works.
- A child made by ``os.fork`` (``multiprocessing``'s default on Linux,
  DataLoader workers) does not inherit the session: it records nothing and
  never writes the parent's file (``active()`` is False there); it may
  ``start`` a trace of its own (a path with ``{pid}`` keeps them apart).
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import threading
from typing import Any, Callable, Dict, Iterable, Optional, TypeVar, Union

from ranktune import _ranktune, _signals

__all__ = ["start", "stop", "step", "span", "active", "summary", "merge"]

F = TypeVar("F", bound=Callable[..., Any])
PathLike = Union[str, "os.PathLike[str]"]

_lock = threading.Lock()
_atexit_registered = False
_previous_sigterm: Any = None


def _on_sigterm(signum: int, frame: Any) -> None:
    try:
        _ranktune.trace_stop()
    finally:
        _signals.pass_on(_previous_sigterm, signum, frame)


def _at_exit() -> None:
    try:
        _ranktune.trace_stop()
    except Exception:  # noqa: BLE001 - nothing to report to at exit
        pass


def _after_fork_in_child() -> None:
    # A child made by os.fork (multiprocessing's default on Linux, DataLoader
    # workers) inherits the parent's session; it must neither record into it
    # nor write the parent's file from its atexit. It can start its own.
    _ranktune.trace_after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def start(path: PathLike, iterations: Optional[Union[str, int]] = None) -> str:
    """Start recording this rank's trace; returns this rank's file.

    ``iterations`` keeps only those iterations (counted by :func:`step`),
    e.g. ``"10-20"`` or ``"10-20,100-105"``. The environment's settings
    (``RANKTUNE_PROFILE_ITERS``, ``RANKTUNE_TRACE_MAX_EVENTS``) apply too.
    Raises :class:`ranktune.Error` when the path is unusable or a trace is
    already recording.
    """
    global _atexit_registered, _previous_sigterm
    window = None if iterations is None else str(iterations)
    with _lock:
        file = _ranktune.trace_start(os.fspath(path), window)
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True
        if threading.current_thread() is threading.main_thread():
            current = signal.getsignal(signal.SIGTERM)
            if current is not _on_sigterm:
                _previous_sigterm = current
                signal.signal(signal.SIGTERM, _on_sigterm)
    return os.fspath(file)


def stop() -> Optional[str]:
    """Stop recording and write the file atomically; returns its path, or
    None when nothing was recording."""
    file = _ranktune.trace_stop()
    return None if file is None else os.fspath(file)


def active() -> bool:
    """Whether a trace is recording in this process."""
    return _ranktune.trace_active()


def step() -> None:
    """Mark the end of one iteration (a ``ProfilerStep#N`` span)."""
    _ranktune.trace_step()


@functools.lru_cache(maxsize=None)
def _site(name: str, cat: str) -> Any:
    return _ranktune.SpanSite(name, cat)


class span:
    """A span named ``name`` with ``args`` shown on the event.

    As a context manager::

        with ranktune.trace.span("load", shard=3):
            ...

    As a decorator (one span per call)::

        @ranktune.trace.span("forward")
        def forward(x): ...

    The events' category is ``python``; any keyword (``name`` too) is an
    argument. Costs almost nothing when no trace is recording. Each
    distinct name is kept for the life of the process.
    """

    __slots__ = ("_site", "_args", "_open")

    def __init__(self, name: str, /, **args: Any) -> None:
        self._site = _site(str(name), "python")
        self._args = args or None
        self._open: list = []

    def __enter__(self) -> "span":
        self._open.append(self._site.open(self._args))
        return self

    def __exit__(self, *exc: Any) -> None:
        self._open.pop().close()

    def __call__(self, fn: F) -> F:
        site = self._site
        args = self._args

        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            s = site.open(args)
            try:
                return fn(*a, **kw)
            finally:
                s.close()

        return wrapper  # type: ignore[return-value]


def _paths(paths: Union[PathLike, Iterable[PathLike]]) -> list:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def summary(paths: Union[PathLike, Iterable[PathLike]], top: int = 10) -> Dict[str, Any]:
    """The dict ``ranktune trace summary --json`` prints, for trace files,
    directories or globs."""
    return _ranktune.trace_summary(_paths(paths), top)


def merge(
    paths: Union[PathLike, Iterable[PathLike]], out: PathLike, align: str = "absolute"
) -> Dict[str, Any]:
    """Merge per-rank traces into ``out`` (``.json`` or ``.json.gz``, written
    atomically) on one timeline, like ``ranktune trace merge``. ``align`` is
    ``"absolute"`` or ``"first-step"``. Returns a report dict (``events``,
    ``ranks``, ``warnings``, ...)."""
    return _ranktune.trace_merge(_paths(paths), os.fspath(out), align)
