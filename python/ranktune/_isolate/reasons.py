"""Why a worker was lost, in the Rust worker's words: ``crashed: SIGSEGV
(signal 11)``, ``timed out after 1.0 s (limit 1.0 s)``, ``ran out of
memory: limit 128 MiB (MemoryError)``, ``the worker exited with status 3``.
The verdict (``handle._judge``: ``_ranktune.reason_classify``), the sizes
and the cause's line of standard error come from
``crates/tune/src/isolation/reasons.rs`` through the bindings, so both
sides judge and word a failure (and a blocklist record) alike.

Owns the words; never touches a process.
"""

from __future__ import annotations

from typing import Optional

from ranktune import _ranktune

__all__ = ["mib", "memory_line", "last_line"]


def mib(n: int) -> str:
    """Bytes as MiB for messages: ``512 MiB``, ``1.5 MiB``."""
    return _ranktune.reason_mib(n)


def last_line(text: str) -> str:
    """The last non-empty line of ``text``, at most 300 characters."""
    return _ranktune.reason_last_line(text)


def memory_line(text: str) -> Optional[str]:
    """The line of ``text`` that says an allocation failed: Rust's first
    ``memory allocation of N bytes failed`` (with ``RUST_BACKTRACE`` set the
    backtrace of that failure can fail to allocate too, and that second line
    is not the cause), else the last line naming another language's
    allocation error (their reports end with it)."""
    return _ranktune.reason_memory_line(text)
