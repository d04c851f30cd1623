"""The isolation settings of ``ranktune.autotune(isolate=...)``: the mode
(``isolate=`` or ``RANKTUNE_ISOLATE``) and the limits
(``candidate_timeout=``/``RANKTUNE_CANDIDATE_TIMEOUT``,
``candidate_memory=``/``RANKTUNE_CANDIDATE_MEMORY``).

Reading them is the Rust tuner's (``_ranktune.isolation_settings``, over
``ranktune_tune::isolation::settings``, which ``ranktune tune`` reads its
flags with: one set of rules, one wording), and so are the limits'
defaults and rules (``_ranktune.IsolationLimits``) and the launchers'
local size (``_ranktune.isolation_local_ranks``). Owns only what is
Python's: the mode needs ``fork``/``posix_spawn``, and limits without a
mode are refused.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ranktune import _ranktune

__all__ = ["ISOLATE_ENV", "TIMEOUT_ENV", "MEMORY_ENV", "Settings", "settings", "local_ranks"]

ISOLATE_ENV: str = _ranktune.ISOLATE_ENV
TIMEOUT_ENV: str = _ranktune.TIMEOUT_ENV
MEMORY_ENV: str = _ranktune.MEMORY_ENV


def local_ranks() -> int:
    """How many ranks run on this machine, as the launcher says
    (torchrun, Open MPI, MPICH, Slurm), else 1 -- the CLI's rule."""
    return int(_ranktune.isolation_local_ranks())


class Settings:
    """How an op's candidates are measured: ``mode`` (``"off"``, ``"fork"``,
    ``"spawn"``) and the ``limits`` (``_ranktune.IsolationLimits``)."""

    def __init__(self, mode: str, limits: Any) -> None:
        self.mode = mode
        self.limits = limits

    @property
    def on(self) -> bool:
        return self.mode != "off"


def settings(isolate: Any, timeout: Any, memory: Any) -> Settings:
    """The settings of ``isolate=``, ``candidate_timeout=`` and
    ``candidate_memory=`` (each ``None``: its environment variable). Bad
    values raise ``ValueError`` naming the argument or the variable."""
    mode, t, m = _ranktune.isolation_settings(isolate, timeout, memory)
    if mode != "off" and not (hasattr(os, "fork") and hasattr(os, "posix_spawn")):
        raise ValueError(f"isolate={mode!r} needs a POSIX system (fork, posix_spawn); this is {sys.platform}")
    if mode == "off" and (timeout is not None or memory is not None):
        raise ValueError(
            "candidate_timeout= and candidate_memory= limit isolated workers; add isolate=\"fork\" "
            f"or \"spawn\" (or {ISOLATE_ENV}), or leave them out"
        )
    limits = _ranktune.IsolationLimits(local_ranks(), t, m) if mode != "off" else None
    return Settings(mode, limits)
