"""PyTorch jobs with real torch (CPU, gloo, loopback): ``ranktune.torch``'s
profiler hook and schedule, and a ``torchrun --nproc-per-node 4`` job that
tunes an op over its process group with one rank slow on purpose -- four
trace files, one choice on every rank, a rerun that measures nothing, and
``ranktune trace summary`` naming the slow rank at gloo's collectives -- plus
the variant with a rank killed mid-tuning.

Skipped loudly outside CI when torch is not installed; in CI a missing
torch fails (``.ci/run`` installs it).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import IN_CI, run_py, wait_ok

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - depends on the machine
    if IN_CI:
        pytest.fail("torch is not installed, but CI is set: .ci/run must install it",
                    pytrace=False)
    pytest.skip("torch is not installed (pip install torch): the PyTorch tests did not run",
                allow_module_level=True)

import ranktune
import ranktune.torch as rtt


def _events(path):
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def _profile_some(handler, sched, steps=6):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], on_trace_ready=handler, schedule=sched) as p:
        for _ in range(steps):
            torch.matmul(torch.ones(32, 32), torch.ones(32, 32))
            p.step()


# -- the profiler hook ---------------------------------------------------------
def test_each_cycle_gets_its_own_file_with_the_rank_and_run(tmp_path):
    h = rtt.trace_handler(tmp_path / "trace.json")
    _profile_some(h, rtt.schedule("1-2,4"))
    assert [os.path.basename(f) for f in h.files] == ["trace_0.json", "trace_0.cycle2.json"]
    first, second = (_events(f) for f in h.files)
    for doc in (first, second):
        assert doc["distributedInfo"]["rank"] == 0
        assert doc["otherData"]["run_id"]
        assert any(e.get("name", "").startswith("ProfilerStep#") for e in doc["traceEvents"])
    # The first cycle's steps are 1-2, the second's 4: nothing overwritten.
    steps = lambda d: sorted(e["name"] for e in d["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))  # noqa: E731
    assert steps(first) == ["ProfilerStep#1", "ProfilerStep#2"]
    assert steps(second) == ["ProfilerStep#4"]
    # No temp file is left beside them.
    assert sorted(os.listdir(tmp_path)) == ["trace_0.cycle2.json", "trace_0.json"]


def test_the_path_rule_from_the_environment_gz_and_a_new_directory(tmp_path):
    code = """
import os, sys, torch, ranktune.torch as rtt
from torch.profiler import profile, ProfilerActivity
h = rtt.trace_handler()
with profile(activities=[ProfilerActivity.CPU], on_trace_ready=h, schedule=rtt.schedule()) as p:
    for _ in range(4):
        torch.ones(8).sum(); p.step()
print(h.files[0])
"""
    # The reference's broken cases: trace.json.gz, a directory that does not
    # exist yet, a single iteration N; rank 3 of 4 from torchrun's variables.
    env = {"TLLM_TORCH_PROFILE_TRACE": str(tmp_path / "new" / "dir" / "trace.json.gz"),
           "TLLM_PROFILE_START_STOP": "2", "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "3",
           "RANKTUNE_JOB_ID": "torch-env"}
    (out,) = wait_ok([run_py(code, env=env)], timeout=120)
    path = out.strip().splitlines()[-1]
    assert path == str(tmp_path / "new" / "dir" / "trace_3.json.gz")
    doc = _events(path)
    assert doc["distributedInfo"]["rank"] == 3 and doc["distributedInfo"]["world_size"] == 4
    assert doc["otherData"]["run_id"] == "torch-env"
    names = [e.get("name", "") for e in doc["traceEvents"]]
    assert [n for n in names if n.startswith("ProfilerStep#")] == ["ProfilerStep#2"]


def test_a_failing_export_leaves_no_half_written_file(tmp_path):
    h = rtt.trace_handler(tmp_path / "t.json")

    class Broken:
        def export_chrome_trace(self, path):
            with open(path, "w") as f:
                f.write('{"traceEvents": [')  # cut off, as by an exception mid-export
            raise RuntimeError("disk vanished")

    with pytest.raises(RuntimeError, match="disk vanished"):
        h(Broken())
    assert os.listdir(tmp_path) == []


def test_bad_settings_are_clear_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("RANKTUNE_TRACE", raising=False)
    monkeypatch.delenv("TLLM_TORCH_PROFILE_TRACE", raising=False)
    with pytest.raises(ValueError, match="RANKTUNE_TRACE"):
        rtt.trace_handler()
    with pytest.raises(ranktune.Error, match="ends before it starts"):
        rtt.schedule("5-2")


def test_shapes_key_and_timer_on_cpu():
    a, b = torch.ones(3, 4), torch.ones(4, 5)
    assert rtt.shapes(a, b, 7) == (3, 4, 4, 5)
    assert not rtt.on_gpu((a, b), {})
    t = rtt.timer(lambda: time.sleep(0.01))
    assert 0.009 < t < 1.0
    mm = ranktune.autotune("mm", {"matmul": torch.matmul, "einsum": lambda x, y: torch.einsum("ij,jk->ik", x, y)},
                           key=rtt.shapes)
    with ranktune.tuning():
        assert torch.equal(mm(a, b), a @ b)
    assert mm.tuner.measured == 1


# -- torchrun ------------------------------------------------------------------
JOB = r"""
import json, os, sys, time, warnings
import torch, torch.distributed as dist
import ranktune, ranktune.torch as rtt
from torch.profiler import ProfilerActivity

out_dir, slow_rank, die_rank = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=60))
rank = dist.get_rank()

def blocked(x, w):
    # The same product, 16 columns at a time.
    return torch.cat([x @ w[:, i:i + 16] for i in range(0, w.shape[1], 16)], dim=1)

def einsum(x, w):
    if rank == die_rank:
        os.kill(os.getpid(), 9)  # killed mid-tuning
    return torch.einsum("ij,jk->ik", x, w)

mm = ranktune.autotune("linear", {"matmul": torch.matmul, "blocked": blocked, "einsum": einsum},
                       key=rtt.shapes, cache=os.path.join(out_dir, "tune.json"), strategy="parallel",
                       samples=5)
model_w = torch.randn(64, 64)
steps = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with ranktune.tuning():
        with rtt.profile(os.path.join(out_dir, "traces") + "/", schedule=None,
                         activities=[ProfilerActivity.CPU]) as prof:
            for step in range(4):
                x = torch.randn(32, 64)
                y = mm(x, model_w)
                if rank == slow_rank:
                    time.sleep(0.25)  # the slow rank, on purpose
                t = y.sum().reshape(1)
                dist.all_reduce(t)
                steps.append(float(t))
                prof.step()
from ranktune.tune import _coordinator
# One file per rank: torchrun mixes its workers' stdout, and two long
# lines written at once can interleave.
result = json.dumps({"rank": rank, "measured": mm.tuner.measured, "fallbacks": mm.tuner.fallbacks,
                     "meets": _coordinator(mm.tuner._cache).describe(),
                     "choice": {str(k): v.__name__ if hasattr(v, "__name__") else repr(v)
                                for k, v in mm.tuner._choices.items()},
                     "files": prof.ranktune_handler.files})
with open(os.path.join(out_dir, f"result_{rank}.json.tmp"), "w") as f:
    f.write(result)
os.replace(os.path.join(out_dir, f"result_{rank}.json.tmp"), os.path.join(out_dir, f"result_{rank}.json"))
dist.destroy_process_group()
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(tmp_path, slow_rank, timeout=240):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or "torchrun"
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "RANKTUNE_JOB_ID", "RANKTUNE_COLLECTIVE",
              "RANKTUNE_TRACE", "TLLM_TORCH_PROFILE_TRACE", "RANKTUNE_PROFILE_ITERS",
              "TLLM_PROFILE_START_STOP"):
        env.pop(k, None)
    env.update({"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
                "RANKTUNE_STRATEGY_TIMEOUT": "60"})
    for old in tmp_path.glob("result_*.json"):
        old.unlink()
    p = subprocess.run(
        [torchrun, "--nproc-per-node", "4", "--master-addr", "127.0.0.1",
         "--master-port", str(_free_port()), "--max-restarts", "0",
         str(script), str(tmp_path), str(slow_rank), "-1"],
        env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-4000:]
    outs = [json.loads(f.read_text()) for f in tmp_path.glob("result_*.json")]
    return sorted(outs, key=lambda o: o["rank"])


def test_torchrun_job_tunes_over_its_process_group_and_names_the_slow_rank(tmp_path, cli):
    outs = _torchrun(tmp_path, slow_rank=2)
    assert [o["rank"] for o in outs] == [0, 1, 2, 3]
    # One choice on every rank, reached together (no rank tuned alone)
    # through the process group's store, with nothing configured.
    assert all(o["fallbacks"] == [] for o in outs), outs
    assert all("torch.distributed store of process group" in o["meets"] for o in outs), outs
    assert not os.path.exists(tmp_path / ".ranktune-collective")
    assert len({json.dumps(o["choice"], sort_keys=True) for o in outs}) == 1, outs
    # Four trace files, one per rank.
    traces = sorted(os.listdir(tmp_path / "traces"))
    assert traces == [f"trace_{r}.json" for r in range(4)], traces
    # The cache is healthy; the choice is stored once, in the shared section.
    check = subprocess.run([cli, "cache", "check", str(tmp_path / "tune.json")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    entries = [e for e in ranktune.Cache(tmp_path / "tune.json").entries() if e["op"] == "linear"]
    assert len(entries) == 1 and entries[0]["section"] == "shared", entries
    # The summary names the slow rank by the wait it caused at the real
    # collectives. torch 2.15's gloo traces on CPU carry `c10d::allreduce_`
    # (the op) and `gloo:all_reduce` (gloo's threads); `record_param_comms`
    # (with `Seq` and the group's name) is NCCL's, which needs a GPU.
    s = subprocess.run([cli, "trace", "summary", "--json", str(tmp_path / "traces")],
                       capture_output=True, text=True)
    assert s.returncode == 0, s.stderr
    doc = json.loads(s.stdout)
    assert doc["straggler"] and doc["straggler"]["rank"] == 2, doc["verdict"]
    culprit = doc["straggler"]["collective"]
    assert culprit and culprit["name"] in ("c10d::allreduce_", "gloo:all_reduce"), doc["straggler"]
    assert culprit["wait_caused_us"] > 0.5 * 4 * 250_000 / 4, culprit  # ~250 ms per step
    # A rerun measures nothing: every rank finds the shared choice.
    shutil.rmtree(tmp_path / "traces")
    again = _torchrun(tmp_path, slow_rank=-1)
    assert [o["measured"] for o in again] == [0, 0, 0, 0], again
    assert all(o["fallbacks"] == [] for o in again), again


KILLED = r"""
import json, os, sys, time, warnings, datetime
import torch, torch.distributed as dist
import ranktune, ranktune.torch as rtt
out_dir, die_rank = sys.argv[1], int(sys.argv[2])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
def einsum(x, w):
    if rank == die_rank:
        os.kill(os.getpid(), 9)
    return torch.einsum("ij,jk->ik", x, w)
mm = ranktune.autotune("linear", {"matmul": torch.matmul, "einsum": einsum,
                       "mm": torch.mm, "t": lambda x, w: (w.t() @ x.t()).t()},
                       key=rtt.shapes, cache=os.path.join(out_dir, "tune.json"),
                       strategy="parallel", samples=3)
start = time.time()
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    with ranktune.tuning():
        y = mm(torch.randn(8, 16), torch.randn(16, 8))
print(json.dumps({"rank": rank, "fallbacks": mm.tuner.fallbacks, "took": time.time() - start}))
sys.stdout.flush()
os._exit(0)  # no collective teardown with a dead peer
"""


def test_a_rank_killed_mid_tuning_lets_the_others_finish_within_the_bound(tmp_path):
    """torchrun's agent stops every worker when one dies, so this job starts
    its four ranks as torchrun does (the same variables, a TCPStore at
    MASTER_ADDR:MASTER_PORT hosted by rank 0), and SIGKILL reaches rank 1
    in the middle of its share of the measuring."""
    port = _free_port()
    procs = []
    for r in range(4):
        env = {"RANK": str(r), "WORLD_SIZE": "4", "LOCAL_RANK": str(r),
               "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "TORCHELASTIC_RUN_ID": f"killed-{port}", "GLOO_SOCKET_IFNAME": "lo",
               "OMP_NUM_THREADS": "1", "RANKTUNE_STRATEGY_TIMEOUT": "8"}
        procs.append(run_py(KILLED, tmp_path, 1, env=env))
    start = time.time()
    outs = {}
    for r, p in enumerate(procs):
        out, err = p.communicate(timeout=180)
        if r == 1:
            assert p.returncode == -9, err
            continue
        assert p.returncode == 0, err[-3000:]
        outs[r] = json.loads(out.strip().splitlines()[-1])
    assert time.time() - start < 120
    for r, o in outs.items():
        # The dead rank is named, and the others tuned alone within the bound.
        assert len(o["fallbacks"]) == 1 and "rank(s) [1] did not arrive" in o["fallbacks"][0], o
        assert "tuning this bucket independently" in o["fallbacks"][0], o
        assert 8 <= o["took"] < 8 + 20, o


# -- crashes and the shared run ------------------------------------------------
CRASH = r"""
import os, signal, sys, torch, ranktune.torch as rtt
from torch.profiler import ProfilerActivity
how = sys.argv[2]
with rtt.profile(sys.argv[1], schedule=None, activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(3):
        torch.matmul(torch.ones(16, 16), torch.ones(16, 16))
        prof.step()
    if how == "raise":
        raise RuntimeError("the step failed")
    os.kill(os.getpid(), signal.SIGTERM)
    torch.ones(1).sum()  # Python runs the handler here
print("not reached")
"""


@pytest.mark.parametrize("how, status", [("raise", 1), ("sigterm", -15)])
def test_an_exception_or_sigterm_while_profiling_writes_the_whole_file(tmp_path, how, status):
    p = run_py(CRASH, tmp_path / "t.json", how, env={"RANK": "1", "WORLD_SIZE": "2",
                                                     "LOCAL_RANK": "1", "RANKTUNE_JOB_ID": "crash"})
    out, err = p.communicate(timeout=120)
    assert p.returncode == status, err[-2000:]
    assert "not reached" not in out
    assert sorted(os.listdir(tmp_path)) == ["t_1.json"], os.listdir(tmp_path)
    doc = _events(tmp_path / "t_1.json")
    assert doc["distributedInfo"]["rank"] == 1 and doc["otherData"]["run_id"] == "crash"
    assert any(e.get("name") == "aten::matmul" for e in doc["traceEvents"])


def test_torch_and_ranktune_traces_share_the_run_and_the_clock(tmp_path):
    import ranktune.trace as rtrace
    from torch.profiler import ProfilerActivity, profile

    own = rtrace.start(tmp_path / "own" / "trace.json")
    h = rtt.trace_handler(tmp_path / "torch" / "trace.json")
    with profile(activities=[ProfilerActivity.CPU], on_trace_ready=h):
        with rtrace.span("around"):
            torch.matmul(torch.ones(64, 64), torch.ones(64, 64))
    rtrace.stop()
    a, b = _events(own), _events(h.files[0])
    assert a["otherData"]["run_id"] == b["otherData"]["run_id"]

    def absolute(doc, name):
        (e,) = [e for e in doc["traceEvents"] if e.get("name") == name and e.get("ph") == "X"][:1]
        start = doc["baseTimeNanoseconds"] / 1e3 + float(e["ts"])
        return start, start + float(e["dur"])

    s0, s1 = absolute(a, "around")
    m0, m1 = absolute(b, "aten::matmul")
    # On one clock, the torch op lies inside ranktune's span around it.
    assert s0 - 50 <= m0 <= m1 <= s1 + 50, (s0, m0, m1, s1)


GROUPS = r"""
import json, os, sys, datetime, warnings
import torch, torch.distributed as dist
import ranktune, ranktune.torch as rtt
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
halves = [dist.new_group([0, 1]), dist.new_group([2, 3])]
mine = halves[rank // 2]
mm = ranktune.autotune("linear", {"matmul": torch.matmul, "mm": torch.mm},
                       key=rtt.shapes, cache=os.path.join(sys.argv[1], f"half{rank // 2}.json"),
                       strategy="broadcast", samples=3, group=mine)
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    with ranktune.tuning():
        mm(torch.randn(8, 16), torch.randn(16, 8))
try:
    rtt._coordinator_for(halves[1 - rank // 2])
    other = "no error"
except ranktune.Error as e:
    other = str(e)
print(json.dumps({"rank": rank, "fallbacks": mm.tuner.fallbacks, "measured": mm.tuner.measured,
                  "other": other}))
sys.stdout.flush()
# Rank 0 hosts the job's store, which the other half may still be using.
dist.barrier()
os._exit(0)
"""


def test_group_tunes_over_that_group_only(tmp_path):
    port = _free_port()
    procs = []
    for r in range(4):
        env = {"RANK": str(r), "WORLD_SIZE": "4", "LOCAL_RANK": str(r),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "TORCHELASTIC_RUN_ID": f"groups-{port}", "GLOO_SOCKET_IFNAME": "lo",
               "OMP_NUM_THREADS": "1", "RANKTUNE_STRATEGY_TIMEOUT": "20"}
        procs.append(run_py(GROUPS, tmp_path, env=env))
    outs = [json.loads(o.strip().splitlines()[-1]) for o in wait_ok(procs, timeout=180)]
    # Each half agreed within itself: its rank 0 (global 0 and 2) measured.
    assert all(o["fallbacks"] == [] for o in outs), outs
    assert [o["measured"] for o in outs] == [1, 0, 1, 0], outs
    # The other half's group is not this rank's: a clear error, not a hang.
    assert all("is not in the group given as group=" in o["other"] for o in outs), outs
    for half in (0, 1):
        entries = ranktune.Cache(tmp_path / f"half{half}.json").entries()
        assert len(entries) == 1 and entries[0]["section"] == "shared", entries


def test_torch_schedule_repeat_never_overwrites_a_cycle(tmp_path):
    from torch.profiler import schedule

    h = rtt.trace_handler(tmp_path, gzip=True)  # an existing directory; gzip forced
    _profile_some(h, schedule(wait=1, warmup=0, active=1, repeat=3), steps=7)
    names = [os.path.basename(f) for f in h.files]
    assert names == ["trace_0.json.gz", "trace_0.cycle2.json.gz", "trace_0.cycle3.json.gz"]
    assert sorted(os.listdir(tmp_path)) == sorted(names)
    assert [_events(f)["otherData"]["cycle"] for f in h.files] == [1, 2, 3]
