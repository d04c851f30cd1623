"""A stand-in for the persistence of TensorRT-LLM's ``AutoTunerProfilingCache``
(``tensorrt_llm/_torch/autotuner.py``), written by us from how that code
behaves (see docs/trtllm.md and test_trtllm_standin.py, which pins each
behaviour); none of its code is copied here. TensorRT-LLM's package cannot be
installed on machines without its download host, so the tests use this.

What it does, as the original does:

- keys are ``(custom_op, runner class name, str(unique_id), opt_shapes)``,
  on disk ``str(key)``; values ``{"runner_id", "tactic": repr(tactic),
  "min_time"}`` (an enum tactic as the repr of its value);
- ``save_cache(file_path, rank)``: drops the ops in ``excluded_op``, creates
  missing directories, takes an exclusive ``fcntl.lockf`` on the separate
  file ``<file_path>.lock`` (created 0644, never deleted), reads the file (a
  missing or invalid one starts over with only ``metadata``), ``update``s
  ``shared`` and ``rank_<rank>``, keeps unknown members and the first
  writer's ``metadata``, writes ``json.dump(indent=2, default=str)`` to a
  temp file in the same directory, fsyncs and renames it over the file;
- ``load_cache(file_path, rank)``: ``FileNotFoundError`` for a missing file;
  under the same lock reads the whole file; restores the metadata
  attributes (a file without ``metadata["creation_timestamp"]`` raises
  ``KeyError``); rebuilds ``cache`` and ``independent_op`` from ``shared``
  and ``rank_<rank>``; an entry whose key or tactic is not a literal is
  skipped with a warning.
"""

import ast
import contextlib
import enum
import fcntl
import json
import logging
import os
import tempfile
import time
from pathlib import Path

logger = logging.getLogger("tensorrt_llm.standin")

LIB_VERSION = "1.2.0rc0.standin"


@contextlib.contextmanager
def lock_file_for_cache(file_path):
    """Exclusive POSIX record lock on ``<file_path>.lock``."""
    fd = os.open(str(file_path) + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        os.close(fd)


class AutoTunerProfilingCache:
    def __init__(self):
        self.cache = {}
        self.independent_op = set()
        self.excluded_op = set()
        self.lib_version = LIB_VERSION
        self.creation_timestamp = time.time()
        # Stand-ins for torch.cuda.get_device_name()/get_device_capability().
        self.device_name = "NVIDIA H100 80GB HBM3"
        self.device_capability = (9, 0)

    def add_excluded_op(self, op):
        self.excluded_op.add(op)

    # -------------------------------------------------------------- save
    def save_cache(self, file_path, rank):
        file_path = Path(file_path)
        file_path.parent.mkdir(parents=True, exist_ok=True)
        shared, mine = self._serialize_cache_data()
        with lock_file_for_cache(file_path):
            current = None
            if file_path.exists():
                try:
                    with open(file_path) as f:
                        current = json.load(f)
                except (ValueError, OSError):
                    current = None
            if not isinstance(current, dict):
                current = {"metadata": self._serialize_metadata()}
            current.setdefault("metadata", self._serialize_metadata())
            current.setdefault("shared", {}).update(shared)
            current.setdefault(f"rank_{rank}", {}).update(mine)
            fd, tmp = tempfile.mkstemp(dir=file_path.parent, prefix=file_path.name + ".", suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(current, f, indent=2, default=str)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, file_path)

    def _serialize_metadata(self):
        return {
            "lib_version": self.lib_version,
            "creation_timestamp": self.creation_timestamp,
            "device_name": self.device_name,
            "device_capability": self.device_capability,
        }

    def _serialize_cache_data(self):
        shared, mine = {}, {}
        for key, (runner_id, tactic, min_time) in self.cache.items():
            if key[0] in self.excluded_op:
                continue
            if isinstance(tactic, enum.Enum):
                tactic = tactic.value
            tactic_str = repr(tactic)
            try:
                assert tactic == ast.literal_eval(tactic_str)
            except Exception as e:
                logger.warning(f"Could not serialize tactic: {tactic_str} for cache key {key} due to {e}. Deserialization may fail.")
            item = {"runner_id": runner_id, "tactic": tactic_str, "min_time": min_time}
            (shared if key[0] in self.independent_op else mine)[str(key)] = item
        return shared, mine

    # -------------------------------------------------------------- load
    def load_cache(self, file_path, rank):
        file_path = Path(file_path)
        if not file_path.exists():
            raise FileNotFoundError(f"Cache file not found: {file_path}")
        with lock_file_for_cache(file_path):
            with open(file_path) as f:
                contents = json.load(f)
        self._deserialize_metadata(contents["metadata"])
        self.cache = {}
        self.independent_op = set()
        for key, value in self._deserialize_cache_data(contents.get("shared", {})).items():
            self.cache[key] = value
            self.independent_op.add(key[0])
        self.cache.update(self._deserialize_cache_data(contents.get(f"rank_{rank}", {})))

    def _deserialize_metadata(self, metadata):
        self.lib_version = metadata["lib_version"]
        self.creation_timestamp = metadata["creation_timestamp"]
        self.device_name = metadata["device_name"]
        self.device_capability = metadata["device_capability"]

    def _deserialize_cache_data(self, data):
        cache = {}
        for key_str, value in data.items():
            try:
                key = ast.literal_eval(key_str)
                tactic = ast.literal_eval(value["tactic"])
            except (ValueError, SyntaxError):
                logger.warning(f"Could not deserialize cache entry: {key_str}")
                continue
            cache[key] = (value["runner_id"], tactic, value["min_time"])
        return cache
