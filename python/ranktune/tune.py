"""``ranktune.autotune`` and ``ranktune.tuning()``: pick the fastest of
several implementations of one function, per shape bucket, and keep the
choice in ranktune's shared cache.

What decides is the Rust tuner's, asked through ``_ranktune``: measuring
(warm-ups, calibrated repetitions, adaptive sampling), bucketing, the miss
dispatch, which stored entries a load keeps, the blocklist, the decision
(median + near-tie rule), the entry recorded (``TunedOp``), and the saves
(``TuningSession``: the pending choices, the save policy, deferred saves,
the SIGTERM save). This module keeps what must be Python: the hit (a dict
look-up that never reaches Rust), calling the user's functions, and the
worker's fork or spawn.

Outside ``tuning()`` a call whose bucket has a stored choice runs that
choice (one dict look-up after ``key``); a miss runs the first candidate
(the fallback) and warns once per op and bucket. Inside ``with
ranktune.tuning():`` a miss measures every candidate on the call's actual
arguments and the choices are saved when the block exits -- also on an
exception, and on SIGTERM (the handler saves, then lets the signal do what
it did before).

Known-bad tactics (the cache's blocklist: a candidate that crashed, timed
out, ran out of memory or failed validation in this environment) are not
run by a tuning measure -- they count as failed, with the recorded reason --
unless ``retry_failed=True`` (or ``RANKTUNE_RETRY_FAILED=1``); one retried
that works leaves the blocklist. With ``validate=``, the first use of a
cached choice in a process is checked (see :func:`autotune`).

With ``isolate=`` (or ``RANKTUNE_ISOLATE``) the candidates are measured in
a worker process (``ranktune._isolate``): a crash, a time-out or an
exhausted memory fails that candidate and goes on the blocklist. With
``tuning(save_every=...)`` (or ``RANKTUNE_SAVE_EVERY``) new choices are
saved while tuning goes on (by default once the time since the last save
is 20 times what it cost, at most a minute), so a SIGKILL loses only the
latest ones.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import keyword
import signal
import sys
import threading
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ranktune import _isolate, _ranktune, _rebuild, _signals
from ranktune._ranktune import TuningSession

__all__ = ["autotune", "tuning", "is_tuning", "Tuned", "TuningSession"]

# Raw keys remembered for the hit path before it is cleared.
_HOT_MAX = 65536

# The tuning depth and the coordinators (never held while waiting).
_lock = threading.RLock()
_tuning_depth = 0


def is_tuning() -> bool:
    """Whether a ``tuning()`` block is active (in any thread)."""
    return _tuning_depth > 0


def _bucketer(buckets: Any) -> Callable[[Tuple[int, ...]], Tuple[int, ...]]:
    """The dims tuple -> bucket tuple map of ``buckets=``: the user's
    callable, or the Rust tuner's rule for ``"pow2"``, ``"exact"`` or a list
    (``_ranktune.Buckets``, which raises the ValueError for anything else)."""
    if callable(buckets) and not isinstance(buckets, str):
        return lambda dims: tuple(int(b) for b in buckets(dims))
    return _ranktune.Buckets(buckets)


def _legacy_checksum(cands: List[Tuple[str, int, Any, Callable[..., Any]]]) -> str:
    """The candidate-set checksum ranktune 0.1's Python package wrote before
    it asked the Rust tuner for one (a SHA-256 of the candidates' reprs).
    Entries saved under it still load (``_load``); it is never written."""
    text = repr([(n, i, repr(t)) for n, i, t, _ in cands])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _fixed_positional(
    key: Callable[..., Any], fns: List[Callable[..., Any]]
) -> Optional[List[str]]:
    """The parameter names of ``key`` when the tuned function can take
    exactly those, positionally: ``key`` has only plain parameters (no
    defaults, no ``*args``/``**kwargs``) and every candidate accepts that
    many positional arguments. ``None`` otherwise, or when a signature
    cannot be read (a builtin), or a name is one the entry uses itself."""
    try:
        params = list(inspect.signature(key).parameters.values())
    except (TypeError, ValueError):
        return None
    plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or any(p.kind not in plain or p.default is not p.empty for p in params):
        return None
    names = [p.name for p in params]
    if any(n.startswith("_rt_") or keyword.iskeyword(n) for n in names):
        return None
    probe = tuple(range(len(names)))
    for fn in fns:
        try:
            inspect.signature(fn).bind(*probe)
        except (TypeError, ValueError):
            return None
    return names


def _fixed_entry(
    names: List[str],
    key: Callable[..., Any],
    hot: Dict[Any, Callable[..., Any]],
    slow: Callable[..., Any],
) -> Callable[..., Any]:
    """The hit path for a fixed list of positional parameters, generated
    with exactly those parameters (as ``dataclasses`` and ``namedtuple``
    generate their methods): a call passes its arguments with no tuple or
    dict built. A call by keyword with ``key``'s parameter names works too.

    A hit is one expression, ``hot[key(...)](...)``, with nothing stored
    between its steps: it costs what the smallest possible Python entry
    costs (``python python/bench/dispatch.py`` times both). A miss or an
    unhashable key surfaces as the look-up's KeyError or TypeError, and
    ``_missed_key`` tells those apart from the same errors raised by ``key``
    or by the chosen candidate, which propagate untouched. The miss is
    handled after the ``except`` block, so nothing it raises is chained to
    the look-up's error."""
    params = ", ".join(names)
    code = (
        f"def tuned({params}):\n"
        f"    try:\n"
        f"        return _rt_hot[_rt_key({params})]({params})\n"
        f"    except (KeyError, TypeError):\n"
        f"        _rt_k = _rt_missed(_rt_key, _rt_hot, ({params},), {{}})\n"
        f"        if _rt_k is _rt_theirs:\n"
        f"            raise  # raised by key or by the candidate\n"
        f"    return _rt_slow(_rt_k, ({params},), {{}})\n"
    )
    scope: Dict[str, Any] = {
        "_rt_key": key,
        "_rt_hot": hot,
        "_rt_slow": slow,
        "_rt_missed": _missed_key,
        "_rt_theirs": _THEIRS,
    }
    exec(compile(code, "<ranktune.autotune entry>", "exec"), scope)  # generated above
    return scope["tuned"]


# What ``_missed_key`` returns when the error was not the look-up's.
_THEIRS = object()


def _missed_key(
    key: Callable[..., Any],
    hot: Dict[Any, Callable[..., Any]],
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
) -> Any:
    """The key, when a KeyError or TypeError out of the entry's one
    expression came from its look-up (the key is not in ``hot``, or is
    unhashable); ``_THEIRS`` when it came from ``key`` or the candidate.
    ``key`` is pure (it is called on every hit), so calling it again gives
    the same key, or raises again when it was ``key`` that raised. ``hot``
    only gains keys between two clears (entering ``tuning()``, or the
    65,536-key cap), so a key the look-up found is still there unless one
    of those ran on another thread in between; the candidate is then called
    once more, by the slow path."""
    try:
        k = key(*args, **kwargs)
    except BaseException:
        return _THEIRS  # key raised: the error was its own
    try:
        return _THEIRS if k in hot else k
    except TypeError:
        return k  # unhashable: the slow path runs it, unmemoized


def _any_entry(
    key: Callable[..., Any], hot: Dict[Any, Callable[..., Any]], slow: Callable[..., Any]
) -> Callable[..., Any]:
    """The hit path for any signature: the arguments as ``*args`` and
    ``**kwargs``; a hit is one expression in a ``try``, as in
    ``_fixed_entry``."""

    def tuned(*args: Any, **kwargs: Any) -> Any:
        try:
            if kwargs:
                return hot[key(*args, **kwargs)](*args, **kwargs)
            # Positional calls: no keyword dict is passed on (about 30% less).
            return hot[key(*args)](*args)
        except (KeyError, TypeError):
            k = _missed_key(key, hot, args, kwargs)
            if k is _THEIRS:
                raise  # raised by key or by the candidate
        return slow(k, args, kwargs)

    return tuned


def _torch_on_gpu(args: Any, kwargs: Any) -> bool:
    """Whether torch is loaded and the first tensor argument is on a GPU
    (asked only while measuring, never on the hit path)."""
    if "torch" not in sys.modules:
        return False
    from ranktune import torch as _rt_torch

    return _rt_torch.on_gpu(args, kwargs)


def _dims(k: Any) -> Tuple[int, ...]:
    if isinstance(k, int):
        return (k,)
    return tuple(int(x) for x in k)


# The stack level of the warnings the Rust core gives when _slow asks it:
# _slow -> the entry -> the tuned function's caller (one more per frame
# between _slow and the core).
_AT_CALLER = 3


class Tuned:
    """The state of one tuned op (``autotune(...).tuner``): its candidates,
    choices per bucket, and what it measured."""

    def __init__(
        self,
        op: str,
        candidates: Dict[str, Any],
        key: Callable[..., Any],
        buckets: Any = "pow2",
        cache: Any = None,
        strategy: Optional[str] = None,
        warmup: Optional[int] = None,
        samples: Optional[int] = None,
        timer: Optional[Callable[[Callable[[], Any]], float]] = None,
        sync: Optional[Callable[[], Any]] = None,
        tolerance: float = _ranktune.DEFAULT_TIE_TOLERANCE,
        group: Any = None,
        retry_failed: Optional[bool] = None,
        validate: Any = None,
        isolate: Any = None,
        candidate_timeout: Any = None,
        candidate_memory: Any = None,
    ) -> None:
        if not op:
            raise ValueError("op must be a non-empty name, e.g. \"gemm\"")
        if not candidates:
            raise ValueError("candidates must name at least one callable")
        self.op = op
        # (runner name, runner index, tactic, callable) in canonical order.
        self._cands: List[Tuple[str, int, Any, Callable[..., Any]]] = []
        # Per candidate: its runner's own callable and the tactic's index.
        raw: List[Tuple[Callable[..., Any], int]] = []
        for idx, (name, spec) in enumerate(candidates.items()):
            if callable(spec):
                self._cands.append((name, idx, None, spec))
                raw.append((spec, 0))
            elif isinstance(spec, tuple) and len(spec) == 2 and callable(spec[0]):
                fn, tactics = spec
                if not list(tactics):
                    raise ValueError(f"candidate {name!r} has an empty tactic list")
                for ti, t in enumerate(tactics):
                    self._cands.append((name, idx, t, functools.partial(fn, tactic=t)))
                    raw.append((fn, ti))
            else:
                raise ValueError(
                    f"candidate {name!r}: give a callable or (callable, [tactics]); the callable "
                    "is called with tactic=<value> for each tactic"
                )
        if not (validate is None or validate is True or validate is False or callable(validate)):
            raise ValueError(
                "validate= takes None/False (no check), True (the cached choice must run "
                "without raising) or a callable validate(out, reference) that returns False "
                "or raises when the cached choice's result is wrong"
            )
        self._validate = validate or None
        self._key = key
        self._bucket = _bucketer(buckets)
        self._cache = _resolve_cache(cache)
        self._legacy_checksum = _legacy_checksum(self._cands)
        # The op's decisions, by the Rust tuner's rules (None strategy and
        # retry_failed read $RANKTUNE_STRATEGY and $RANKTUNE_RETRY_FAILED;
        # a bad value raises ValueError naming it).
        self._core = _ranktune.TunedOp(
            op,
            [(n, i, ti, _to_stored(t)) for (n, i, t, _), (_, ti) in zip(self._cands, raw)],
            self._cache,
            strategy,
            tolerance,
            retry_failed,
            self._validate is not None,
            self._legacy_checksum,
        )
        self.strategy = self._core.strategy
        self._checksum = self._core.checksum
        self._warmup = warmup
        self._samples = samples
        self._timer = timer
        self._sync = sync
        # Isolated measuring (None reads $RANKTUNE_ISOLATE and the limits'
        # variables; a bad value raises ValueError naming it).
        self._isolation, self._limits = _ranktune.isolation_settings(isolate, candidate_timeout, candidate_memory)
        # What a spawned worker imports: checked here when isolate="spawn"
        # was asked for this op; with RANKTUNE_ISOLATE=spawn (a whole
        # job's setting) at its first isolated measure, so an op whose
        # candidates a worker cannot import still runs from the cache.
        self._raw = raw
        self._spawn_refs: Optional[List[Dict[str, Any]]] = None
        self._spawn_timing: Dict[str, Any] = {}
        if self._isolation == "spawn" and isolate is not None:
            self._spawn_refs = self._spawn_references(raw)
        self._pool = _ranktune.WorkerPool(self._limits) if self._limits is not None else None
        self._pool_lock = threading.Lock()
        self._group = group
        if self._core.collective and self._cache is None and not _process_group_in_use(group):
            raise ValueError(
                f"strategy={self.strategy!r} needs a cache or a torch.distributed process group: the "
                "ranks connect through the cache's directory or server, or the group's store "
                "(give cache=, set RANKTUNE_CACHE, or initialise torch.distributed)"
            )
        # Raw key value -> the callable to run: a choice, or the fallback of
        # a bucket without one (outside tuning); cleared when tuning starts,
        # so a bucket without a choice is then measured.
        self._hot: Dict[Any, Callable[..., Any]] = {}
        _all.add(self)

    # What the Rust core knows, for logs and tests.
    measured = property(lambda self: self._core.measured, doc="Buckets measured by this op.")
    fallbacks = property(lambda self: self._core.fallbacks, doc="Why collective buckets were tuned alone.")
    skipped = property(lambda self: self._core.skipped, doc="Known-bad candidates not run: (runner, tactic, reason).")
    failures = property(
        lambda self: self._core.failures,
        doc="Hard failures of isolated measuring: (bucket, runner, tactic, kind, reason).",
    )

    @property
    def _choices(self) -> Dict[Tuple[int, ...], Callable[..., Any]]:
        """The choices made or loaded so far: bucket -> callable."""
        return {b: self._cands[p][3] for b, p in self._core.choices().items()}

    def _spawn_references(self, raw: List[Tuple[Callable[..., Any], int]]) -> List[Dict[str, Any]]:
        """What a spawned worker imports for each candidate (module and
        qualified name of its callable, its tactic's description) and for
        ``timer=``/``sync=``; ``ValueError`` naming the one it cannot."""
        refs: List[Dict[str, Any]] = []
        for (name, _, tactic, _), (fn, _) in zip(self._cands, raw):
            ref: Dict[str, Any] = dict(_rebuild.check_importable(fn, f"candidate {name!r}"))
            if tactic is not None:
                ref["tactic"] = _rebuild.describe(tactic, f"candidate {name!r}'s tactic {tactic!r}")
            refs.append(ref)
        for what, fn in (("timer", self._timer), ("sync", self._sync)):
            if fn is not None:
                self._spawn_timing[what] = _rebuild.check_importable(fn, f"{what}=")
        return refs

    @property
    def worker_starts(self) -> int:
        """Isolated workers started by this op (0 without isolation)."""
        return self._pool.starts if self._pool is not None else 0

    @property
    def worker_start_seconds(self) -> float:
        """Seconds those starts took, until each worker was ready."""
        return self._pool.start_seconds if self._pool is not None else 0.0

    # -- hot path ---------------------------------------------------------
    def _make_entry(self) -> Callable[..., Any]:
        """The function users call. A hit is one call of ``key``, one look-up
        of its raw value in ``_hot`` (filled on the first hit of each raw
        key) and the call; everything else goes through ``_slow``. Where
        ``key`` and the candidates take a fixed list of positional
        parameters, the entry is generated with exactly those (no argument
        tuple or dict per call); otherwise it takes ``*args, **kwargs``."""
        key = self._key
        hot = self._hot
        slow = self._slow
        names = _fixed_positional(key, [c[3] for c in self._cands])
        if names is not None:
            tuned = _fixed_entry(names, key, hot, slow)
        else:
            tuned = _any_entry(key, hot, slow)
        tuned.tuner = self  # type: ignore[attr-defined]
        tuned.__name__ = self.op
        tuned.__qualname__ = self.op
        tuned.__doc__ = f"The tuned op {self.op!r} (ranktune.autotune)."
        return tuned

    # -- misses: the Rust core says what to do ------------------------------
    def _slow(self, k: Any, args: Any, kwargs: Any) -> Any:
        b = self._bucket(_dims(k))
        action, pos = self._core.dispatch(b, is_tuning(), _AT_CALLER)
        if action == "check":
            return self._first_use(b, pos, args, kwargs)
        if action == "tune":
            pos = self._core.tune(b, lambda run: self._run(b, run, args, kwargs), _AT_CALLER)
        elif action == "together":
            pos = self._together(b, args, kwargs)
        elif action in ("hit", "fallback"):
            if len(self._hot) >= _HOT_MAX:
                self._hot.clear()
            try:
                self._hot[k] = self._cands[pos][3]
            except TypeError:  # an unhashable key: works, just not memoized
                pass
        return self._cands[pos][3](*args, **kwargs)

    def _first_use(self, b: Tuple[int, ...], pos: int, args: Any, kwargs: Any) -> Any:
        """The first use of bucket ``b``'s cached choice in this process: run
        it and check it (``validate``); the core decides what a failure
        means (the fallback here, a blocklist record, a warning)."""
        fn = self._cands[pos][3]
        why = None
        out = None
        try:
            out = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 -- any failure fails the check
            why = f"it raised {type(e).__name__}: {e}"
        if why is None and callable(self._validate) and pos != 0:
            reference = self._cands[0][3](*args, **kwargs)
            try:
                if self._validate(out, reference) is False:
                    why = "validate(out, reference) returned False"
            except Exception as e:  # noqa: BLE001
                why = f"validate(out, reference) raised {type(e).__name__}: {e}"
        self._core.checked(b, why, _AT_CALLER + 1)
        return out if why is None else self._cands[0][3](*args, **kwargs)

    def _together(self, b: Tuple[int, ...], args: Any, kwargs: Any) -> int:
        """Resolves bucket ``b`` with the other ranks (``strategy``): they
        agree whether it is a hit, split or repeat the measuring, and end
        with one choice, stored once in the ``shared`` section."""
        core = self._core
        res = _coordinator(self._cache, self._group).resolve(
            core.strategy, self.op, [list(b)], core.checksum, len(self._cands), core.position(b),
            lambda ps: core.measure(b, ps, lambda run: self._run(b, run, args, kwargs), _AT_CALLER + 2),
            core.tolerance,
        )  # fmt: skip
        return core.resolved(b, res, _AT_CALLER + 1)

    # -- measuring ----------------------------------------------------------
    def _run_once(self, i: int, args: Any, kwargs: Any) -> Any:
        fn = self._cands[i][3]
        if self._timer is not None:
            return self._timer(lambda: fn(*args, **kwargs))
        if self._sync is None and _torch_on_gpu(args, kwargs):
            # Tensors on a GPU: time on the device (CUDA events), not the
            # host's launch time.
            from ranktune import torch as _rt_torch

            return _rt_torch.timer(lambda: fn(*args, **kwargs))
        if self._sync is not None:
            self._sync()
            fn(*args, **kwargs)
            self._sync()
            return None
        fn(*args, **kwargs)
        return None

    def _timed_by_callable(self, args: Any, kwargs: Any) -> bool:
        return self._timer is not None or (self._sync is None and _torch_on_gpu(args, kwargs))

    def _run(
        self, b: Tuple[int, ...], run: List[int], args: Any, kwargs: Any
    ) -> Tuple[List[Dict[str, Any]], List[Tuple[int, str, str]]]:
        """Measures the candidates at positions ``run`` on this call's
        arguments, in this process or in a worker (``isolate=``): their
        stats, and the hard failures ``(i, kind, reason)`` among them."""
        if self._pool is not None:
            return self._run_isolated(b, run, args, kwargs)
        got = _ranktune.tune_measure(
            len(run),
            lambda j: self._run_once(run[j], args, kwargs),
            self._timed_by_callable(args, kwargs),
            self._warmup,
            self._samples,
        )
        return list(got), []

    def _run_isolated(
        self, b: Tuple[int, ...], run: List[int], args: Any, kwargs: Any
    ) -> Tuple[List[Dict[str, Any]], List[Tuple[int, str, str]]]:
        """Measures candidates ``run`` in a worker process (``isolate=``),
        with the in-process statistic. A crash, a time-out or an exhausted
        memory fails that candidate with its reason (a hard failure, which
        the core puts on the blocklist); the rest are measured by a fresh
        worker."""
        assert self._pool is not None
        hello = None
        if self._isolation == "spawn":
            # Described here, so an argument a worker cannot rebuild is
            # the caller's ValueError, not every candidate's failure.
            if self._spawn_refs is None:
                try:
                    self._spawn_refs = self._spawn_references(self._raw)
                except ValueError as e:
                    raise ValueError(f"{self.op}, measured under {_ranktune.ISOLATE_ENV}=spawn: {e}") from None
            spec = {
                "candidates": [self._spawn_refs[p] for p in run],
                "call": _rebuild.describe_call(tuple(args), dict(kwargs)),
                **self._spawn_timing,
                "sys_path": [x for x in sys.path if isinstance(x, str)],
            }
            # The protocol's message, checked to fit its line (the Rust rule).
            hello = self._core.spawn_init(b, run, {"python": spec})
        timed = self._timed_by_callable(args, kwargs)
        memory = self._limits.memory

        def start() -> Tuple[Any, Optional[Dict[str, Any]]]:
            # A new worker for the Rust pool, and the message it must
            # answer ready to (a forked one answers unasked).
            if self._isolation == "fork":
                # Its copy of the arguments and the timer.
                return _isolate.fork_worker(lambda j: self._run_once(run[j], args, kwargs), timed, memory), None
            return _isolate.spawn_worker(memory), hello

        with self._pool_lock:
            got, hard = self._pool.measure(
                run, start, hello, self._isolation == "fork", self._warmup, self._samples
            )
        if self._pool.worker_pid is not None:
            _open_pools.add(self)
        return list(got), hard

    def _close_workers(self) -> None:
        """Ends a kept worker (the end of tuning)."""
        if self._pool is not None:
            with self._pool_lock:
                self._pool.end(True)


# Every tuned op: their hot paths are cleared when tuning starts, so every
# call goes through the core (a fallback is measured, a collective strategy's
# hit agreed on).
_all: "weakref.WeakSet[Tuned]" = weakref.WeakSet()

def _process_group_in_use(group: Any) -> bool:
    """Whether the strategy meets through torch.distributed: ``group=`` was
    given, or the program initialised ``torch.distributed`` and
    ``RANKTUNE_COLLECTIVE`` names no other place."""
    if group is not None:
        return True
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return False
    # The Rust rule reads RANKTUNE_COLLECTIVE (a bad value is a ValueError).
    return _ranktune.collective_choice() == "auto"


def _coordinator(cache: Any, group: Any = None) -> Any:
    """The coordinator this op's strategy meets through: the job's process
    group when ``torch.distributed`` is initialised or ``group=`` was given
    (its c10d store; ``ranktune.torch``), else the cache's meeting place,
    chosen by the Rust rule ``ranktune tune`` uses (the cache file's
    directory, the cache's Redis server, ``RANKTUNE_COLLECTIVE``, MPI)."""
    if _process_group_in_use(group):
        from ranktune import torch as _rt_torch

        c = _rt_torch._coordinator_for(group)
        if c is not None:
            return c
    # One per process and meeting place (the Rust rule).
    return _ranktune.Coordinator.for_cache(cache)


def _to_stored(t: Any) -> Any:
    import enum

    if isinstance(t, enum.Enum):
        t = t.value
    if isinstance(t, tuple):
        return [_to_stored(x) for x in t]
    return t


def _resolve_cache(cache: Any) -> Any:
    from ranktune import Cache

    if cache is None:
        # RANKTUNE_CACHE, else TLLM_AUTOTUNER_CACHE_PATH: the Rust rule.
        return Cache.from_env()
    if isinstance(cache, Cache):
        return cache
    return Cache(cache)


def autotune(
    op: str,
    candidates: Dict[str, Any],
    key: Callable[..., Any],
    buckets: Any = "pow2",
    cache: Any = None,
    strategy: Optional[str] = None,
    warmup: Optional[int] = None,
    timer: Optional[Callable[[Callable[[], Any]], float]] = None,
    sync: Optional[Callable[[], Any]] = None,
    samples: Optional[int] = None,
    tolerance: float = _ranktune.DEFAULT_TIE_TOLERANCE,
    group: Any = None,
    retry_failed: Optional[bool] = None,
    validate: Any = None,
    isolate: Any = None,
    candidate_timeout: Any = None,
    candidate_memory: Any = None,
) -> Callable[..., Any]:
    """A function that runs the best of ``candidates`` for its arguments
    (its ``tuner`` attribute is the :class:`Tuned` state).

    - ``candidates``: name -> callable, or name -> ``(callable, [tactics])``
      (the callable is called with ``tactic=<value>``); the first is the
      fallback.
    - ``key(*args, **kwargs)``: the dynamic dimensions (an int or a tuple of
      ints), bucketed by ``buckets`` (``"pow2"``: the last power of two <=
      each dim, as the Rust tuner; ``"exact"``; a sorted list; a callable).
    - ``cache``: a :class:`ranktune.Cache` or path (default
      ``$RANKTUNE_CACHE``, then ``$TLLM_AUTOTUNER_CACHE_PATH``; none: choices
      live only in this process). Entries go into this rank's section.
    - ``warmup``/``samples``: untimed runs and a fixed number of timed ones
      (default: the Rust tuner's adaptive sampling).
    - ``timer``: a callable ``timer(run) -> seconds`` that times one call of
      ``run()`` (e.g. with CUDA events); ``sync``: called before and after
      each wall-clock-timed run (e.g. ``torch.cuda.synchronize``).
    - ``strategy``: ``"independent"`` (each rank tunes its own buckets,
      entries in its section), or ``"broadcast"`` (rank 0 measures),
      ``"merge"`` (every rank measures, the slowest rank's time counts),
      ``"parallel"`` (the candidates are split over the ranks): inside
      ``tuning()`` every rank then resolves each bucket together with the
      others -- every rank must call the op with the same buckets in the
      same order, as SPMD jobs do -- and all end with one choice, stored
      once in the ``shared`` section. The ranks connect through the job's
      ``torch.distributed`` process group when it is initialised (or
      ``group=``: its c10d store), else where ``ranktune tune`` connects them
      for this cache (its directory, its Redis server, or MPI); every wait is bounded
      by ``$RANKTUNE_STRATEGY_TIMEOUT`` (default 300 s), and a rank that
      does not arrive makes the others tune that bucket alone (with a
      warning) instead of hanging. ``None``: ``$RANKTUNE_STRATEGY``, else
      ``"independent"``.
    - ``group``: a ``torch.distributed`` process group whose ranks tune
      together (default: the default group, when ``torch.distributed`` is
      initialised); they meet through its c10d store (``ranktune.torch``).
    - ``retry_failed``: run the known-bad candidates (the cache's blocklist:
      crashed, timed out, ran out of memory or failed validation in this
      environment) when measuring, instead of counting them as failed; one
      that works leaves the blocklist. ``None``: ``$RANKTUNE_RETRY_FAILED``.
    - ``validate``: check the first use of each cached choice in this
      process. ``True``: it must run without raising; a callable
      ``validate(out, reference)`` also gets the first candidate's result on
      the same arguments and returns ``False`` (or raises) when ``out`` is
      wrong (e.g. ``lambda o, r: torch.allclose(o, r, rtol=1e-3)``). A choice
      that fails is replaced by the first candidate for this process (one
      ``RuntimeWarning``), marked bad in the cache's blocklist, and tuned
      again by the next tuning run. Later calls cost what a hit always does.
    - ``isolate``: measure in a worker process, so that a candidate that
      crashes it (segfault, abort), runs past ``candidate_timeout`` seconds
      (default ``max(5 s, 50 x the fallback's time)``) or past
      ``candidate_memory`` MiB (default: half the available memory over
      the local ranks) fails alone, with its reason, and goes on the
      cache's blocklist: ``"fork"`` (or ``True``: a forked worker per
      bucket), ``"spawn"`` (a fresh ``python -m ranktune._worker`` that
      imports the candidates by module and name and rebuilds the
      arguments from their shapes and dtypes -- where a fork cannot serve,
      e.g. with CUDA; see docs/isolation.md for what it supports), or
      ``"off"``/``False``. ``None``: ``$RANKTUNE_ISOLATE``,
      ``$RANKTUNE_CANDIDATE_TIMEOUT``, ``$RANKTUNE_CANDIDATE_MEMORY``.
    """
    return Tuned(
        op, candidates, key, buckets, cache, strategy, warmup, samples, timer, sync, tolerance, group,
        retry_failed, validate, isolate, candidate_timeout, candidate_memory,
    )._make_entry()  # fmt: skip


_open_pools: "weakref.WeakSet[Tuned]" = weakref.WeakSet()


def _close_workers() -> None:
    for t in list(_open_pools):
        t._close_workers()
    _open_pools.clear()
    _ranktune.reap_ended(True)


@contextlib.contextmanager
def tuning(save_every: Any = None) -> Iterator[TuningSession]:
    """Tuning mode: misses are measured, and the choices saved -- as
    ``save_every`` says (``None``: ``$RANKTUNE_SAVE_EVERY``, else
    ``"auto"``): ``"auto"`` saves new choices once the time since the last
    save is at least 20 times what that save cost (the first at once; at
    most a minute later), a number of seconds at most that often, ``"end"``
    only on exit; a failed save is tried again no sooner than 20 times what
    it cost (at least 1 s). The policy and its words are the Rust tuner's
    (``ranktune tune --save-every``); a bad value raises ``ValueError``
    naming ``save_every`` or the variable. Every policy saves what is left
    when the block exits -- normally, by an exception, or on SIGTERM.
    Gives a :class:`TuningSession` (what was saved). Nested blocks share
    the outermost one's policy."""
    global _tuning_depth
    main = threading.current_thread() is threading.main_thread()
    with _lock:
        # Parsed before anything changes (in a nested block too), so a bad
        # value leaves no trace.
        sess = _ranktune.session_begin(save_every) if _tuning_depth == 0 else _sessions[-1]
        _tuning_depth += 1
        outermost = _tuning_depth == 1
        if outermost:
            _sessions.append(sess)
            for t in list(_all):
                t._hot.clear()
    prev = None
    if outermost and main:
        prev = signal.getsignal(signal.SIGTERM)

        def on_term(signum: int, frame: Any) -> None:
            try:
                _ranktune.session_sigterm_save()
            finally:
                _signals.pass_on(prev, signum, frame)

        signal.signal(signal.SIGTERM, on_term)
    try:
        yield sess
    finally:
        with _lock:
            _tuning_depth -= 1
            last = _tuning_depth == 0
            if last:
                _sessions.pop()
        if outermost and main:
            signal.signal(signal.SIGTERM, prev if prev is not None else signal.SIG_DFL)
        if last:
            try:
                _close_workers()
            finally:
                _ranktune.session_end(sess)


# The outermost tuning() block's session (nested blocks share it).
_sessions: List[TuningSession] = []
