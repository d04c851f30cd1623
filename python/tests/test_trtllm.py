"""ranktune.trtllm's drop-in against the stand-in of TensorRT-LLM's cache
(trtllm_standin.py): the file stays TensorRT-LLM's own, unpatched objects
read what patched ones write and the other way round, and the ten points
of issue 23 behave as the original does."""

import enum
import json
import math
import os
import re
import random
import struct
import subprocess

import pytest

import ranktune.trtllm
import trtllm_standin
from conftest import run_py, wait_ok

HERE = os.path.dirname(os.path.abspath(__file__))


class Mode(enum.Enum):
    FAST = 3


def fresh_class():
    """A fresh subclass of the stand-in's class: install() changes the class
    it is given, and the stand-in's own stays unpatched."""
    return type("AutoTunerProfilingCache", (trtllm_standin.AutoTunerProfilingCache,), {})


def plain():
    """An unpatched object."""
    return fresh_class()()


def patched():
    return ranktune.trtllm.install(fresh_class())()


FP4 = ("trtllm::fp4_gemm", "FP4GemmRunner", "(1, 'nvfp4')", ((8, -1), (0,), (1.5,)))


def sample(rank):
    return {
        ("trtllm::gemm", "CublasRunner", "(8, 'fp8')", ((1, 2048), (2048,))): (0, rank, 0.0125),
        ("trtllm::gemm", "CutlassRunner", "()", ((16, 2048), (2048,))): (1, (64, 128, (2, 1)), 0.1 + rank),
        ("trtllm::moe", "MoeRunner", "0", ((4, -1), (0,))): (2, f"tile_{rank}", 1 / 3),
        FP4: (0, -1, float("inf")),
    }


def test_patched_save_is_tensorrt_llms_format_and_unpatched_ranks_load_it(tmp_path):
    p = tmp_path / "autotuner.json"
    a = patched()
    a.cache = sample(0)
    a.independent_op = {"trtllm::moe"}
    a.save_cache(str(p), 0)
    doc = json.loads(p.read_text())
    assert {"metadata", "shared", "rank_0"} <= set(doc)
    assert set(doc["metadata"]) >= {"lib_version", "creation_timestamp", "device_name", "device_capability"}
    b = plain()
    b.load_cache(str(p), 0)  # item 1: no KeyError
    assert b.cache == sample(0)
    assert b.independent_op == {"trtllm::moe"}


def test_unpatched_file_loads_and_saves_in_place(tmp_path):
    # Item 2: a real TensorRT-LLM file is read, and saved in its format.
    p = tmp_path / "autotuner.json"
    u = plain()
    u.cache = sample(1)
    u.save_cache(str(p), 1)
    before = json.loads(p.read_text())
    a = patched()
    a.load_cache(str(p), 1)
    assert a.cache == sample(1)
    a.cache = sample(2)
    a.save_cache(str(p), 2)
    after = json.loads(p.read_text())
    assert after["rank_1"] == before["rank_1"] and after["metadata"] == before["metadata"]
    # The other rank's section is kept byte for byte.
    text = p.read_text()
    assert json.dumps({"rank_1": before["rank_1"]}, indent=2)[2:-2] in text
    v = plain()
    v.load_cache(str(p), 2)
    assert v.cache == sample(2)


def test_minus_one_and_float_dims_are_kept(tmp_path):
    # Items 3 and 9.
    p = tmp_path / "c.json"
    a = patched()
    a.cache = {FP4: (0, 5, 0.5)}
    a.save_cache(p, 0)
    assert list(json.loads(p.read_text())["rank_0"]) == [str(FP4)]
    b = patched()
    b.load_cache(p, 0)
    assert list(b.cache) == [FP4] and isinstance(list(b.cache)[0][3][2][0], float)


def test_min_time_is_bit_exact(tmp_path):
    # Item 4: every float comes back with the same bits.
    rng = random.Random(4)
    times = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(62)))[0] for _ in range(2000)]
    times += [rng.random() * 10 ** rng.randint(-9, 3) for _ in range(2000)]
    cache = {("op", "R", "0", ((i,),)): (0, i, t) for i, t in enumerate(times)}
    p = tmp_path / "c.json"
    a = patched()
    a.cache = cache
    a.save_cache(p, 0)
    for loader in (patched(), plain()):
        loader.load_cache(p, 0)
        got = {k: struct.pack("<d", v[2]) for k, v in loader.cache.items()}
        assert got == {k: struct.pack("<d", v[2]) for k, v in cache.items()}


def test_excluded_ops_are_not_saved(tmp_path):
    # Item 5.
    p = tmp_path / "c.json"
    a = patched()
    a.cache = sample(0)
    a.add_excluded_op("trtllm::gemm")
    report = ranktune.trtllm.save_cache(a, p, 0)
    assert report["skipped"] == 2
    assert all("trtllm::gemm" not in k for k in json.loads(p.read_text())["rank_0"])


def test_missing_file_raises_FileNotFoundError(tmp_path):
    # Item 6.
    with pytest.raises(FileNotFoundError, match="Cache file not found"):
        patched().load_cache(str(tmp_path / "none.json"), 0)


def test_metadata_is_restored_on_load(tmp_path):
    # Item 7.
    p = tmp_path / "c.json"
    u = plain()
    u.device_name, u.creation_timestamp, u.lib_version = "GPU-X", 123.25, "0.21"
    u.cache = sample(0)
    u.save_cache(p, 0)
    a = patched()
    a.load_cache(p, 0)
    assert (a.device_name, a.creation_timestamp, a.lib_version, a.device_capability) == ("GPU-X", 123.25, "0.21", [9, 0])
    # The first writer's metadata stays when a patched rank saves.
    a.device_name = "GPU-Y"
    a.save_cache(p, 1)
    assert json.loads(p.read_text())["metadata"]["device_name"] == "GPU-X"


def test_inf_min_time_is_saved(tmp_path):
    # Item 8.
    p = tmp_path / "c.json"
    a = patched()
    a.cache = {FP4: (0, -1, float("inf"))}
    a.save_cache(p, 0)
    assert '"min_time": Infinity' in p.read_text()
    b = plain()
    b.load_cache(p, 0)
    assert math.isinf(b.cache[FP4][2])


def test_missing_directory_is_created(tmp_path):
    # Item 10.
    p = tmp_path / "x" / "y" / "c.json"
    a = patched()
    a.cache = sample(0)
    a.save_cache(p, 0)
    assert p.exists()


def test_enum_tactic_is_stored_as_its_value(tmp_path):
    p = tmp_path / "c.json"
    a = patched()
    a.cache = {FP4: (0, Mode.FAST, 1.0)}
    a.save_cache(p, 0)
    b = plain()
    b.load_cache(p, 0)
    assert b.cache[FP4] == (0, 3, 1.0)


def test_corrupt_file_is_set_aside_not_silently_dropped(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"rank_3": {"x": ')
    a = patched()
    a.cache = sample(0)
    # The cache store's own words and stamp (UTC time), as for a ranktune cache.
    with pytest.warns(RuntimeWarning, match=r"does not parse \(not a TensorRT-LLM cache.*moved it to .*c\.json\.corrupt-\d{8}T\d{6}Z"):
        a.save_cache(p, 0)
    assert any(re.fullmatch(r"c\.json\.corrupt-\d{8}T\d{6}Z", n) for n in os.listdir(tmp_path))
    b = plain()
    b.load_cache(p, 0)
    assert b.cache == sample(0)


def test_unliteral_entries_are_skipped_with_a_warning(tmp_path):
    p = tmp_path / "c.json"
    u = plain()
    u.cache = sample(0)
    u.save_cache(p, 0)
    doc = json.loads(p.read_text())
    doc["rank_0"]["not a tuple("] = {"runner_id": 0, "tactic": "1", "min_time": 1.0}
    p.write_text(json.dumps(doc, indent=2))
    a = patched()
    with pytest.warns(RuntimeWarning, match="not a Python literal"):
        a.load_cache(p, 0)
    assert a.cache == sample(0)


def test_generation_is_bumped_on_load(tmp_path):
    p = tmp_path / "c.json"
    a = patched()
    a.cache = sample(0)
    a.save_cache(p, 0)
    a.generation = 4
    a.load_cache(p, 0)
    assert a.generation == 5


def test_extras_are_kept_by_unpatched_saves_and_cache_commands_read_the_file(tmp_path, cli):
    p = tmp_path / "c.json"
    a = patched()
    a.cache = sample(0)
    a.save_cache(p, 0)
    u = plain()
    u.cache = sample(1)
    u.save_cache(p, 1)
    doc = json.loads(p.read_text())
    assert "rank_0" in doc["ranktune"]["sections"] and doc["ranktune"]["environments"]
    show = subprocess.run([cli, "cache", "show", str(p)], capture_output=True, text=True)
    assert show.returncode == 0, show.stderr
    # -1 dims are read; the one `inf` entry per rank is named and skipped
    # (a ranktune time is finite).
    assert show.stdout.count("4x-1,0") == 2, show.stdout
    assert show.stderr.count("FP4GemmRunner") == 2 and "skipped" in show.stderr, show.stderr
    check = subprocess.run([cli, "cache", "check", str(p)], capture_output=True, text=True)
    assert "is not" not in check.stderr and "cannot" not in check.stderr, check.stderr
    assert "measured elsewhere" in check.stdout or check.returncode == 0, check.stdout


def test_patch_changes_one_instance_only(tmp_path):
    cls = fresh_class()
    one = ranktune.trtllm.patch(cls())
    one.cache = sample(2)
    one.save_cache(str(tmp_path / "c.json"), 2)
    assert "ranktune" in json.loads((tmp_path / "c.json").read_text())
    other = cls()
    other.cache = sample(3)
    other.save_cache(str(tmp_path / "d.json"), 3)
    assert "ranktune" not in json.loads((tmp_path / "d.json").read_text())
