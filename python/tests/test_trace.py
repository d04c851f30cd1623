import json
import os
import signal
import subprocess
import time

import pytest

import ranktune
import ranktune.trace as trace
from conftest import run_py, wait_ok

WORKER = """
import sys, time, ranktune.trace as trace
out = trace.start(sys.argv[1])
print(out, flush=True)
@trace.span("forward", layer=1)
def forward():
    time.sleep(0.002)
for i in range(5):
    with trace.span("load", shard=i):
        time.sleep(0.001)
    forward()
    trace.step()
trace.stop()
"""


def test_four_processes_trace_into_one_directory_then_merge_and_summary(tmp_path):
    d = str(tmp_path / "traces") + "/"
    procs = [run_py(WORKER, d, env={"RANK": str(r), "WORLD_SIZE": "4", "LOCAL_RANK": str(r)})
             for r in range(4)]
    outs = wait_ok(procs)
    assert sorted(o.strip() for o in outs) == [os.path.join(d, f"trace_{r}.json") for r in range(4)]
    for r in range(4):
        doc = json.load(open(os.path.join(d, f"trace_{r}.json")))
        assert doc["distributedInfo"]["rank"] == r and doc["distributedInfo"]["world_size"] == 4
        names = [e.get("name") for e in doc["traceEvents"]]
        assert names.count("forward") == 5 and names.count("load") == 5
    s = trace.summary(d)
    assert [x["rank"] for x in s["ranks"]] == [0, 1, 2, 3]
    assert all(x["steps"] == 5 for x in s["ranks"])
    # The same document as `trace summary --json`, input facts included.
    assert s["left_out"] == [] and "run_id" in s
    merged = tmp_path / "merged.json"
    report = trace.merge(d, merged)
    assert [x["rank"] for x in report["ranks"]] == [0, 1, 2, 3]
    events = json.load(open(merged))["traceEvents"]
    pids = {e["pid"] for e in events if e.get("name") == "forward"}
    assert len(pids) == 4


def test_span_args_and_iteration_window(tmp_path):
    p = tmp_path / "t.json"
    proc = run_py(
        """
        import sys, ranktune.trace as trace
        trace.start(sys.argv[1], iterations="2-3")
        for i in range(6):
            with trace.span("it", i=i, name="x"):
                pass
            trace.step()
        print(trace.stop())
        """,
        p,
    )
    (out,) = wait_ok([proc])
    doc = json.load(open(out.strip()))
    its = [e["args"]["i"] for e in doc["traceEvents"] if e.get("name") == "it"]
    assert its == [2, 3]


def test_second_start_is_an_error_and_stop_without_start_is_none(tmp_path):
    assert trace.stop() is None
    trace.start(tmp_path / "a.json")
    try:
        with pytest.raises(ranktune.Error, match="already recording"):
            trace.start(tmp_path / "b.json")
        assert trace.active()
    finally:
        assert trace.stop() == str(tmp_path / "a_0.json") or trace.stop() is None
    assert not trace.active()


def test_unwritable_path_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ranktune.Error, match="cannot write the trace file"):
        trace.start(str(blocker / "sub" / "t.json"))


def test_uncaught_exception_still_writes_the_trace(tmp_path):
    p = tmp_path / "t.json"
    proc = run_py(
        """
        import sys, ranktune.trace as trace
        trace.start(sys.argv[1])
        with trace.span("before-crash"):
            pass
        raise RuntimeError("boom")
        """,
        p,
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "boom" in err
    doc = json.load(open(tmp_path / "t_0.json"))
    assert any(e.get("name") == "before-crash" for e in doc["traceEvents"])


@pytest.mark.parametrize("own_handler", [False, True])
def test_sigterm_writes_the_trace_and_keeps_python_handling(tmp_path, own_handler):
    p = tmp_path / "t.json"
    proc = run_py(
        """
        import sys, time, signal, ranktune.trace as trace
        if sys.argv[2] == "1":
            def mine(signum, frame):
                print("own handler ran", flush=True)
                sys.exit(7)
            signal.signal(signal.SIGTERM, mine)
        trace.start(sys.argv[1])
        with trace.span("work"):
            pass
        print("ready", flush=True)
        while True:
            time.sleep(0.01)
        """,
        p,
        int(own_handler),
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    if own_handler:
        assert proc.returncode == 7 and "own handler ran" in out, err
    else:
        assert proc.returncode == -signal.SIGTERM, err
    doc = json.load(open(tmp_path / "t_0.json"))
    assert any(e.get("name") == "work" for e in doc["traceEvents"])


def test_sigint_raises_keyboardinterrupt_and_writes_the_trace(tmp_path):
    p = tmp_path / "t.json"
    proc = run_py(
        """
        import signal, sys, time, ranktune.trace as trace
        # Python's own SIGINT handling (a shell may start tests with SIGINT ignored).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        trace.start(sys.argv[1])
        with trace.span("work"):
            pass
        try:
            print("ready", flush=True)
            while True:
                time.sleep(0.01)
        except KeyboardInterrupt:
            print("caught", flush=True)
            raise
        """,
        p,
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert "caught" in out and "KeyboardInterrupt" in err
    doc = json.load(open(tmp_path / "t_0.json"))
    assert any(e.get("name") == "work" for e in doc["traceEvents"])


def test_a_forked_child_never_overwrites_the_parents_trace(tmp_path):
    """Issue: after trace.start, a child made by os.fork wrote the same
    trace_0.json from its atexit, and the parent's later spans were lost."""
    code = """
import json, os, sys
import ranktune.trace as trace
out = sys.argv[1]
path = trace.start(out + "/")
for _ in range(4):
    with trace.span("before_fork"):
        pass
pid = os.fork()
if pid == 0:
    assert not trace.active()
    for _ in range(10):
        with trace.span("in_child"):
            pass
    sys.exit(0)          # atexit runs in the child
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
assert not os.path.exists(path), "the child wrote the parent's trace"
for _ in range(500):
    with trace.span("after_fork"):
        pass
print(trace.stop())
"""
    (out,) = wait_ok([run_py(code, tmp_path)])
    path = out.strip().splitlines()[-1]
    names = [e.get("name") for e in json.load(open(path))["traceEvents"]]
    assert names.count("before_fork") == 4
    assert names.count("after_fork") == 500
    assert names.count("in_child") == 0
