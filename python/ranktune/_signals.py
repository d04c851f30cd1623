"""SIGTERM handlers that do their work and then let the signal do what it
did before: the one chaining rule of ``ranktune.tuning()`` (saves the
choices) and ``ranktune.trace.start`` (writes the trace).

Owns only the passing on; it never installs a handler itself.
"""

from __future__ import annotations

import os
import signal
from typing import Any


def pass_on(previous: Any, signum: int, frame: Any) -> None:
    """After our handler's work, what ``previous`` (the SIGTERM handler
    before ours, as ``signal.getsignal`` returned it) would have done: call
    it when it is a function, nothing when the signal was ignored, and
    otherwise die by the signal, as without us (same exit status)."""
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
