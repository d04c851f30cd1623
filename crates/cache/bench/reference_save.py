#!/usr/bin/env python3
"""The reference's save scheme, as a baseline for benches/cache_scale.rs.

Written from the description of TensorRT-LLM's autotuner cache saver: lock a
sidecar `<file>.lock` (fcntl.flock), re-read the whole JSON document, merge
this rank's section into it, json.dump everything to a temp file in the same
directory, fsync, rename over. Every save rewrites the whole file.

Protocol (shared with the Rust bench): build the entries, print "ready",
wait for one byte on stdin, save once, exit.

usage: reference_save.py CACHE RANK N
"""

import fcntl
import json
import os
import sys
import tempfile
import time


def entries(rank, n):
    out = {}
    for i in range(n):
        m = 1 << (i % 14)
        key = (
            "trtllm::fp8_gemm",
            "CutlassFp8GemmRunner",
            str((rank, i, "RESIDUAL_RMS_NORM", 1e-06, True)),
            ((m, 4096), (4096, 4096), (4096,)),
        )
        out[str(key)] = {
            "runner_id": i % 3,
            "tactic": str(((128, 256), (1, 2), i % 7)),
            "min_time": 0.0123 + i * 1e-6,
        }
    return out


def save(path, rank, section):
    lock = open(path + ".lock", "a+")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        try:
            with open(path) as f:
                data = json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            data = {}
        data["metadata"] = {
            "lib_version": "reference",
            "creation_timestamp": time.time(),
            "device_name": "cpu",
            "device_capability": [0, 0],
        }
        data.setdefault("rank_%d" % rank, {}).update(section)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".ref-", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def main():
    path, rank, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    section = entries(rank, n)
    print("ready", flush=True)
    sys.stdin.buffer.read(1)
    save(path, rank, section)


if __name__ == "__main__":
    main()
