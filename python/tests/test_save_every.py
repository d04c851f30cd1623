"""Durable progress: ``tuning(save_every=...)`` saves new choices while
tuning goes on, so a SIGKILLed tuning process keeps every choice it
reported as saved, and a rerun measures only the rest; ``"end"`` keeps
today's save-on-exit; a deferred save catches a choice no other bucket
follows; bad values name the argument or the variable."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import ranktune
from conftest import run_py

# A tuning process: tunes `double` for BUCKETS buckets (each measure takes
# tens of ms), printing after each call what its session says is saved.
TUNER = """
import json, sys, time, ranktune
sleep = lambda n: time.sleep(0.02) or n * 2
f = ranktune.autotune("double", {"slow": sleep, "fast": lambda n: n * 2}, key=lambda n: n,
                      cache=sys.argv[1], warmup=1, samples=3)
with ranktune.tuning(save_every=sys.argv[2]) as s:
    for i in range(int(sys.argv[3])):
        f(2 ** i)
        print(json.dumps({"bucket": 2 ** i, "saved": s.saved, "policy": s.policy,
                          "saves": s.saves, "save_seconds": s.save_seconds}), flush=True)
    if sys.argv[4] == "hang":
        time.sleep(600)  # until SIGKILLed
print(json.dumps({"measured": f.tuner.measured}), flush=True)
"""

BUCKETS = 40


def kill_after(cache, policy, lines=None, saved=None):
    """Runs the tuner, reads its lines until it printed ``lines`` of them
    or reported ``saved`` choices saved (and then two more) -- or all its
    buckets --, and SIGKILLs it."""
    p = run_py(TUNER, cache, policy, BUCKETS, "hang")
    seen = []
    extra = None
    while len(seen) < BUCKETS:
        line = p.stdout.readline()
        assert line, p.stderr.read()
        seen.append(json.loads(line))
        if lines is not None and len(seen) == lines:
            break
        if saved is not None:
            if extra is None and seen[-1]["saved"] >= saved:
                extra = 2
            elif extra is not None:
                extra -= 1
            if extra == 0:
                break
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)
    assert p.returncode == -signal.SIGKILL
    return seen


def test_a_sigkilled_tuning_process_keeps_every_choice_it_reported_saved(tmp_path):
    cache = tmp_path / "t.json"
    # Auto saves a batch once 20 x the last save's cost has passed since
    # it: on this loaded machine a save costs 5-40 ms, a bucket ~0.1 s.
    seen = kill_after(cache, "auto", saved=3)
    assert seen[0]["saved"] == 1, "the first choice is saved at once"
    reported = seen[-1]["saved"]
    assert reported >= 3 and len(seen) < BUCKETS, seen
    stored = sorted(e["bucket"][0][0] for e in ranktune.Cache(cache).entries())
    assert stored[:reported] == [2 ** i for i in range(reported)], (stored, seen)
    # A rerun measures only what is not in the cache.
    out = subprocess.run([sys.executable, "-c", TUNER, cache, "auto", str(BUCKETS), "no"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    measured = json.loads(out.stdout.strip().splitlines()[-1])["measured"]
    assert measured == BUCKETS - len(stored)
    assert len(ranktune.Cache(cache).entries()) == BUCKETS


def test_save_every_end_saves_only_on_exit(tmp_path):
    cache = tmp_path / "t.json"
    seen = kill_after(cache, "end", 4)
    assert [s["saved"] for s in seen] == [0, 0, 0, 0] and seen[0]["policy"] == "end"
    assert not cache.exists() or ranktune.Cache(cache).entries() == []


def test_a_number_of_seconds_and_a_deferred_save(tmp_path):
    cache = ranktune.Cache(tmp_path / "t.json")
    f = ranktune.autotune("d", {"a": lambda n: n, "b": lambda n: n}, key=lambda n: n,
                          cache=cache, warmup=1, samples=2)
    with ranktune.tuning(save_every=0.4) as s:
        f(1)
        assert s.saved == 1, "the first at once"
        f(2)
        f(4)
        assert (s.saved, s.pending) == (1, 2), "within the interval: pending"
        deadline = time.monotonic() + 10
        while s.saved < 3 and time.monotonic() < deadline:
            time.sleep(0.02)  # no other choice comes: the deferred save does it
        assert (s.saved, s.pending) == (3, 0)
        assert len(cache.entries()) == 3
        assert s.saves == 2 and s.save_seconds > 0
    with ranktune.tuning(save_every=0) as s:
        f(8)
        f(16)
        assert s.saved == 2 and s.saves == 2, "0: after every choice"


def test_the_environment_and_bad_values(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKTUNE_SAVE_EVERY", "end")
    with ranktune.tuning() as s:
        assert s.policy == "end"
    monkeypatch.setenv("RANKTUNE_SAVE_EVERY", "30")
    with ranktune.tuning() as s:
        assert (s.policy, s.interval) == ("every", 30.0)
    with ranktune.tuning(save_every="auto") as s:
        assert s.policy == "auto", "the argument wins"
    monkeypatch.setenv("RANKTUNE_SAVE_EVERY", "soon")
    with pytest.raises(ValueError, match=r'^RANKTUNE_SAVE_EVERY="soon" is not a save policy; give auto'):
        with ranktune.tuning():
            pass
    monkeypatch.delenv("RANKTUNE_SAVE_EVERY")
    for bad in (-1, "never", float("nan"), True):
        with pytest.raises(ValueError, match=r"^save_every=.* is not a save policy.*e\.g\. 30"):
            with ranktune.tuning(save_every=bad):
                pass
    assert not ranktune.is_tuning()


def test_a_save_that_fails_while_tuning_warns_keeps_the_choices_and_the_last_one_raises(
    tmp_path, monkeypatch
):
    # The cache's lock held (here, by this process on its own descriptor):
    # every save times out.
    monkeypatch.setenv("RANKTUNE_LOCK_TIMEOUT", "0.2")
    cache = ranktune.Cache(tmp_path / "t.json")
    held = os.open(tmp_path / "t.json.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    f = ranktune.autotune("d", {"a": lambda n: n, "b": lambda n: n}, key=lambda n: n,
                          cache=cache, warmup=1, samples=2)
    try:
        with pytest.raises(ranktune.LockTimeout):
            with pytest.warns(RuntimeWarning, match="saving tuned choices failed"):
                with ranktune.tuning() as s:
                    f(1)  # due at once: the save fails, the choice is kept
                    assert (s.saved, s.pending) == (0, 1)
                    f(2)
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        os.close(held)
    # Kept through the failed save at the end, too: saved by the next one.
    with ranktune.tuning():
        pass
    assert sorted(e["bucket"][0][0] for e in cache.entries()) == [1, 2]
