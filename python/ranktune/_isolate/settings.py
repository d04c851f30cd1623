"""The isolation settings of ``ranktune.autotune(isolate=...)``: the mode
(``isolate=`` or ``RANKTUNE_ISOLATE``) and the limits
(``candidate_timeout=``/``RANKTUNE_CANDIDATE_TIMEOUT``,
``candidate_memory=``/``RANKTUNE_CANDIDATE_MEMORY``), read with the words
of the CLI's ``ranktune tune`` (``crates/cli/src/cli/tune/isolate.rs``).

Owns only reading and checking the settings; the limits' defaults and
rules are the Rust tuner's (``_ranktune.IsolationLimits``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

from ranktune import _ranktune

__all__ = ["ISOLATE_ENV", "TIMEOUT_ENV", "MEMORY_ENV", "Settings", "settings", "local_ranks"]

ISOLATE_ENV = "RANKTUNE_ISOLATE"
TIMEOUT_ENV = "RANKTUNE_CANDIDATE_TIMEOUT"
MEMORY_ENV = "RANKTUNE_CANDIDATE_MEMORY"

_ON = ("1", "true", "yes", "on", "fork")
_OFF = ("0", "false", "no", "off")


def _quoted(text: str) -> str:
    return json.dumps(text)


def _mode(value: Any) -> str:
    """``"off"``, ``"fork"`` or ``"spawn"`` from ``isolate=`` (None: the
    environment)."""
    if value is None:
        env = os.environ.get(ISOLATE_ENV, "").strip()
        if not env:
            return "off"
        low = env.lower()
        if low in _OFF:
            return "off"
        if low in _ON:
            return "fork"
        if low == "spawn":
            return "spawn"
        raise ValueError(
            f"{ISOLATE_ENV}={_quoted(env)} is not an isolation mode; give off (or 0), fork "
            "(or 1) to measure in forked workers, or spawn to measure in fresh Python processes"
        )
    if value is True:
        return "fork"
    if value is False:
        return "off"
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("off", "fork", "spawn"):
            return low
    raise ValueError(
        f'isolate={value!r} is not an isolation mode; give "off" (or False), "fork" (or True) '
        'to measure in forked workers, or "spawn" to measure in fresh Python processes'
    )


def _seconds(value: Any, what: str) -> float:
    """A time limit in seconds, as the CLI's ``--candidate-timeout`` reads one."""
    text = value if isinstance(value, str) else repr(value)
    try:
        v = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        raise ValueError(f"{what} {_quoted(text)} is not a number of seconds; give e.g. 30 or 2.5") from None
    if not (v > 0 and v <= 7 * 24 * 3600):
        raise ValueError(
            f"{what} {_quoted(text)} is not a usable time limit; give a number of seconds above 0 "
            "(at most a week), e.g. 30"
        )
    return v


def _mib(value: Any, what: str) -> int:
    """A memory limit in MiB, as the CLI's ``--candidate-memory`` reads one."""
    text = value if isinstance(value, str) else repr(value)
    if isinstance(value, int) and not isinstance(value, bool):
        v = value
    else:
        try:
            v = int(str(value).strip(), 10) if isinstance(value, str) else int("x")
        except ValueError:
            raise ValueError(f"{what} {_quoted(text)} is not a whole number of MiB; give e.g. 4096 (4 GiB)") from None
    if not 1 <= v <= 1 << 30:
        raise ValueError(f"{what} {_quoted(text)} is out of range; give a whole number of MiB from 1 up, e.g. 4096")
    return v


def _env(name: str) -> Optional[str]:
    v = os.environ.get(name)
    return v if v is not None and v.strip() else None


def local_ranks() -> int:
    """How many ranks run on this machine, as the launcher says
    (torchrun, Open MPI, MPICH, Slurm), else 1 -- the CLI's rule."""
    for var in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"):
        try:
            n = int(os.environ.get(var, "").strip())
        except ValueError:
            continue
        if n > 0:
            return n
    return 1


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
    mode = _mode(isolate)
    if mode != "off" and not (hasattr(os, "fork") and hasattr(os, "posix_spawn")):
        raise ValueError(f"isolate={mode!r} needs a POSIX system (fork, posix_spawn); this is {sys.platform}")
    if timeout is not None:
        t: Optional[float] = _seconds(timeout, "candidate_timeout=")
    else:
        env = _env(TIMEOUT_ENV)
        t = _seconds(env, TIMEOUT_ENV) if env is not None else None
    if memory is not None:
        m: Optional[int] = _mib(memory, "candidate_memory=")
    else:
        env = _env(MEMORY_ENV)
        m = _mib(env, MEMORY_ENV) if env is not None else None
    if mode == "off" and (timeout is not None or memory is not None):
        raise ValueError(
            "candidate_timeout= and candidate_memory= limit isolated workers; add isolate=\"fork\" "
            f"or \"spawn\" (or {ISOLATE_ENV}), or leave them out"
        )
    limits = _ranktune.IsolationLimits(local_ranks(), t, m) if mode != "off" else None
    return Settings(mode, limits)

