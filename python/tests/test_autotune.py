import json
import os
import signal
import subprocess
import time

import pytest

import ranktune
from conftest import run_py, wait_ok


def make(cache, calls):
    def slow(n):
        calls.append("slow")
        time.sleep(0.02)
        return n * 2

    def fast(n):
        calls.append("fast")
        return n * 2

    return ranktune.autotune("double", {"slow": slow, "fast": fast}, key=lambda n: n, cache=cache)


def test_picks_the_faster_candidate_and_a_second_run_measures_nothing(tmp_path):
    p = tmp_path / "tune.json"
    calls = []
    f = make(ranktune.Cache(p), calls)
    with ranktune.tuning():
        assert f(100) == 200
    assert f.tuner.measured == 1
    calls.clear()
    assert f(120) == 240  # same pow2 bucket (64)
    assert calls == ["fast"]
    (e,) = ranktune.Cache(p).entries()
    assert (e["op"], e["runner"], e["bucket"], e["rank"]) == ("double", "fast", [[64]], 0)
    assert {c["runner"] for c in e["candidates"]} == {"slow", "fast"}
    # A second process: loads the choice, measures nothing, even in tuning mode.
    proc = run_py(
        """
        import sys, time, ranktune
        calls = []
        def slow(n): calls.append("slow"); time.sleep(0.002); return n
        def fast(n): calls.append("fast"); return n
        f = ranktune.autotune("double", {"slow": slow, "fast": fast}, key=lambda n: n, cache=sys.argv[1])
        with ranktune.tuning():
            f(70)
        print(f.tuner.measured, calls)
        """,
        p,
    )
    (out,) = wait_ok([proc])
    assert out.strip() == "0 ['fast']"


def test_miss_outside_tuning_runs_the_fallback_and_warns_once(tmp_path):
    calls = []
    f = make(ranktune.Cache(tmp_path / "t.json"), calls)
    with pytest.warns(RuntimeWarning, match="no tuned choice for double bucket \\[8\\]"):
        f(9)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(10)  # same bucket: no second warning
    assert calls == ["slow", "slow"] and f.tuner.measured == 0


def test_exception_inside_tuning_still_saves(tmp_path):
    p = tmp_path / "t.json"
    f = make(ranktune.Cache(p), [])
    with pytest.raises(KeyError):
        with ranktune.tuning():
            f(4)
            raise KeyError("boom")
    assert [e["runner"] for e in ranktune.Cache(p).entries()] == ["fast"]


def test_failing_candidate_is_isolated_and_tactics_are_tuned(tmp_path):
    def broken(n):
        raise ValueError("no kernel for this shape")

    def tiled(n, tactic):
        time.sleep(0.01 * tactic)
        return n + tactic

    p = tmp_path / "t.json"
    f = ranktune.autotune("op", {"broken": broken, "tiled": (tiled, [3, 0, 2])}, key=lambda n: n,
                          cache=p, warmup=1, samples=3)
    with ranktune.tuning():
        assert f(5) == 5  # tactic 0 is fastest
    (e,) = ranktune.Cache(p).entries()
    assert (e["runner"], e["tactic"]) == ("tiled", 0)
    errs = [c for c in e["candidates"] if "error" in c]
    assert errs and "ValueError: no kernel for this shape" in errs[0]["error"]


def test_user_timer_decides(tmp_path):
    # Both run equally fast on the wall clock; the user's timer says "b" is faster.
    times = {"a": 0.004, "b": 0.001}
    current = {}

    def a(n):
        current["t"] = times["a"]

    def b(n):
        current["t"] = times["b"]

    def user_timer(run):
        run()
        return current["t"]

    f = ranktune.autotune("t", {"a": a, "b": b}, key=lambda n: n, timer=user_timer)
    with ranktune.tuning():
        f(1)
    assert f.tuner._choices[(1,)].__name__ == "b"


def test_python_choices_are_readable_by_the_cli(tmp_path, cli):
    p = tmp_path / "t.json"
    f = make(ranktune.Cache(p), [])
    with ranktune.tuning():
        f(3)
    shown = json.loads(subprocess.run([cli, "cache", "show", "--json", str(p)], check=True,
                                      capture_output=True, text=True).stdout)
    assert [(e["op"], e["runner"]) for e in shown["entries"]] == [("double", "fast")]
    check = subprocess.run([cli, "cache", "check", str(p)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


def test_sigterm_inside_tuning_saves_then_dies_by_the_signal(tmp_path):
    p = tmp_path / "t.json"
    proc = run_py(
        """
        import sys, time, ranktune
        f = ranktune.autotune("op", {"a": lambda n: n, "b": lambda n: n}, key=lambda n: n, cache=sys.argv[1])
        with ranktune.tuning():
            f(4)
            print("tuned", flush=True)
            while True:
                time.sleep(0.01)
        """,
        p,
    )
    assert proc.stdout.readline().strip() == "tuned"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM
    assert [e["op"] for e in ranktune.Cache(p).entries()] == ["op"]


def test_fixed_parameters_get_their_own_entry_and_every_call_form_works(tmp_path):
    """Where ``key`` and the candidates take a fixed list of positional
    parameters, the entry is generated with exactly those (no argument tuple
    or dict per call); keyword calls by ``key``'s names, parameters named
    like the entry's own locals, unhashable keys and a general signature
    all still dispatch to the tuned choice."""
    cache = ranktune.Cache(tmp_path / "t.json")

    def slow(k, fn):
        time.sleep(0.02)
        return ("slow", k, fn)

    def fast(k, fn):
        return ("fast", k, fn)

    f = ranktune.autotune("pair", {"slow": slow, "fast": fast}, key=lambda k, fn: (k, fn), cache=cache)
    assert f.__code__.co_varnames[:2] == ("k", "fn"), "generated with key's parameters"
    with ranktune.tuning():
        assert f(8, 16) == ("fast", 8, 16)
    assert f(8, 16) == ("fast", 8, 16)  # a hit through the hot table
    assert f(k=8, fn=16) == ("fast", 8, 16)
    with pytest.raises(TypeError):
        f(8)  # the candidates' arity, as before

    # An unhashable key works (never memoized) on both entries.
    g = ranktune.autotune("listkey", {"a": lambda n: n + 1}, key=lambda n: [n], cache=cache)
    assert g.__code__.co_argcount == 1
    with ranktune.tuning():
        assert g(3) == 4
    assert g(3) == 4

    # A key taking **kwargs: the general entry, keywords passed through.
    h = ranktune.autotune(
        "kw", {"a": lambda n, scale=1: n * scale}, key=lambda n, **kw: n, cache=cache
    )
    assert h.__code__.co_argcount == 0, "general entry"
    with ranktune.tuning():
        assert h(4, scale=3) == 12
    assert h(4, scale=3) == 12
    assert h(4) == 4


def test_the_miss_warning_points_at_the_callers_line(tmp_path):
    f = ranktune.autotune("where", {"a": lambda n: n}, key=lambda n: n, cache=ranktune.Cache(tmp_path / "t.json"))
    g = ranktune.autotune("where2", {"a": lambda n, **kw: n}, key=lambda n, **kw: n,
                          cache=ranktune.Cache(tmp_path / "t.json"))
    for fn in (f, g):  # the generated entry and the general one
        with pytest.warns(RuntimeWarning, match="no tuned choice") as rec:
            fn(3)
        assert rec[0].filename == __file__, rec[0].filename


@pytest.mark.parametrize("entry", ["fixed", "general"])
def test_errors_of_key_and_candidate_propagate_once_and_unchained(tmp_path, entry):
    """The generated entry is one expression in a ``try`` whose KeyError and
    TypeError mean a miss only when they come from its look-up: the same
    errors raised by ``key`` or by the chosen candidate reach the caller as
    they were, the candidate runs once, and a real miss after hits still
    takes the slow path. Both entries: the one generated for fixed
    parameters, and the general one (a key taking ``**kwargs``)."""
    general = entry == "general"

    def keyed(fn):
        return (lambda n, **kw: fn(n)) if general else fn

    cache = ranktune.Cache(tmp_path / "t.json")
    calls = []
    fail = []

    def lookup(n):
        calls.append(n)
        if fail:
            raise KeyError("the candidate's own")
        return n

    f = ranktune.autotune("errs", {"a": lookup}, key=keyed(lambda n: n), cache=cache)
    assert f.__code__.co_argcount == (0 if general else 1)
    with ranktune.tuning():
        assert f(1) == 1
    assert f(1) == 1 and f(1) == 1  # hits through the hot table
    fail.append(True)
    calls.clear()
    with pytest.raises(KeyError, match="the candidate's own") as hit_err:
        f(1)  # a hit whose candidate raises KeyError
    assert calls == [1], "the candidate ran once, not again through the slow path"
    assert hit_err.value.__context__ is None
    calls.clear()
    with pytest.warns(RuntimeWarning, match="no tuned choice"):
        with pytest.raises(KeyError, match="the candidate's own") as miss_err:
            f(2)  # a miss: the fallback runs once and raises its own KeyError
    assert calls == [2]
    assert miss_err.value.__context__ is None, "not chained to the look-up's KeyError"

    def bad_key(n):
        if n < 0:
            raise TypeError("negative size")
        return n

    g = ranktune.autotune("errs2", {"a": lambda n: n}, key=keyed(bad_key), cache=cache)
    with ranktune.tuning():
        g(4)
    with pytest.raises(TypeError, match="negative size") as key_err:
        g(-1)
    assert key_err.value.__context__ is None

    def typed(n):
        calls.append(n)
        if n == 5:
            raise TypeError("candidate says no")
        return n

    h = ranktune.autotune("errs3", {"a": typed}, key=keyed(lambda n: n), cache=cache)
    with ranktune.tuning():
        h(4)
    for _ in range(2):  # bucket 4's choice, memoized for key 5, then a hot hit
        calls.clear()
        with pytest.raises(TypeError, match="candidate says no"):
            h(5)
        assert calls == [5]


def test_a_malformed_rank_variable_is_an_error_never_rank_0(tmp_path, monkeypatch):
    # The entry would go into rank 0's section: the launcher's variable is
    # named instead, and nothing is saved.
    path = tmp_path / "t.json"
    f = ranktune.autotune("r", {"a": abs, "b": abs}, key=lambda n: n, cache=ranktune.Cache(path))
    monkeypatch.setenv("RANK", "three")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ranktune.Error, match="RANK"):
        with ranktune.tuning():
            f(4)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert not path.exists() or ranktune.Cache(path).entries() == []
