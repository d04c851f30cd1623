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
t0 = time.monotonic()
with ranktune.tuning(save_every=sys.argv[2]) as s:
    for i in range(int(sys.argv[3])):
        f(2 ** i)
        print(json.dumps({"bucket": 2 ** i, "saved": s.saved, "policy": s.policy,
                          "saves": s.saves, "save_seconds": s.save_seconds,
                          "t": time.monotonic() - t0}), flush=True)
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
    # it: a save costs 5-40 ms (more on a loaded machine), a bucket ~0.1 s.
    # Killed two buckets after the second save -- or after the last bucket,
    # where saves are slow enough that auto made no second one in ~4 s.
    seen = kill_after(cache, "auto", saved=2)
    assert seen[0]["saved"] == 1, "the first choice is saved at once"
    last = seen[-1]
    reported = last["saved"]
    assert reported >= 2 or len(seen) == BUCKETS, seen
    # What auto costs: about 1/21 of the time, and the first save at once.
    assert last["save_seconds"] <= 0.25 * last["t"] + seen[0]["save_seconds"], last
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
    with ranktune.tuning(save_every=1.0) as s:
        f(1)
        assert s.saved == 1, "the first at once"
        f(2)
        f(4)  # two buckets of two no-op candidates: well within the second
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


def test_the_policy_is_the_rust_tuners_with_its_words():
    # One implementation: the sentence is the tuner's (`ranktune tune
    # --save-every`), and so is what parses ("1_000" is Python's float
    # syntax, not the tuner's).
    for bad in ("1_000", " 30s", "every"):
        with pytest.raises(ValueError) as e:
            with ranktune.tuning(save_every=bad):
                pass
        assert str(e.value).endswith("(0: after every bucket)"), str(e.value)
        assert str(e.value).startswith(f"save_every={json.dumps(bad)} is not a save policy")
    with ranktune.tuning(save_every="2.5") as s:
        assert (s.policy, s.interval) == ("every", 2.5)
    with ranktune.tuning(save_every=1e30) as s:
        assert s.policy == "every"


def lock_held(path):
    """Holds the cache's lock on a descriptor of its own (every save of
    this process then waits for it); returns the descriptor."""
    held = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    return held


def test_a_failed_save_is_not_retried_at_every_bucket(tmp_path, monkeypatch):
    # A save that timed out on the lock is tried again no sooner than 20 x
    # what it cost (at least 1 s): the buckets after it do not each wait
    # for the lock again.
    monkeypatch.setenv("RANKTUNE_LOCK_TIMEOUT", "0.3")
    cache = ranktune.Cache(tmp_path / "t.json")
    held = lock_held(tmp_path / "t.json")
    f = ranktune.autotune("d", {"a": lambda n: n, "b": lambda n: n}, key=lambda n: n,
                          cache=cache, warmup=1, samples=2)
    try:
        with pytest.warns(RuntimeWarning, match="saving tuned choices failed") as w:
            with ranktune.tuning(save_every=0) as s:
                t0 = time.monotonic()
                for i in range(6):
                    f(2 ** i)
                spent = time.monotonic() - t0
                fcntl.flock(held, fcntl.LOCK_UN)
                assert (s.saved, s.pending, s.failed_saves) == (0, 6, 1)
    finally:
        os.close(held)
    failed = [x for x in w if "saving tuned choices failed" in str(x.message)]
    assert len(failed) == 1, [str(x.message) for x in failed]
    assert spent < 3.0, spent  # one 0.3 s wait, not six
    assert s.saved == 6 and len(cache.entries()) == 6, "the end saves them"


# A tuning process whose deferred save waits for the cache's lock (held
# by the test) and fails: a SIGTERM then must save and exit, never wait
# for the deferred save's turn.
SIGTERM_DURING_DEFERRED = """
import os, sys, time, ranktune
lock = sys.argv[1] + ".lock"
f = ranktune.autotune("d", {"a": lambda n: n, "b": lambda n: n}, key=lambda n: n,
                      cache=sys.argv[1], warmup=1, samples=2)

def saving():
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == lock:
                return True
        except OSError:
            pass
    return False

with ranktune.tuning(save_every=1) as s:
    f(1)
    f(2)  # pending; the deferred save is due in 1 s
    print("pending", flush=True)
    while not saving():  # the deferred save waits for the lock
        time.sleep(0.005)
    print("holding", flush=True)
    time.sleep(30)
"""


def fds_of(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


def test_sigterm_while_a_deferred_save_waits_saves_and_exits(tmp_path):
    path = tmp_path / "t.json"
    p = run_py(SIGTERM_DURING_DEFERRED, path, env={"RANKTUNE_LOCK_TIMEOUT": "1"})
    assert p.stdout.readline().strip() == "pending", p.stderr.read()
    held = lock_held(path)
    try:
        assert p.stdout.readline().strip() == "holding", p.stderr.read()
        time.sleep(1.5)  # the deferred save timed out, and waits to try again
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        os.close(held)
    p.send_signal(signal.SIGTERM)
    try:
        p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("the SIGTERM handler never returned (deadlock)")
    assert p.returncode == -signal.SIGTERM
    assert sorted(e["bucket"][0][0] for e in ranktune.Cache(path).entries()) == [1, 2]


# A save interrupted by Ctrl-C (its lock held, then timed out): the
# choice stays pending and the save at the end writes it.
INTERRUPTED_SAVE = """
import signal, sys, ranktune
# Python's own SIGINT handling: a job started in the background inherits
# SIGINT ignored, and Python then raises no KeyboardInterrupt.
signal.signal(signal.SIGINT, signal.default_int_handler)
f = ranktune.autotune("d", {"a": lambda n: n, "b": lambda n: n}, key=lambda n: n,
                      cache=sys.argv[1], warmup=0, samples=1)
with ranktune.tuning():
    print("tuning", flush=True)
    f(1)  # saved at once: waits for the lock
"""


def test_a_keyboard_interrupt_during_a_save_loses_nothing(tmp_path):
    path = tmp_path / "t.json"
    held = lock_held(path)
    try:
        p = run_py(INTERRUPTED_SAVE, path, env={"RANKTUNE_LOCK_TIMEOUT": "2"})
        assert p.stdout.readline().strip() == "tuning", p.stderr.read()
        lock = f"{path}.lock"
        deadline = time.monotonic() + 30
        while lock not in fds_of(p.pid):  # the save waits for the lock
            assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        time.sleep(2.5)  # its first save times out; the end's waits
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        os.close(held)
    _, err = p.communicate(timeout=30)
    assert "KeyboardInterrupt" in err, err
    assert [e["bucket"][0][0] for e in ranktune.Cache(path).entries()] == [1], err


def test_a_deferred_save_waits_for_the_measurement_in_progress(tmp_path):
    # A measurement that spans the moment a deferred save falls due: the
    # save waits until it ends (no save skews its samples).
    cache = ranktune.Cache(tmp_path / "t.json")
    seen = []

    def slow(n):
        seen.append(s.saves)
        time.sleep(0.05)
        return n

    f = ranktune.autotune("d", {"a": lambda n: n, "b": lambda n: n}, key=lambda n: n,
                          cache=cache, warmup=1, samples=2)
    g = ranktune.autotune("g", {"slow": slow, "slow_too": slow}, key=lambda n: n,
                          cache=cache, warmup=1, samples=4)
    with ranktune.tuning(save_every=0.1) as s:
        f(1)  # saved at once
        f(2)  # pending: the deferred save is due 0.1 s after the first save
        g(1)  # measures for ~0.5 s, then runs the choice once
        measured = seen[:-1]
        assert len(measured) >= 10 and set(measured) == {1}, seen
        assert seen[-1] == s.saves == 2, "saved once the bucket was decided"
