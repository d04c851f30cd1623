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

Both speak the worker protocol of ``crates/tune/src/isolation/protocol.rs``
(newline-delimited JSON over one Unix socket on the worker's standard input
and output, its standard error on a pipe), and every message is parsed and
written by that Rust module (``_ranktune.protocol_read``/``protocol_line``).
The limits' defaults and the per-request time limit are the Rust tuner's
(``_ranktune.IsolationLimits``: ``max(5 s, 50 x the fallback's time)``, 60 s
before anything of the bucket was timed, 120 s to start, memory as half of
``MemAvailable`` over the local ranks, an ``RLIMIT_AS`` growth over this
process's size), and so is the statistic (``_ranktune.tune_measure_timed``,
the sampler of ``tune_measure`` over runs the worker times).

Why the supervision itself (start, deadlines, SIGKILL, reaping, reasons) is
written here, in Python, and not the Rust tuner's ``isolation::pool``:

- A forked worker must run Python code -- the candidates -- in a copy of
  this interpreter. Only ``os.fork`` makes that copy sound: it runs CPython's
  own fork protocol (the import lock, the threading module's state, the
  handlers of ``os.register_at_fork``, where ``ranktune.trace`` forgets the
  parent's trace session). The Rust tuner's fork is a bare ``fork(2)`` whose
  child may run only async-signal-safe code until its Rust serve loop.
- The Rust pool and worker handle are internal to the tuner crate (they
  serve its bench of Rust ops); the bindings cannot reach them.
- Everything the supervision needs is in Python's standard library:
  ``socketpair``, ``poll``, ``wait4`` (with the worker's peak resident
  memory), ``setrlimit``, signal dispositions, ``posix_spawn``; only
  ``PR_SET_PDEATHSIG`` goes through ``ctypes``.

The reasons are worded as the Rust worker words them (``worker.rs``):
``crashed: SIGSEGV (signal 11)``, ``timed out after 1.0 s (limit 1.0 s)``,
``ran out of memory: limit 128 MiB (MemoryError)``, ``the worker exited with
status 3``. Hard failures (crash, timeout, memory) go on the cache's
blocklist (``tune.py`` records them), as the Rust tuner's do.

Owns worker processes, their limits and the classification of their
deaths. It never decides, never touches the cache, and runs only while a
The package, one job a module:

- ``settings``: the mode and the limits from the arguments and the
  environment;
- ``reasons``: why a worker was lost, in the Rust worker's words;
- ``handle``: starting a worker (fork or spawn) and handing it to the Rust
  tuner's supervisor (requests, deadlines, SIGKILL, reaping, reasons);
- ``serve``: the worker's side (its set-up, its loop, its timing), for a
  forked worker and for ``ranktune._worker``;
- ``measure``: an op's pool and one bucket's measure (the Rust pool).

It never decides, never touches the cache, and runs only while a bucket is
measured.
"""

from __future__ import annotations

from ranktune._isolate.handle import fork_worker, reap_ended, spawn_worker
from ranktune._isolate.measure import Measure, Pool
from ranktune._isolate.serve import (
    failure_reply,
    limit_memory,
    prepare_worker,
    serve,
    stdin_from_devnull,
    timed_runs,
)
from ranktune._isolate.settings import ISOLATE_ENV, Settings, settings

__all__ = [
    "ISOLATE_ENV", "Settings", "settings", "Measure", "Pool", "fork_worker",
    "spawn_worker", "reap_ended", "failure_reply", "limit_memory", "prepare_worker",
    "serve", "stdin_from_devnull", "timed_runs",
]  # fmt: skip
