"""Real processes: ranks patched with ranktune.trtllm and unpatched ranks
(the stand-in of TensorRT-LLM's own class) save into one file at the same
time; both loaders then find every entry, exact (types, min_time bits, -1
dims)."""

import os
import struct

import ranktune.trtllm
import trtllm_standin
from conftest import run_py, wait_ok

HERE = os.path.dirname(os.path.abspath(__file__))

ENTRIES = 200

CODE = """
    import sys
    sys.path.insert(0, sys.argv[4])
    import trtllm_standin, test_trtllm_processes as t
    cls = trtllm_standin.AutoTunerProfilingCache
    if sys.argv[3] == "patched":
        import ranktune.trtllm
        cls = ranktune.trtllm.install(cls)
    rank = int(sys.argv[2])
    o = cls()
    o.cache = t.entries(rank)
    o.independent_op = {"trtllm::allreduce"}
    o.save_cache(sys.argv[1], rank)
    """


def entries(rank):
    """Rank `rank`'s cache: -1 and 0 dims, float dims, awkward times."""
    out = {}
    for i in range(ENTRIES):
        t = struct.unpack("<d", struct.pack("<Q", 0x3F00000000000000 + rank * 1_000_003 + i * 7_919))[0]
        out[("trtllm::moe", "MoeRunner", f"({rank}, 'w4')", ((i + 1, -1), (0,), (0.5 * i,)))] = (i % 3, (i, f"t{rank}"), t)
    out[("trtllm::allreduce", "AllReduceRunner", "8", ((1, 2048),))] = (0, 1, 0.002)
    out[("trtllm::fp4_gemm", "FP4GemmRunner", str(rank), ((8, -1),))] = (0, -1, float("inf"))
    return out


def bits(cache):
    return {k: (v[0], v[1], struct.pack("<d", v[2])) for k, v in cache.items()}


def test_16_patched_and_16_unpatched_ranks_save_at_once_and_lose_nothing(tmp_path):
    p = tmp_path / "sub" / "autotuner.json"
    procs = [run_py(CODE, p, r, "patched" if r % 2 else "plain", HERE) for r in range(32)]
    wait_ok(procs, timeout=300)
    for patched in (False, True):
        cls = trtllm_standin.AutoTunerProfilingCache
        if patched:
            # A subclass: the stand-in's own class stays unpatched.
            cls = ranktune.trtllm.install(type("Patched", (cls,), {}))
        for r in range(32):
            o = cls()
            o.load_cache(str(p), r)
            assert bits(o.cache) == bits(entries(r)), f"rank {r}, patched loader: {patched}"
            assert all(type(v[1]) is tuple for k, v in o.cache.items() if k[0] == "trtllm::moe")
            assert o.independent_op == {"trtllm::allreduce"}


def test_nothing_of_the_spool_or_a_temp_file_stays_beside_the_file(tmp_path):
    """Issue 37: the drop-in's saves go through the cache's own spool, whose
    files and directory go once folded -- after 16 ranks saving at once,
    only the file and its lock file are left (as for a ranktune cache)."""
    p = tmp_path / "autotuner.json"
    procs = [run_py(CODE, p, r, "patched", HERE) for r in range(16)]
    wait_ok(procs, timeout=300)
    assert sorted(os.listdir(tmp_path)) == ["autotuner.json", "autotuner.json.lock"]
    cls = ranktune.trtllm.install(type("Patched", (trtllm_standin.AutoTunerProfilingCache,), {}))
    for r in range(16):
        o = cls()
        o.load_cache(str(p), r)
        assert bits(o.cache) == bits(entries(r)), f"rank {r}"
