"""Pins each behaviour of the stand-in of TensorRT-LLM's cache persistence
(trtllm_standin.py) that the drop-in must match or deliberately improve:
lock, save, load, (de)serialization, metadata, missing file, excluded ops,
``inf`` times, directory creation."""

import enum
import fcntl
import json
import math
import os
import threading
import time

import pytest

import trtllm_standin as standin
from conftest import run_py, wait_ok

HERE = os.path.dirname(os.path.abspath(__file__))


class Mode(enum.Enum):
    FAST = 3


KEY = ("trtllm::fp4_gemm", "FP4GemmRunner", "(1, 'a')", ((8, -1), (0,), (1.5,)))


def make(cache=None, **attrs):
    o = standin.AutoTunerProfilingCache()
    o.cache = dict(cache or {})
    for k, v in attrs.items():
        setattr(o, k, v)
    return o


def test_file_layout_is_json_dump_indent_2_of_str_keys_and_repr_tactics(tmp_path):
    p = tmp_path / "c.json"
    make({KEY: (1, (64, "x"), 0.5)}).save_cache(p, 0)
    doc = json.loads(p.read_text())
    assert list(doc) == ["metadata", "shared", "rank_0"]
    assert doc["rank_0"] == {str(KEY): {"runner_id": 1, "tactic": "(64, 'x')", "min_time": 0.5}}
    assert doc["shared"] == {}
    assert p.read_text() == json.dumps(doc, indent=2)
    assert set(doc["metadata"]) == {"lib_version", "creation_timestamp", "device_name", "device_capability"}
    assert doc["metadata"]["device_capability"] == [9, 0]


def test_minus_one_zero_and_float_dims_round_trip(tmp_path):
    p = tmp_path / "c.json"
    make({KEY: (0, 7, 0.25)}).save_cache(p, 0)
    o = make()
    o.load_cache(p, 0)
    assert list(o.cache) == [KEY]


def test_enum_tactic_is_saved_as_its_value(tmp_path):
    p = tmp_path / "c.json"
    make({KEY: (0, Mode.FAST, 1.0)}).save_cache(p, 0)
    assert json.loads(p.read_text())["rank_0"][str(KEY)]["tactic"] == "3"


def test_inf_min_time_is_written_as_Infinity_and_read_back(tmp_path):
    p = tmp_path / "c.json"
    make({KEY: (0, -1, float("inf"))}).save_cache(p, 0)
    assert '"min_time": Infinity' in p.read_text()
    o = make()
    o.load_cache(p, 0)
    assert math.isinf(o.cache[KEY][2])


def test_excluded_ops_are_not_saved(tmp_path):
    p = tmp_path / "c.json"
    o = make({KEY: (0, 1, 1.0), ("other", "R", "0", ((1,),)): (0, 2, 2.0)})
    o.add_excluded_op("trtllm::fp4_gemm")
    o.save_cache(p, 0)
    assert list(json.loads(p.read_text())["rank_0"]) == [str(("other", "R", "0", ((1,),)))]


def test_missing_directories_are_created(tmp_path):
    p = tmp_path / "a" / "b" / "c.json"
    make({KEY: (0, 1, 1.0)}).save_cache(p, 0)
    assert p.exists()


def test_missing_file_raises_FileNotFoundError(tmp_path):
    with pytest.raises(FileNotFoundError, match="Cache file not found"):
        make().load_cache(tmp_path / "none.json", 0)


def test_metadata_is_restored_and_required(tmp_path):
    p = tmp_path / "c.json"
    first = make({KEY: (0, 1, 1.0)}, device_name="first", creation_timestamp=12.5)
    first.save_cache(p, 0)
    # The first writer's metadata stays.
    make({KEY: (0, 1, 1.0)}, device_name="second").save_cache(p, 1)
    o = make()
    o.load_cache(p, 1)
    assert (o.device_name, o.creation_timestamp, o.device_capability) == ("first", 12.5, [9, 0])
    doc = json.loads(p.read_text())
    del doc["metadata"]["creation_timestamp"]
    p.write_text(json.dumps(doc))
    with pytest.raises(KeyError):
        make().load_cache(p, 0)


def test_saves_merge_sections_and_keep_unknown_members(tmp_path):
    p = tmp_path / "c.json"
    k2 = ("op2", "R", "0", ((2,),))
    make({KEY: (0, 1, 1.0)}).save_cache(p, 0)
    doc = json.loads(p.read_text())
    doc["extra"] = {"kept": True}
    p.write_text(json.dumps(doc))
    make({k2: (0, 2, 2.0)}).save_cache(p, 0)  # update, not replace
    make({KEY: (0, 3, 3.0)}, independent_op={"trtllm::fp4_gemm"}).save_cache(p, 1)
    doc = json.loads(p.read_text())
    assert doc["extra"] == {"kept": True}
    assert set(doc["rank_0"]) == {str(KEY), str(k2)}
    assert list(doc["shared"]) == [str(KEY)] and doc["rank_1"] == {}
    o = make()
    o.load_cache(p, 0)
    # Shared entries come first; the rank's own entries win.
    assert o.cache[KEY] == (0, 1, 1.0) and o.independent_op == {"trtllm::fp4_gemm"}


def test_invalid_file_starts_over_and_drops_every_rank(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"rank_3": {"x": ')
    make({KEY: (0, 1, 1.0)}).save_cache(p, 0)
    assert list(json.loads(p.read_text())) == ["metadata", "shared", "rank_0"]


def test_entries_that_are_not_literals_are_skipped(tmp_path, caplog):
    p = tmp_path / "c.json"
    make({KEY: (0, 1, 1.0)}).save_cache(p, 0)
    doc = json.loads(p.read_text())
    doc["rank_0"]["not a tuple("] = {"runner_id": 0, "tactic": "1", "min_time": 1.0}
    doc["rank_0"][str(("b", "R", "0", ((1,),)))] = {"runner_id": 0, "tactic": "<object>", "min_time": 1.0}
    p.write_text(json.dumps(doc))
    o = make()
    o.load_cache(p, 0)
    assert list(o.cache) == [KEY]
    assert "Could not deserialize" in caplog.text


def test_save_waits_for_lockf_on_the_lock_file(tmp_path):
    p = tmp_path / "c.json"
    holder = run_py(
        """
        import fcntl, os, sys, time
        fd = os.open(sys.argv[1] + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.lockf(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(1.0)
        """,
        p,
    )
    assert holder.stdout.readline().strip() == "locked"
    started = time.monotonic()
    done = threading.Event()
    t = threading.Thread(target=lambda: (make({KEY: (0, 1, 1.0)}).save_cache(p, 0), done.set()))
    t.start()
    assert not done.wait(0.4), "the save did not wait for the lockf holder"
    t.join(10)
    assert done.is_set() and time.monotonic() - started >= 0.5
    wait_ok([holder])
    # A flock on the lock file does not hold it off (Linux: separate locks).
    fd = os.open(str(p) + ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    make({KEY: (0, 2, 1.0)}).save_cache(p, 0)
    os.close(fd)
    assert os.stat(str(p) + ".lock").st_mode & 0o777 == 0o644 & ~_umask()


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_16_ranks_saving_at_once_lose_nothing(tmp_path):
    p = tmp_path / "c.json"
    code = """
        import sys
        sys.path.insert(0, sys.argv[3])
        import trtllm_standin
        r = int(sys.argv[2])
        o = trtllm_standin.AutoTunerProfilingCache()
        o.cache = {("op", "R", str(r), ((i, -1),)): (0, i, i / 7) for i in range(50)}
        o.save_cache(sys.argv[1], r)
        """
    wait_ok([run_py(code, p, r, HERE) for r in range(16)])
    for r in range(16):
        o = make()
        o.load_cache(p, r)
        assert len(o.cache) == 50 and o.cache[("op", "R", str(r), ((7, -1),))] == (0, 7, 1.0)
