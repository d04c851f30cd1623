"""What is measured when, in a worker: an op's :class:`Pool` (its one
worker at a time, kept across buckets when spawned) and the
:class:`Measure` of one bucket, both the Rust tuner's own pool
(``_ranktune.WorkerPool``: ``isolation::adopted``) -- the start on the
first request and after a lost worker, the per-request time limit and its
reference (the fallback's slowest request per run), a start that failed
failing the bucket's later candidates, the failures that cost the worker.

Owns only what Python must: starting a worker (``handle``) when the Rust
pool asks for one, and which failures go on the blocklist (``hard``).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ranktune import _ranktune
from ranktune._isolate.handle import fork_worker, spawn_worker
from ranktune._isolate.settings import Settings

__all__ = ["Pool", "Measure"]


class Pool:
    """An op's workers: at most one at a time; a spawned one is kept for
    the op's next bucket while healthy. Counts the starts and their cost.
    A pool dropped with its op tells its worker to end, and the end of
    tuning reaps it (``reap_ended``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.rs = _ranktune.WorkerPool(settings.limits)

    @property
    def starts(self) -> int:
        return self.rs.starts  # type: ignore[no-any-return]

    @property
    def start_seconds(self) -> float:
        return self.rs.start_seconds  # type: ignore[no-any-return]

    @property
    def worker_pid(self) -> Optional[int]:
        """The running worker's pid; None while none runs."""
        return self.rs.worker_pid  # type: ignore[no-any-return]

    def close(self, wait: bool = True) -> None:
        """Ends the worker; ``wait=False``: tells it to exit and reaps it
        later (``reap_ended``), so the next bucket need not wait for the
        kernel to tear a forked copy of this process down."""
        self.rs.end(wait)


class Measure:
    """The isolated measuring of one bucket's candidates (positions
    ``run`` of the op, on one call's arguments): ``request(j, reps)`` is
    ``tune_measure_timed``'s ``run``. ``hard`` collects ``(j, kind,
    message)`` of the crashes, time-outs and memory failures."""

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
        self.init = {"init": init} if init is not None else None
        self.hard: List[Tuple[int, str, str]] = []
        pool.rs.new_bucket()

    def _start(self) -> Tuple[Any, Optional[Dict[str, Any]]]:
        """A new worker for the Rust pool, and the message it must answer
        ``ready`` to (a forked one answers unasked)."""
        memory = self.pool.settings.limits.memory
        if self.pool.settings.mode == "fork":
            return fork_worker(self.runner, memory), None
        return spawn_worker(memory), self.init

    def request(self, j: int, reps: int) -> Any:
        """Runs candidate ``j`` ``reps`` times in the worker: the time (µs,
        a float) or why it failed (a str)."""
        got = self.pool.rs.run(j, max(1, int(reps)), self.run[j] == 0, self.init, self._start)
        if isinstance(got, float):
            return got
        kind, message, hard = got
        if hard:  # the Rust rule: it cost the worker (crash, time-out, memory)
            self.hard.append((j, kind, message))
        return message

    def finish(self, keep: bool) -> None:
        """The bucket is measured: a forked worker ends (its inputs were
        this call's); a spawned one is kept when ``keep``."""
        if self.pool.settings.mode == "fork":
            self.pool.close(wait=False)
        elif not keep:
            self.pool.close()

    def abort(self) -> None:
        """An interrupted measure: the worker is killed at once."""
        self.pool.rs.kill()
