"""Saving what ``ranktune.tuning()`` decides, as the Rust tuner's session
saves (``crates/tune/src/session.rs``): choices (and the blocklist records
of the candidates that crashed, timed out or ran out of memory while they
were measured) are kept pending and saved as the policy says, between
measurements, and whatever is left when the outermost block exits --
normally, by an exception, or on SIGTERM.

When a save is due is the Rust tuner's to say (``_ranktune.Autosave``,
``crates/tune/src/autosave.rs``: the first choice at once; ``auto``: 20
times the last save's cost later, at most a minute; a number of seconds;
``end``; a failed save retried no sooner than 20 times its cost, at least
1 s later), and so are the policy's words and variable
(``RANKTUNE_SAVE_EVERY``): one policy, one implementation.

How the saves are made safe:

- A record leaves the pending set only once a save wrote it: a save that
  fails or is interrupted (an exception, ``KeyboardInterrupt``, a signal)
  leaves everything pending, and what a save is writing stays visible to
  any other save (the SIGTERM handler's).
- ``_lock`` guards the pending set and the counters. It is held only for a
  few dict and list operations, never while waiting for anything else, so
  that the SIGTERM handler -- which runs on the main thread, maybe while
  that thread holds ``_lock`` (re-entrant) -- can always take it.
- ``_save_lock`` makes the policy's saves one at a time (the tuned call's
  thread, the deferred save's thread, ``session.save()``, the end), so a
  save in progress counts when the next is decided. The SIGTERM handler
  never takes it: it saves what is pending at once, beside a save in
  progress if there is one (saves merge under the cache's file lock; a
  record written twice is written once). So the handler waits at most for
  its own save (``RANKTUNE_LOCK_TIMEOUT``), never for another thread.
- A deferred save (a thread, for a choice that no other bucket follows)
  runs between measurements only: a measurement starting stops it, waiting
  for a save it has begun, and re-arms it when it ends.

Owns the pending set, the session and the saves; never measures, decides
or loads.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

from ranktune import _ranktune, _signals

if TYPE_CHECKING:
    from ranktune.tune import Tuned

__all__ = ["TuningSession", "SAVE_EVERY_ENV"]

SAVE_EVERY_ENV = _ranktune.SAVE_EVERY_ENV

# The pending set and the counters (re-entrant: the SIGTERM handler takes
# it on the main thread, which may hold it). Never held while waiting.
_lock = threading.RLock()
# The policy's saves, one at a time (never taken by the SIGTERM handler).
_save_lock = threading.Lock()
# Ops with choices or blocklist records not saved yet. An op stays listed
# until the end of a session finds nothing of it pending.
_pending: "List[Tuned]" = []
# Measurements in progress (a deferred save waits until there are none).
_measuring = 0
_session: "Optional[TuningSession]" = None

# A blocklist record: tune_block's arguments after the cache.
Block = Tuple[str, str, Any, List[int], str, str, Optional[int]]


class TuningSession:
    """What ``with ranktune.tuning() as session:`` gives: the save policy
    and what was saved so far (for progress reports and tests).

    - ``policy``: ``"auto"``, ``"end"`` or ``"every"`` (``interval`` s);
    - ``saved``: new choices saved (durable: in the cache) so far;
    - ``pending``: choices made and not saved yet;
    - ``saves``, ``save_seconds``: how many saves wrote something, and
      what they cost; ``failed_saves``: how many failed (each warned);
    - ``save()``: saves the pending choices now, whatever the policy.
    """

    def __init__(self, autosave: Any) -> None:
        self._autosave = autosave
        self.policy: str = autosave.policy
        self.interval: float = autosave.interval
        self.saved = 0
        self.saves = 0
        self.failed_saves = 0
        self.save_seconds = 0.0
        self._timer: Optional[threading.Timer] = None
        self._active = True

    @property
    def pending(self) -> int:
        with _lock:
            return sum(len(t._new) for t in _pending)

    def save(self) -> int:
        """Saves the pending choices now; how many were saved. A failed
        save raises (its choices stay pending)."""
        with _save_lock:
            return _save(quiet=False)

    def _cancel(self) -> None:
        """The session ends: no deferred save from now on."""
        with _lock:
            self._active = False
        _stop_deferred(self)


def begin(autosave: Any) -> TuningSession:
    """A new session with ``autosave`` (a ``_ranktune.Autosave``: the policy
    of ``save_every=``, parsed by the Rust tuner)."""
    global _session
    sess = TuningSession(autosave)
    with _lock:
        _session = sess
    return sess


def end(sess: TuningSession) -> None:
    """The outermost block ends: no more deferred saves; what is pending
    is saved (a failed save raises; its records stay pending for the next
    session's saves)."""
    global _session
    sess._cancel()
    try:
        with _save_lock:
            _save(quiet=False)
    finally:
        with _lock:
            if _session is sess:
                _session = None
            _pending[:] = [t for t in _pending if t._new or t._blocks]


def record(t: "Tuned", bucket: Tuple[int, ...], entry: Dict[str, Any]) -> None:
    """``t`` chose ``entry`` for ``bucket``: pending until a save writes
    it. Listed first, so a save that runs in between (the SIGTERM
    handler's) sees the op before its choice, never a choice it misses."""
    with _lock:
        if not any(p is t for p in _pending):
            _pending.append(t)
        t._new[bucket] = entry


def record_block(t: "Tuned", block: Block) -> None:
    """A blocklist record of ``t`` (a candidate's hard failure): saved with
    the next save, beside the bucket's choice."""
    with _lock:
        if not any(p is t for p in _pending):
            _pending.append(t)
        t._blocks.append(block)


def decided() -> None:
    """A choice was made: saves the pending ones when the policy says a
    save is due; otherwise makes sure a save happens when it falls due (a
    deferred save), so that a choice is never kept unsaved longer than the
    policy allows, even when no other bucket follows. Call it holding no
    ranktune lock."""
    sess = _session
    if sess is not None:
        _save_if_due(sess)


@contextlib.contextmanager
def measuring() -> Iterator[None]:
    """A measurement runs: no deferred save starts until it ends (one in
    progress is waited for), so none skews its samples -- nor runs while a
    forked worker copies this process. The deferred save is armed again
    when it ends."""
    global _measuring
    with _lock:
        _measuring += 1
    sess = _session
    if sess is not None:
        _stop_deferred(sess)
    try:
        yield
    finally:
        with _lock:
            _measuring -= 1
        sess = _session
        if sess is not None:
            _arm(sess)


def on_sigterm() -> None:
    """The SIGTERM handler's save: everything pending, at once, without
    the save lock (see the module docs); a failure warns."""
    _save(quiet=True)


def install_sigterm() -> Any:
    """Installs the SIGTERM handler that saves (main thread only); returns
    the handler it replaced, for ``restore_sigterm``."""
    prev = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: Any) -> None:
        try:
            on_sigterm()
        finally:
            _signals.pass_on(prev, signum, frame)

    signal.signal(signal.SIGTERM, on_term)
    return prev


def restore_sigterm(prev: Any) -> None:
    signal.signal(signal.SIGTERM, prev if prev is not None else signal.SIG_DFL)


# -- internals ------------------------------------------------------------------------
def _has_pending() -> bool:
    with _lock:
        return any(t._new or t._blocks for t in _pending)


def _save_if_due(sess: TuningSession) -> None:
    """Saves when the policy says a save is due and something is pending;
    then (or else) arms the deferred save for when the next one is."""
    with _save_lock:
        if sess._active and sess._autosave.due() and _has_pending():
            _save(quiet=True)
    _arm(sess)


def _arm(sess: TuningSession) -> None:
    """Starts the deferred save for when the policy says the next save is
    due, unless one is armed, a measurement runs, nothing is pending or the
    policy never saves before the end."""
    with _lock:
        if sess._timer is not None or not sess._active or _measuring:
            return
        if not any(t._new or t._blocks for t in _pending):
            return
        wait = sess._autosave.wait()
        if wait is None:
            return
        timer = threading.Timer(wait, _deferred, (sess,))
        timer.daemon = True
        sess._timer = timer
        timer.start()


def _deferred(sess: TuningSession) -> None:
    """The deferred save's thread: saves if due (between measurements)."""
    with _lock:
        if sess._timer is threading.current_thread():
            sess._timer = None
        if not sess._active or _measuring:
            return  # the measurement's end arms it again
    _save_if_due(sess)


def _stop_deferred(sess: TuningSession) -> None:
    """Stops the deferred save, waiting for a save it has begun."""
    with _lock:
        timer, sess._timer = sess._timer, None
    if timer is not None and timer is not threading.current_thread():
        timer.cancel()
        timer.join()


def _save(quiet: bool) -> int:
    """Saves everything pending, each cache's choices and blocklist records
    in one locked save; how many choices were saved. What a save wrote
    leaves the pending set afterwards (a choice made again meanwhile
    stays); what it did not write stays. ``quiet`` (a save while tuning
    goes on, the SIGTERM handler's): a failure warns instead of raising."""
    with _lock:
        snapshot = [(t, dict(t._new), list(t._blocks)) for t in _pending]
    by_cache: Dict[str, Tuple[Any, List[Tuple["Tuned", Tuple[int, ...], Dict[str, Any]]], List[Tuple["Tuned", Block]]]] = {}
    unsaveable: List[Tuple["Tuned", Dict[Tuple[int, ...], Dict[str, Any]], List[Block]]] = []
    for t, new, blocks in snapshot:
        if not new and not blocks:
            continue
        if t._cache is None:
            unsaveable.append((t, new, blocks))  # choices of this process only
            continue
        _, entries, recs = by_cache.setdefault(os.fspath(t._cache.path), (t._cache, [], []))
        entries.extend((t, b, e) for b, e in new.items())
        recs.extend((t, blk) for blk in blocks)
    _forget([(t, b, e) for t, new, _ in unsaveable for b, e in new.items()],
            [(t, blk) for t, _, blocks in unsaveable for blk in blocks])
    if not by_cache:
        return 0
    sess = _session
    t0 = time.perf_counter()
    written: List[Tuple["Tuned", Tuple[int, ...], Dict[str, Any]]] = []
    written_blocks: List[Tuple["Tuned", Block]] = []
    ok = False
    try:
        for cache, entries, recs in by_cache.values():
            _ranktune.tune_save(cache, [e for _, _, e in entries], [blk for _, blk in recs])
            written.extend(entries)
            written_blocks.extend(recs)
        ok = True
    except Exception as e:  # noqa: BLE001 -- its records stay pending; raised unless quiet
        if not quiet:
            raise
        warnings.warn(
            f"ranktune: saving tuned choices failed ({e}); they are kept and saved again "
            "with the next ones (no sooner than the policy's back-off) or when tuning ends",
            RuntimeWarning,
            stacklevel=2,
        )
    finally:
        # Also on KeyboardInterrupt or SystemExit: what was written leaves
        # the pending set, the rest stays.
        cost = time.perf_counter() - t0
        n = _forget(written, written_blocks)
        if sess is not None:
            with _lock:
                sess.saved += n
                if written:
                    sess.saves += 1
                    sess.save_seconds += cost
                if not ok:
                    sess.failed_saves += 1
            sess._autosave.saved(cost, ok)
    return n


def _forget(
    entries: List[Tuple["Tuned", Tuple[int, ...], Dict[str, Any]]],
    blocks: List[Tuple["Tuned", Block]],
) -> int:
    """Takes what a save wrote out of the pending set: a choice only while
    it is still the bucket's pending one, a record by identity. How many
    choices it took (each counted once, by whichever save takes it)."""
    n = 0
    with _lock:
        for t, b, entry in entries:
            # Another save (the SIGTERM handler's) may take it in between.
            if t._new.get(b) is entry and t._new.pop(b, None) is not None:
                n += 1
        for t, blk in blocks:
            t._blocks[:] = [x for x in t._blocks if x is not blk]
    return n
