import enum
import json
import os

import pytest

import ranktune
import ranktune.trtllm
from conftest import run_py, wait_ok

HERE = os.path.dirname(os.path.abspath(__file__))


class Mode(enum.Enum):
    FAST = 3


def fresh_class():
    import importlib
    import trtllm_standin
    importlib.reload(trtllm_standin)
    return trtllm_standin.AutoTunerProfilingCache


def sample(rank):
    return {
        ("trtllm::gemm", "CublasRunner", "(8, 'fp8')", ((1, 2048), (2048,))): (0, rank, 0.0125),
        ("trtllm::gemm", "CutlassRunner", "()", ((16, 2048), (2048,))): (1, (64, 128, (2, 1)), 0.5),
        ("trtllm::moe", "MoeRunner", "0", ((4,),)): (2, f"tile_{rank}", 1.25),
        ("trtllm::allreduce", "AllReduceRunner", "1", ((1, 4096),)): (0, -1, 0.002),
    }


def test_install_round_trips_cache_and_independent_op_exactly(tmp_path):
    cls = ranktune.trtllm.install(fresh_class())
    a = cls()
    a.cache = sample(0)
    a.cache[("trtllm::misc", "R", "x", ((1,),))] = (0, Mode.FAST, 2.0)
    a.independent_op = {"trtllm::allreduce"}
    p = tmp_path / "autotuner.json"
    a.save_cache(str(p), 0)
    b = cls()
    b.load_cache(str(p), 0)
    expected = dict(a.cache)
    expected[("trtllm::misc", "R", "x", ((1,),))] = (0, 3, 2.0)  # an enum is stored as its value
    assert b.cache == expected
    assert {k: type(v[1]) for k, v in b.cache.items()} == {k: type(v[1]) for k, v in expected.items()}
    assert b.independent_op == {"trtllm::allreduce"}
    # The file is a ranktune cache: the allreduce entry is shared.
    sections = {(e["section"], e["op"]) for e in ranktune.Cache(p).entries()}
    assert ("shared", "trtllm::allreduce") in sections and ("rank_0", "trtllm::gemm") in sections


def test_missing_file_loads_nothing_and_corrupt_file_is_set_aside(tmp_path):
    cls = ranktune.trtllm.install(fresh_class())
    o = cls()
    o.load_cache(str(tmp_path / "none.json"), 0)
    assert o.cache == {} and o.independent_op == set()
    p = tmp_path / "bad.json"
    p.write_text('{"format": "ranktune-cache", "sect')
    with pytest.warns(RuntimeWarning, match="corrupt"):
        o.load_cache(str(p), 0)
    assert o.cache == {}
    assert any(n.startswith("bad.json.corrupt") for n in os.listdir(tmp_path))
    o.cache = sample(1)
    o.save_cache(str(p), 1)
    o2 = cls()
    o2.load_cache(str(p), 1)
    assert o2.cache == sample(1)


def test_patch_changes_one_instance_only(tmp_path):
    cls = fresh_class()
    patched = ranktune.trtllm.patch(cls())
    patched.cache = sample(2)
    patched.save_cache(str(tmp_path / "c.json"), 2)
    assert len(ranktune.Cache(tmp_path / "c.json").entries(rank=2)) == 4
    with pytest.raises(NotImplementedError):
        cls().load_cache(str(tmp_path / "c.json"), 2)


def test_32_ranks_save_through_the_standin_at_once_and_nothing_is_lost(tmp_path):
    p = tmp_path / "autotuner.json"
    code = """
        import sys
        sys.path.insert(0, sys.argv[3])
        import ranktune.trtllm, trtllm_standin, test_trtllm
        cls = ranktune.trtllm.install(trtllm_standin.AutoTunerProfilingCache)
        rank = int(sys.argv[2])
        o = cls()
        o.cache = test_trtllm.sample(rank)
        o.independent_op = {"trtllm::allreduce"}
        o.save_cache(sys.argv[1], rank)
        """
    wait_ok([run_py(code, p, r, HERE) for r in range(32)])
    cls = ranktune.trtllm.install(fresh_class())
    for r in range(32):
        o = cls()
        o.load_cache(str(p), r)
        assert o.cache == sample(r), f"rank {r}"
        assert o.independent_op == {"trtllm::allreduce"}
    assert len(ranktune.Cache(p).entries()) == 32 * 3 + 1
