"""Why a worker was lost, worded as the Rust worker words it
(``crates/tune/src/isolation/worker.rs``): ``crashed: SIGSEGV (signal
11)``, ``timed out after 1.0 s (limit 1.0 s)``, ``ran out of memory: limit
128 MiB (MemoryError)``, ``the worker exited with status 3``.

Owns the words and the :class:`Lost` exception; never touches a process.
"""

from __future__ import annotations

import signal
from typing import Optional

__all__ = ["HARD", "Lost", "signal_name", "mib", "memory_line", "last_line"]

# The failure kinds that cost the worker (and go on the blocklist).
HARD = ("crash", "timeout", "memory")

_SIGNALS = {
    signal.SIGHUP: "SIGHUP", signal.SIGINT: "SIGINT", signal.SIGQUIT: "SIGQUIT",
    signal.SIGILL: "SIGILL", signal.SIGTRAP: "SIGTRAP", signal.SIGABRT: "SIGABRT",
    signal.SIGBUS: "SIGBUS", signal.SIGFPE: "SIGFPE", signal.SIGKILL: "SIGKILL",
    signal.SIGSEGV: "SIGSEGV", signal.SIGPIPE: "SIGPIPE", signal.SIGALRM: "SIGALRM",
    signal.SIGTERM: "SIGTERM", signal.SIGXCPU: "SIGXCPU", signal.SIGXFSZ: "SIGXFSZ",
    signal.SIGSYS: "SIGSYS",
}  # fmt: skip


def signal_name(sig: int) -> str:
    return _SIGNALS.get(sig, f"signal {sig}")  # type: ignore[call-overload]


def mib(n: int) -> str:
    """Bytes as MiB for messages: ``512 MiB``, ``1.5 MiB``."""
    m = n / (1 << 20)
    return f"{m:.0f} MiB" if m == int(m) or m >= 100 else f"{m:.1f} MiB"


def last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:300]
    return ""


_MEMORY_WORDS = ("bad_alloc", "memoryerror", "out of memory", "can't allocate memory", "cannot allocate memory")


def memory_line(text: str) -> Optional[str]:
    """The line of ``text`` that says an allocation failed: Rust's first
    ``memory allocation of N bytes failed`` (a native candidate's; with
    ``RUST_BACKTRACE`` set the backtrace of that failure can fail to allocate
    too, and that second line is not the cause), else the last line naming
    another language's allocation error (their reports end with it)."""
    for line in text.splitlines():
        if line.strip().startswith("memory allocation of"):
            return line.strip()[:300]
    for line in reversed(text.splitlines()):
        low = line.strip().lower()
        if any(w in low for w in _MEMORY_WORDS):
            return line.strip()[:300]
    return None


class Lost(Exception):
    """The worker is gone (reaped), and why: ``kind`` is ``crash``,
    ``timeout``, ``memory`` (or ``error`` when it broke the protocol)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

