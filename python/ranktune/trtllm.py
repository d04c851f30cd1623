"""TensorRT-LLM's autotuner cache, saved and loaded by ranktune in
TensorRT-LLM's own file format.

Two lines in a TensorRT-LLM program (before the autotuner loads or saves)::

    import ranktune.trtllm
    from tensorrt_llm._torch.autotuner import AutoTunerProfilingCache
    ranktune.trtllm.install(AutoTunerProfilingCache)

The file stays TensorRT-LLM's own, in place: ``metadata``, ``shared`` and
``rank_<N>`` sections of ``str(key) -> {"runner_id", "tactic", "min_time"}``
as its ``json.dump(indent=2)`` writes them. Unpatched ranks (and TensorRT-LLM
after ranktune is uninstalled) read and write the same file, and every
``ranktune cache`` command reads it.

``save_cache(file_path, rank)`` does what the original does: drops the ops in
``excluded_op``, creates missing directories, takes TensorRT-LLM's lock
(a record lock on ``<file>.lock``, which its ``fcntl.lockf`` respects) and
ranktune's (``flock`` on the same file), merges ``shared`` and
``rank_<rank>`` into the file (``dict.update``), keeps the first writer's
``metadata`` and every other member, and replaces the file atomically.
``inf`` times are written as ``Infinity``; keys are ``str()`` of the key
tuple, so ``-1``, ``0`` and float dims stay as they are.

It saves through ranktune's own cache store, not beside it (docs/python.md,
"TensorRT-LLM"): every link on the path is judged as the
kernel's ``protected_symlinks`` would, whatever the sysctl; the lock file and
the spool must be the caller's; the lock waits at most
``RANKTUNE_LOCK_TIMEOUT`` (saying once that it waits, and for whom), belongs
to the open file (another thread of the process waits for it too) and is
never kept by a child forked while it is held. A save first writes its
entries to a spool file (``<file>.trtllm-spool/``, no lock), then takes the
locks and, if its spool is still there, folds every waiting spool into the
file at once; ranks saving together so share one or two rewrites instead of
one each (a save returns only after the rewrite holding its entries was
synced). A file that is not a cache is set aside as
``<file>.corrupt-<UTC time>`` with a warning instead of silently dropping
every rank's entries. ranktune's extras (the environment that saved each
section) go in the top-level member ``ranktune``, which TensorRT-LLM's saver
keeps and its loader ignores.

``load_cache(file_path, rank)`` raises ``FileNotFoundError`` for a missing
file, as the original does; rebuilds ``cache`` and ``independent_op`` from
``shared`` and ``rank_<rank>``; restores ``lib_version``,
``creation_timestamp``, ``device_name`` and ``device_capability`` from
``metadata``; skips (with a warning) an entry whose key or tactic is not a
Python literal; bumps ``generation`` when the object has one. Times come back
bit for bit.

Alternatively ``patch(instance)`` changes one object only.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

from ranktune import _ranktune
from ranktune.records import TrtllmSaveReport

__all__ = ["install", "patch", "save_cache", "load_cache", "locked"]

_METADATA = ("lib_version", "creation_timestamp", "device_name", "device_capability")


def _tactic_repr(tactic: Any) -> str:
    # TensorRT-LLM writes an enum tactic as the repr of its value.
    if isinstance(tactic, enum.Enum):
        tactic = tactic.value
    return repr(tactic)


@contextlib.contextmanager
def locked(file_path: Any) -> Iterator[None]:
    """Holds TensorRT-LLM's lock (a record lock on ``<file>.lock``, which its
    ``fcntl.lockf`` respects) and ranktune's (``flock`` on the same file)
    while the block runs: the cache store's lock, with its timeout
    (``RANKTUNE_LOCK_TIMEOUT``, then ``ranktune.LockTimeout``), its link and
    owner checks and its fork guard."""
    lock = _ranktune.trtllm_lock(os.fspath(file_path))
    try:
        yield
    finally:
        lock.release()


def _metadata(obj: Any) -> List[Tuple[str, Any]]:
    out = []
    for name in _METADATA:
        if hasattr(obj, name):
            value = getattr(obj, name)
            out.append((name, list(value) if isinstance(value, tuple) else value))
    return out


def save_cache(obj: Any, file_path: Any, rank: int) -> TrtllmSaveReport:
    """Saves ``obj.cache`` into ``file_path`` (see the module docs); returns
    ``{"written", "total", "skipped"}`` (``skipped``: entries of excluded
    ops)."""
    path = Path(file_path)
    independent = set(getattr(obj, "independent_op", ()) or ())
    excluded = set(getattr(obj, "excluded_op", ()) or ())
    shared: List[Tuple[str, int, str, float]] = []
    mine: List[Tuple[str, int, str, float]] = []
    skipped = 0
    for key, value in dict(obj.cache).items():
        if not (isinstance(key, tuple) and len(key) >= 1):
            raise ValueError(f"cache key {key!r} is not (custom_op, runner_class_name, runner_unique_id, opt_shapes)")
        if key[0] in excluded:
            skipped += 1
            continue
        runner_id, tactic, min_time = value
        item = (str(key), int(runner_id), _tactic_repr(tactic), float(min_time))
        (shared if key[0] in independent else mine).append(item)
    sections = []
    if shared:
        sections.append(("shared", shared))
    sections.append((f"rank_{int(rank)}", mine))
    saved = _ranktune.trtllm_save(os.fspath(path), sections, _metadata(obj))
    return {"written": saved["written"], "total": saved["total"], "skipped": skipped}


def _literal(text: str, what: str, key: str) -> Tuple[bool, Any]:
    try:
        return True, ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        warnings.warn(f"TensorRT-LLM cache entry {key}: {what} {text!r} is not a Python literal; skipped", RuntimeWarning, stacklevel=3)
        return False, None


def load_cache(obj: Any, file_path: Any, rank: int) -> None:
    """Fills ``obj.cache``, ``obj.independent_op`` and the metadata
    attributes from ``file_path`` (see the module docs); a missing file
    raises ``FileNotFoundError``."""
    path = Path(file_path)
    if not path.exists():
        raise FileNotFoundError(f"Cache file not found: {path}")
    doc = _ranktune.trtllm_load(os.fspath(path), int(rank))
    if doc is None:
        raise FileNotFoundError(f"Cache file not found: {path}")
    cache: Dict[Any, Tuple[Any, Any, float]] = {}
    independent = set()
    for name in ("shared", "rank"):
        for key_text, runner_id, tactic_text, min_time in doc[name]:
            ok, key = _literal(key_text, "key", key_text)
            if not ok:
                continue
            ok, tactic = _literal(tactic_text, "tactic", key_text)
            if not ok:
                continue
            cache[key] = (runner_id, tactic, min_time)
            if name == "shared" and isinstance(key, tuple) and key:
                independent.add(key[0])
    meta = doc.get("metadata")
    if isinstance(meta, dict):
        for field in _METADATA:
            if field in meta:
                setattr(obj, field, meta[field])
    if hasattr(obj, "cache") and isinstance(obj.cache, dict):
        obj.cache.clear()
        obj.cache.update(cache)
    else:
        obj.cache = cache
    if hasattr(obj, "independent_op") and isinstance(obj.independent_op, set):
        obj.independent_op.clear()
        obj.independent_op.update(independent)
    else:
        obj.independent_op = independent
    if isinstance(getattr(obj, "generation", None), int):
        obj.generation += 1


def install(cache_class: type) -> type:
    """Makes every instance's ``save_cache``/``load_cache`` go through
    ranktune (see the module docs). Returns the class."""

    def _save(self: Any, file_path: Any, rank: int) -> None:
        save_cache(self, file_path, rank)

    def _load(self: Any, file_path: Any, rank: int) -> None:
        load_cache(self, file_path, rank)

    _save.__doc__ = save_cache.__doc__
    _load.__doc__ = load_cache.__doc__
    cache_class.save_cache = _save  # type: ignore[attr-defined]
    cache_class.load_cache = _load  # type: ignore[attr-defined]
    return cache_class


def patch(instance: Any) -> Any:
    """Like :func:`install`, for one object. Returns it."""
    instance.save_cache = lambda file_path, rank: save_cache(instance, file_path, rank)
    instance.load_cache = lambda file_path, rank: load_cache(instance, file_path, rank)
    return instance
