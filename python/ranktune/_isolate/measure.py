"""What is measured when, in a worker: an op's :class:`Pool` (its one
worker at a time, kept across buckets when spawned) and the
:class:`Measure` of one bucket (the start, the per-request time limit, the
failures that cost the worker), with the Rust pool's policy.

Owns the policy only; the processes are ``handle``'s.
"""

from __future__ import annotations

import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from ranktune._isolate.handle import Worker, end_later, fork_worker, spawn_worker
from ranktune._isolate.reasons import HARD, Lost
from ranktune._isolate.settings import Settings

__all__ = ["Pool", "Measure"]

# -- one measure ---------------------------------------------------------------------
class Pool:
    """An op's workers: at most one at a time; a spawned one is kept for
    the op's next bucket while healthy. Counts the starts and their cost."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # The worker, in a slot the finalizer shares: a pool dropped with
        # its op (a spawned worker kept) tells its worker to end, and the
        # end of tuning reaps it (``reap_ended``).
        self._slot: List[Optional[Worker]] = [None]
        weakref.finalize(self, _end_slot, self._slot)
        self.starts = 0
        self.start_seconds = 0.0

    @property
    def worker(self) -> Optional[Worker]:
        return self._slot[0]

    @worker.setter
    def worker(self, w: Optional[Worker]) -> None:
        self._slot[0] = w

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


def _end_slot(slot: List[Optional[Worker]]) -> None:
    """A dropped pool's worker: told to end, reaped later."""
    w, slot[0] = slot[0], None
    if w is not None:
        end_later(w)


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
                # It died in between (reaped): a fresh one below.
                w, pool.worker = pool.worker, None
                w.close()
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
                worker.close()  # reaped: its descriptors
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
