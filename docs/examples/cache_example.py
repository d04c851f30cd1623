"""Writes docs/cache.md's example cache, `tune.json`, in the current directory.

Two ranks that disagree on one GEMM bucket, a shared RMSNorm entry and a
softmax entry measured on another machine (environment 0123456789abcdef).
The other entries are recorded under this machine's environment, read from a
one-bucket `ranktune tune` run, so the page's output is the same on every
machine. The doc-example test runs this before the page's commands.
"""

import json
import os
import subprocess

probe = "env-probe.json"
subprocess.run(
    ["ranktune", "tune", "--quick", "--ops", "softmax", "--max-tokens", "1", "--cache", probe],
    check=True,
    capture_output=True,
)
with open(probe) as f:
    meta = json.load(f)["metadata"]
for path in (probe, probe + ".lock"):
    if os.path.exists(path):
        os.remove(path)
(env, identity), = meta["environments"].items()


def entry(op, runner, fingerprint, bucket, tactic, time_us, checksum, env=env):
    return {
        "op": op, "runner": runner, "fingerprint": fingerprint, "bucket": bucket,
        "runner_index": 0, "tactic": tactic, "time_us": time_us, "checksum": checksum,
        "env": env, "created_unix": 1764400000, "candidates": [],
    }


doc = {
    "format": "ranktune-cache",
    "version": "1.0",
    "metadata": {
        "lib_version": identity["lib_version"], "host": "node7",
        "created_unix": 1764480000, "updated_unix": 1764480000,
        "environments": {env: identity},
    },
    "shared": [entry("rmsnorm", "fused", "eps=1e-6", [[8, 4096]], "block(256)", 3.1, "c2")],
    "rank_0": [
        entry("gemm", "blocked", "f32", [[64, 64], [64, 64]], {"order": "ikj", "tile": [64, 64]}, 21.4, "c1"),
        entry("gemm", "blocked", "f32", [[128, 64], [64, 64]], {"order": "ikj", "tile": [32, 64]}, 40.2, "c1"),
    ],
    "rank_1": [
        entry("gemm", "blocked", "f32", [[64, 64], [64, 64]], {"order": "ikj", "tile": [64, 64]}, 21.9, "c1"),
        entry("gemm", "blocked", "f32", [[128, 64], [64, 64]], {"order": "kij", "tile": [64, 64]}, 40.0, "c1"),
    ],
    "rank_2": [entry("softmax", "online", "f32", [[8, 4096]], 2, 5.5, "c3", env="0123456789abcdef")],
}
with open("tune.json", "w") as f:
    json.dump(doc, f, indent=2)
