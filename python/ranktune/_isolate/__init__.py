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

Everything but the start is the Rust tuner's, through ``_ranktune``: the
settings and their words (``isolation_settings``), the limits
(``IsolationLimits``), the pool (``WorkerPool``: one worker at a time, the
per-request deadline, SIGKILL, reaping, why a worker was lost, which
failures are hard, the sampler), the worker protocol and the worker's loop
(``worker_serve``), its set-up (``worker_prepare``, ``worker_limit_memory``),
how it times runs and words a candidate's failure (``worker_run``). Python
starts the worker because a forked worker must run Python code -- the
candidates -- in a copy of this interpreter, and only ``os.fork`` makes that
copy sound (CPython's fork protocol: the import lock, the threading state,
``os.register_at_fork`` handlers).

The package, one job a module:

- ``handle``: starting a worker (fork or spawn) and handing it to the Rust
  supervisor;
- ``serve``: the worker's side (its set-up, its timing, its answers), for
  a forked worker and for ``ranktune._worker``.

It never decides, never touches the cache, and runs only while a bucket is
measured.
"""

from __future__ import annotations

from ranktune._isolate.handle import fork_worker, spawn_worker
from ranktune._isolate.serve import limit_memory, prepare_worker, stdin_from_devnull

__all__ = ["fork_worker", "spawn_worker", "limit_memory", "prepare_worker", "stdin_from_devnull"]
