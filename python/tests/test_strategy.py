"""strategy= across Python processes: ranks that tune together through the
cache's directory agree on one choice, split (parallel) or leave to rank 0
(broadcast) the measuring, store it once in the shared section, and fall
back to tuning alone -- within the timeout, with a warning -- when a rank
does not arrive."""

import json
import os
import subprocess

from conftest import run_py, wait_ok

# One rank: tunes `double` for two buckets with three candidates (the
# measured ones record their calls), then prints what it saw.
RANK = """
import json, sys, time, warnings, ranktune
calls = []
def cand(name, delay):
    def f(n):
        calls.append(f"{name}@{n}")
        time.sleep(delay)
        return n * 2
    return f
f = ranktune.autotune(
    "double",
    {"slow": cand("slow", 0.02), "fast": cand("fast", 0.0), "medium": cand("medium", 0.01)},
    key=lambda n: n, cache=sys.argv[1], strategy=sys.argv[2],
)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with ranktune.tuning():
        assert f(100) == 200 and f(3) == 6
print(json.dumps({"calls": sorted(set(calls)), "fallbacks": f.tuner.fallbacks,
                  "measured": f.tuner.measured, "warnings": [str(x.message) for x in w]}))
"""


def job(tmp_path, strategy, n, job_id, extra_env=None):
    cache = tmp_path / "tune.json"
    procs = []
    for r in range(n):
        env = {"RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": str(r),
               "RANKTUNE_JOB_ID": job_id, "RANKTUNE_STRATEGY_TIMEOUT": "60"}
        env.update(extra_env or {})
        procs.append(run_py(RANK, cache, strategy, env=env))
    return cache, [json.loads(o) for o in wait_ok(procs, timeout=180)]


def shared_entries(cache):
    import ranktune

    return [e for e in ranktune.Cache(cache).entries() if e["op"] == "double"]


def test_parallel_splits_the_candidates_and_every_rank_agrees(tmp_path, cli):
    cache, outs = job(tmp_path, "parallel", 3, "py-parallel")
    for o in outs:
        assert o["fallbacks"] == [] and o["warnings"] == [], o
    entries = shared_entries(cache)
    assert sorted(tuple(e["bucket"][0]) for e in entries) == [(2,), (64,)]
    assert {e["section"] for e in entries} == {"shared"}
    assert {e["runner"] for e in entries} == {"fast"}
    # Every candidate but the winner ran on exactly one rank (it measured
    # its share); the winner runs everywhere.
    for n in (100, 3):
        for name in ("slow", "medium"):
            assert sum(f"{name}@{n}" in o["calls"] for o in outs) == 1, outs
    # Every rank of a collective run stored the same, so the check passes.
    check = subprocess.run([cli, "cache", "check", str(cache)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr

    # Again: every rank agrees the buckets are hits; nobody measures.
    _, again = job(tmp_path, "parallel", 3, "py-parallel-2")
    assert [o["measured"] for o in again] == [0, 0, 0], again
    assert all(o["calls"] == ["fast@100", "fast@3"] for o in again), again


def test_broadcast_leaves_the_measuring_to_rank_zero(tmp_path):
    cache, outs = job(tmp_path, "broadcast", 2, "py-broadcast")
    assert {c.split("@")[0] for c in outs[0]["calls"]} == {"slow", "fast", "medium"}
    assert outs[1]["calls"] == ["fast@100", "fast@3"], outs
    assert {e["section"] for e in shared_entries(cache)} == {"shared"}


def test_a_rank_that_never_arrives_makes_the_other_tune_alone(tmp_path):
    cache = tmp_path / "tune.json"
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
           "RANKTUNE_JOB_ID": "py-dead", "RANKTUNE_STRATEGY_TIMEOUT": "2"}
    (out,) = wait_ok([run_py(RANK, cache, "merge", env=env)], timeout=60)
    o = json.loads(out)
    assert o["fallbacks"], o
    assert "rank(s) [1] did not arrive" in o["fallbacks"][0], o
    assert any("independently" in w for w in o["warnings"]), o
    entries = shared_entries(cache)
    assert {e["section"] for e in entries} == {"rank_0"}
    assert {e["runner"] for e in entries} == {"fast"}


def test_a_collective_strategy_without_a_cache_is_a_clear_error():
    import pytest
    import ranktune

    with pytest.raises(ValueError, match="needs a cache"):
        ranktune.autotune("x", {"a": abs}, key=lambda n: n, strategy="parallel")
    with pytest.raises(ValueError, match="one of independent, broadcast, merge, parallel"):
        ranktune.autotune("x", {"a": abs}, key=lambda n: n, cache="c.json", strategy="fastest")
