"""ranktune for PyTorch jobs: ``torch.profiler`` traces by ranktune's
per-rank rule, the profiling schedule from the environment, tensor shapes as
tuning keys, a device timer, and the tuning strategies over the job's own
process group.

- :func:`trace_handler` -- ``on_trace_ready=`` for ``torch.profiler``: each
  rank writes its own file (ranktune's path rule), atomically (a temp file
  renamed: never a half-written file), with ``distributedInfo`` naming the
  rank even without ``torch.distributed``, ranktune's run id in
  ``otherData``, and one file per profiling cycle (a second cycle never
  overwrites the first);
- :func:`profile` -- ``torch.profiler.profile`` with that handler and
  :func:`schedule`, which also exports the cycle being recorded on SIGTERM;
- :func:`schedule` -- the profiler schedule from ``RANKTUNE_PROFILE_ITERS``
  / ``TLLM_PROFILE_START_STOP`` (``A-B,C-D`` or ``N``, both ends included);
- :func:`shapes` -- a ``key=`` for :func:`ranktune.autotune` from the shapes
  of the tensor arguments; :func:`timer` and :func:`synchronize` -- timing on
  the arguments' device (CUDA events on a GPU; wall clock on a CPU);
- with ``torch.distributed`` initialised (or ``group=`` given to
  ``autotune``), ``strategy=`` meets through the process group's c10d store
  (the TCPStore ``torchrun`` starts): nothing to configure.

The path rule, the run id, the window syntax and the strategy protocol are
the Rust crates' (asked through ``_ranktune``); this module owns only what
touches torch. ``import ranktune.torch`` needs torch; nothing else in
ranktune does.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from ranktune import _ranktune, _signals

__all__ = ["trace_handler", "profile", "schedule", "shapes", "timer", "synchronize"]


# -- where this rank is -------------------------------------------------------
def _dist() -> Any:
    d = getattr(torch, "distributed", None)
    if d is not None and d.is_available() and d.is_initialized():
        return d
    return None


def _rank_world(group: Any = None) -> Tuple[Optional[int], Optional[int]]:
    """This process's rank and world size in ``group`` (default: the default
    process group) when ``torch.distributed`` is initialised, else
    ``(None, None)`` (the launcher's variables decide, in Rust)."""
    d = _dist()
    if d is None:
        return None, None
    return d.get_rank(group), d.get_world_size(group)


# -- the profiler hook --------------------------------------------------------
class TraceHandler:
    """The callable :func:`trace_handler` returns; ``files`` lists what it
    wrote, in order."""

    def __init__(self, path: Optional[str], gzip: Optional[bool]) -> None:
        self._path = path
        self._gzip = gzip
        self._cycle = 0
        self._lock = threading.Lock()
        self.files: List[str] = []

    def target(self) -> Dict[str, Any]:
        """This rank's file and header fields (the Rust rule; the directory
        is created)."""
        rank, world = _rank_world()
        t = _ranktune.torch_trace_target(self._path, rank, world)
        path = os.fspath(t["path"])
        if self._gzip is True and not path.endswith(".gz"):
            path += ".gz"
        elif self._gzip is False and path.endswith(".gz"):
            path = path[:-3]
        t["path"] = path
        return t

    def __call__(self, prof: Any) -> None:
        with self._lock:
            t = self.target()
            self.files.append(_export(prof, t, self._cycle))
            self._cycle += 1

    def watch(self, prof: Any) -> None:
        """Exports the cycle ``prof`` is recording when SIGTERM arrives
        (then the signal does what it did before). Main thread only."""
        if threading.current_thread() is not threading.main_thread():
            return
        prev = signal.getsignal(signal.SIGTERM)

        def on_term(signum: int, frame: Any) -> None:
            try:
                prof.stop()  # a recording cycle ends in on_trace_ready
            except Exception:  # noqa: BLE001 - dying anyway; the signal must pass on
                pass
            finally:
                _signals.pass_on(prev, signum, frame)

        signal.signal(signal.SIGTERM, on_term)


def _export(prof: Any, t: Dict[str, Any], cycle: int) -> str:
    """Exports ``prof``'s cycle ``cycle`` (from 0) as this rank's file:
    torch writes a temp file beside it, which Rust publishes with the
    header (``distributedInfo`` naming the rank, ``otherData`` with
    ranktune's run id, first, so streaming readers find them before the
    events), atomically: readers see the old file or the whole new one.
    The first cycle is the rank's file, later ones ``<stem>.cycle<N><ext>``
    (the Rust rule). Returns the file written."""
    final = t["path"]
    raw = os.path.join(os.path.dirname(final) or ".", f".{os.path.basename(final)}.{os.getpid()}.torch.json")
    defaults = {k: t[k] for k in ("rank", "world_size", "local_rank")}
    other = {
        "run_id": t["run_id"],
        "run_id_source": t["run_id_source"],
        "ranktune_version": _ranktune.__version__,
        "profiler": f"torch.profiler {torch.__version__}",
        "cycle": cycle + 1,
        "ranktune_base_ns": t["base_ns"],
    }
    try:
        prof.export_chrome_trace(raw)
        return os.fspath(_ranktune.torch_trace_publish(raw, final, cycle, {**defaults, "backend": "torch.profiler"}, other))
    finally:
        try:
            os.unlink(raw)
        except FileNotFoundError:
            pass


def trace_handler(path: Any = None, *, gzip: Optional[bool] = None) -> TraceHandler:
    """A callable for ``torch.profiler.profile(on_trace_ready=...)`` that
    writes this rank's trace by ranktune's rule.

    ``path``: a file (``trace.json`` -> ``trace_<rank>.json``; ``.json.gz``
    gzips), a directory (``traces/`` or an existing one, created when it ends
    in ``/``: ``traces/trace_<rank>.json``), or a template with ``{rank}``,
    ``{pid}``, ``{host}``; default ``$RANKTUNE_TRACE``, then
    ``$TLLM_TORCH_PROFILE_TRACE``. ``gzip``: True or False forces it (adding
    or dropping ``.gz``); None follows the name. The rank is the process
    group's when ``torch.distributed`` is initialised, else the launcher's.
    A second profiling cycle (``schedule(repeat=...)``) writes
    ``trace_<rank>.cycle2.json`` and so on, never over the first.
    """
    h = TraceHandler(None if path is None else os.fspath(path), gzip)
    h.target()  # fail now, naming the problem, not at the first cycle
    return h


def schedule(value: Optional[str] = None) -> Optional[Callable[[int], Any]]:
    """The ``torch.profiler`` schedule for the iterations in ``value``, else
    ``$RANKTUNE_PROFILE_ITERS``, else ``$TLLM_PROFILE_START_STOP``: ranges
    ``A-B`` (both ends recorded) or single iterations ``N``, comma-separated;
    iteration 0 is the code before the first ``prof.step()``. Each range is
    one cycle (one file with :func:`trace_handler`); the iteration before a
    range is a warm-up. None when nothing is set (torch then records
    everything between start and stop)."""
    ranges = _ranktune.torch_profile_window(value)
    if ranges is None:
        return None
    from torch.profiler import ProfilerAction

    def sched(step: int) -> Any:
        for a, b in ranges:
            if a <= step <= b:
                return ProfilerAction.RECORD_AND_SAVE if step == b else ProfilerAction.RECORD
        for a, _ in ranges:
            if step == a - 1:
                return ProfilerAction.WARMUP
        return ProfilerAction.NONE

    return sched


def profile(
    path: Any = None, *, gzip: Optional[bool] = None, schedule: Any = "env", **kwargs: Any
) -> Any:
    """``torch.profiler.profile(**kwargs)`` with ``on_trace_ready`` set to
    :func:`trace_handler` (``path``, ``gzip``) and ``schedule`` from the
    environment (:func:`schedule`; pass None for none), which exports the
    cycle it is recording when SIGTERM arrives. Use as a context manager."""
    handler = trace_handler(path, gzip=gzip)
    sched = globals()["schedule"]() if schedule == "env" else schedule
    if sched is not None:
        kwargs["schedule"] = sched
    prof = torch.profiler.profile(on_trace_ready=handler, **kwargs)
    handler.watch(prof)
    prof.ranktune_handler = handler
    return prof


# -- tensors as tuning arguments ----------------------------------------------
def shapes(*args: Any, **kwargs: Any) -> Tuple[int, ...]:
    """A ``key=`` for :func:`ranktune.autotune`: every dimension of every
    tensor argument, in order (positional, then keyword in the call's
    order); other arguments are not part of the key."""
    dims: List[int] = []
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            dims.extend(int(d) for d in a.shape)
    return tuple(dims)


def _device_of(args: Any, kwargs: Any) -> Optional[Any]:
    for a in list(args) + list((kwargs or {}).values()):
        if isinstance(a, torch.Tensor):
            return a.device
    return None


def on_gpu(args: Any, kwargs: Any = None) -> bool:
    """Whether the first tensor among the arguments lives on a CUDA device."""
    dev = _device_of(args, kwargs)
    return dev is not None and dev.type == "cuda"


def synchronize(device: Any = None) -> None:
    """Waits for the device's queued work (``torch.cuda.synchronize``); a
    no-op without CUDA."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize(device)


def timer(run: Callable[[], Any]) -> float:
    """A ``timer=`` for :func:`ranktune.autotune`: seconds one call of
    ``run()`` took on the device -- CUDA events around it when CUDA is in
    use, else the wall clock (``time.perf_counter``)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


# -- strategies over the process group ----------------------------------------
class _C10dStore:
    """A c10d store as the collective's meeting place: ``get`` never waits
    (``check`` first), under a prefix of ranktune's own."""

    def __init__(self, store: Any, prefix: str) -> None:
        self._store = store
        self._prefix = prefix

    def set(self, key: str, value: bytes) -> None:
        self._store.set(self._prefix + key, value)

    def get(self, key: str) -> Optional[bytes]:
        k = self._prefix + key
        if not self._store.check([k]):
            return None
        return bytes(self._store.get(k))

    def delete(self, key: str) -> None:
        try:
            self._store.delete_key(self._prefix + key)
        except (RuntimeError, NotImplementedError):
            pass  # a store without deletes: the rank's next hello replaces it


_group_coordinators: Dict[Any, Any] = {}
_group_lock = threading.Lock()


def _group_name(group: Any) -> str:
    d = torch.distributed
    try:
        return str(d.distributed_c10d._get_process_group_name(group or d.group.WORLD))
    except Exception:  # noqa: BLE001 - older torch: fall back to the ranks
        ranks = d.get_process_group_ranks(group) if group is not None else []
        return "ranks-" + "-".join(str(r) for r in ranks) if ranks else "world"


def _coordinator_for(group: Any = None) -> Any:
    """The coordinator over ``group`` (default: the default process group)
    when ``torch.distributed`` is initialised, else None. One per group:
    the ranks' calls are matched by their order."""
    d = _dist()
    if d is None:
        if group is not None:
            raise _ranktune.Error(
                "group= was given but torch.distributed is not initialised; call "
                "torch.distributed.init_process_group() first"
            )
        return None
    name = _group_name(group)
    with _group_lock:
        c = _group_coordinators.get(name)
        if c is None:
            store = d.distributed_c10d._get_default_store()
            rank, world = d.get_rank(group), d.get_world_size(group)
            if rank < 0:
                raise _ranktune.Error(
                    f"this process (global rank {d.get_rank()}) is not in the group given as "
                    "group=; tune with a group this rank belongs to"
                )
            # The run's id by the Rust rule (torchrun's TORCHELASTIC_RUN_ID
            # with MASTER_ADDR/MASTER_PORT, RANKTUNE_JOB_ID, ...).
            job = f"{_ranktune.job_id() or 'torch'}-pg{name}"
            c = _ranktune.Coordinator.over_store(
                _C10dStore(store, "ranktune/"),
                rank,
                world,
                job,
                name=f"torch.distributed store of process group {name} ({d.get_backend(group)})",
            )
            _group_coordinators[name] = c
        return c
