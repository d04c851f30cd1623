"""ranktune for Python: one shared, crash-safe tuning cache and per-rank
profiling traces for multi-rank jobs (PyTorch, TensorRT-LLM, vLLM, SGLang).

- :func:`rank_info` -- this process's rank from the launcher's environment;
- :class:`Cache` -- the cache file every rank saves into at once;
- :func:`autotune`, :func:`tuning` -- the fastest implementation per shape
  bucket, measured by the Rust tuner, kept in the cache;
- :mod:`ranktune.trace` -- per-rank Chrome traces, summary and merge;
- :mod:`ranktune.trtllm` -- TensorRT-LLM's autotuner cache through the store;
- :mod:`ranktune.torch` -- PyTorch jobs: per-rank ``torch.profiler`` traces,
  the profiling schedule, tensor keys, strategies over the process group
  (imported on its own: ``import ranktune.torch``; it needs torch);
- :class:`Error` and its subclasses -- everything ranktune raises.

The work is done by ranktune's Rust crates; the GIL is released around file
I/O, lock waits, merges and trace export.
"""

from ranktune._ranktune import (
    Cache,
    CorruptFile,
    Error,
    LockTimeout,
    UnsupportedFile,
    __version__,
    rank_info,
)
from ranktune import trace, trtllm
from ranktune.tune import Tuned, TuningSession, autotune, is_tuning, tuning

__all__ = [
    "Cache",
    "CorruptFile",
    "Error",
    "LockTimeout",
    "UnsupportedFile",
    "__version__",
    "rank_info",
    "Tuned",
    "TuningSession",
    "autotune",
    "is_tuning",
    "trace",
    "trtllm",
    "tuning",
]
