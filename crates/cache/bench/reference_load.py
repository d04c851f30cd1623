#!/usr/bin/env python3
"""The reference's load, as a baseline for benches/cache_memory.rs.

Written from the description of TensorRT-LLM's autotuner `load_cache` for
one rank: take the exclusive lock on the sidecar `<file>.lock`
(fcntl.flock), `json.load` the whole file, then `ast.literal_eval` the
tactic of every entry in `shared` and in this rank's `rank_<N>`, building
the rank's in-memory cache (key -> (runner_id, tactic, min_time)).

usage:
  reference_load.py make CACHE RANKS N   write a file of RANKS rank sections
                                         of N entries each (the entries of
                                         reference_save.py) and a small
                                         shared section
  reference_load.py load CACHE RANK REPS time REPS loads of RANK; prints one
                                         JSON line: {"seconds": [...],
                                         "entries": n, "peak_rss_kib": k}
"""

import ast
import fcntl
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_save import entries  # noqa: E402


def make(path, ranks, n):
    data = {
        "metadata": {
            "lib_version": "reference",
            "creation_timestamp": time.time(),
            "device_name": "cpu",
            "device_capability": [0, 0],
        },
        "shared": entries(1 << 20, 16),
    }
    for r in range(ranks):
        data["rank_%d" % r] = entries(r, n)
    with open(path, "w") as f:
        json.dump(data, f, indent=2)


def load_cache(path, rank):
    lock = open(path + ".lock", "a+")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        with open(path) as f:
            data = json.load(f)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
    cache = {}
    for name in ("shared", "rank_%d" % rank):
        for key, value in data.get(name, {}).items():
            cache[key] = (value["runner_id"], ast.literal_eval(value["tactic"]), value["min_time"])
    return cache


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "make":
        make(path, int(sys.argv[3]), int(sys.argv[4]))
        return
    rank, reps = int(sys.argv[3]), int(sys.argv[4])
    seconds = []
    n = 0
    for _ in range(reps):
        t = time.perf_counter()
        n = len(load_cache(path, rank))
        seconds.append(time.perf_counter() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "entries": n, "peak_rss_kib": peak}))


if __name__ == "__main__":
    main()
