"""TensorRT-LLM's autotuner cache through ranktune's store.

Two lines in a TensorRT-LLM program (before the autotuner loads or saves)::

    import ranktune.trtllm
    from tensorrt_llm._torch.autotuner import AutoTunerProfilingCache
    ranktune.trtllm.install(AutoTunerProfilingCache)

From then on ``save_cache(file_path, rank)`` merges this rank's entries into
the file with ranktune's locked, crash-safe save (many ranks saving at once
lose nothing; a killed writer never corrupts the file) and
``load_cache(file_path, rank)`` reads it back (a file that does not parse is
set aside as ``<file>.corrupt-<stamp>`` with a warning, instead of failing
or dropping the other ranks' entries). The file is a ranktune cache:
``ranktune cache show/check/export --format trtllm`` work on it.

What round-trips exactly: the object's ``cache`` dict, key tuple
``(custom_op, runner_class_name, str(runner_unique_id), opt_shapes)`` to
value ``(runner_id, tactic, min_time)`` (milliseconds), with tactics made of
ints, floats, strs, bools, None, tuples, lists and dicts; an ``enum.Enum``
tactic is stored as its ``.value`` (the file holds data, not classes). Ops
in the object's ``independent_op`` set go to the file's ``shared`` section,
the others to ``rank_<rank>``; loading fills ``independent_op`` back from
``shared``.

Alternatively ``patch(instance)`` changes one object only.
"""

from __future__ import annotations

import ast
import enum
import os
from typing import Any, Dict, Tuple

from ranktune import _ranktune
from ranktune.records import TrtllmSaveReport

__all__ = ["install", "patch", "save_cache", "load_cache"]


def _tactic_repr(tactic: Any) -> str:
    if isinstance(tactic, enum.Enum):
        tactic = tactic.value
    return repr(tactic)


def save_cache(obj: Any, file_path: Any, rank: int) -> TrtllmSaveReport:
    """Saves ``obj.cache`` into ``file_path`` (see the module docs); returns
    ``{"written", "total", "skipped"}``."""
    independent = set(getattr(obj, "independent_op", ()) or ())
    shared: Dict[str, Any] = {}
    mine: Dict[str, Any] = {}
    for key, value in dict(obj.cache).items():
        if not (isinstance(key, tuple) and len(key) == 4):
            raise ValueError(
                f"cache key {key!r} is not (custom_op, runner_class_name, runner_unique_id, opt_shapes)"
            )
        runner_id, tactic, min_time = value
        op, runner, unique_id, shapes = key
        text = str((op, runner, str(unique_id), tuple(tuple(int(d) for d in s) for s in shapes)))
        item = {"runner_id": int(runner_id), "tactic": _tactic_repr(tactic), "min_time": float(min_time)}
        (shared if op in independent else mine)[text] = item
    sections: Dict[str, Any] = {}
    if shared:
        sections["shared"] = shared
    if mine:
        sections[f"rank_{int(rank)}"] = mine
    return _ranktune.trtllm_save(os.fspath(file_path), sections)


def load_cache(obj: Any, file_path: Any, rank: int) -> None:
    """Fills ``obj.cache`` and ``obj.independent_op`` from ``file_path``'s
    ``shared`` and ``rank_<rank>`` sections (a missing file loads nothing)."""
    doc = _ranktune.trtllm_load(os.fspath(file_path), int(rank))
    cache: Dict[Tuple[Any, ...], Tuple[Any, Any, float]] = {}
    independent = set()
    for name in ("shared", "rank"):
        for text, v in (doc.get(name) or {}).items():
            key = ast.literal_eval(text)
            cache[key] = (v["runner_id"], ast.literal_eval(v["tactic"]), v["min_time"])
            if name == "shared":
                independent.add(key[0])
    obj.cache = cache
    if hasattr(obj, "independent_op") and isinstance(obj.independent_op, set):
        obj.independent_op.clear()
        obj.independent_op.update(independent)
    else:
        obj.independent_op = independent


def install(cache_class: type) -> type:
    """Makes every instance's ``save_cache``/``load_cache`` go through
    ranktune's store. Returns the class."""

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
