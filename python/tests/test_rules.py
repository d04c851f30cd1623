"""What ranktune.autotune asks the Rust crates: bucketing, strategy names
and their default, the checksum and fingerprint (crates/py/src/rules.rs)."""

import re

import pytest

import ranktune
from ranktune import _ranktune


def test_buckets_are_the_rust_tuners_rules():
    assert _ranktune.Buckets("pow2")((0, 1, 5, 64, 1000, -3)) == (1, 1, 4, 64, 512, 1)
    assert _ranktune.Buckets("exact")((0, 7, 1000)) == (0, 7, 1000)
    floor = _ranktune.Buckets([64, 8, 512, 8])
    assert floor((1, 8, 63, 64, 10_000)) == (8, 8, 8, 64, 512)
    for bad in ("pow3", [], [1.5], {"a": 1}, None):
        with pytest.raises(ValueError, match="use \"pow2\""):
            _ranktune.Buckets(bad)


def test_strategy_names_and_default_come_from_rust(monkeypatch):
    assert _ranktune.STRATEGIES == ("independent", "broadcast", "merge", "parallel")
    assert _ranktune.DEFAULT_STRATEGY == "independent"
    monkeypatch.delenv("RANKTUNE_STRATEGY", raising=False)
    assert _ranktune.tune_strategy(None) == ("independent", False)
    assert _ranktune.tune_strategy("merge") == ("merge", True)
    monkeypatch.setenv("RANKTUNE_STRATEGY", "broadcast")
    assert _ranktune.tune_strategy(None) == ("broadcast", True)
    with pytest.raises(ValueError, match=r"strategy='fastest': use one of independent, broadcast"):
        _ranktune.tune_strategy("fastest")


def test_checksum_and_fingerprint_are_the_rust_ones(tmp_path):
    f = ranktune.autotune("x", {"a": abs, "b": (lambda n, tactic: n, [1, (2, "y")])}, key=lambda n: n)
    assert f.tuner._checksum == _ranktune.tune_checksum("x", [("a", [None]), ("b", [1, [2, "y"]])])
    assert len(f.tuner._checksum) == 16
    assert _ranktune.tune_checksum("y", [("a", [None])]) != _ranktune.tune_checksum("x", [("a", [None])])
    p = tmp_path / "tune.json"
    g = ranktune.autotune("x", {"a": abs, "b": abs}, key=lambda n: n, cache=str(p))
    with ranktune.tuning():
        g(3)
    (e,) = ranktune.Cache(p).entries()
    assert e["fingerprint"] == _ranktune.PYTHON_FINGERPRINT == "python"
    assert e["checksum"] == g.tuner._checksum


def test_a_lost_worker_is_judged_by_the_rust_rule_on_the_shared_cases():
    """The cases crates/tune/tests/tune/lost_worker_rule.rs runs in Rust:
    Python's supervisor asks the same rule (isolation::reasons::classify)."""
    import json
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "crates", "testkit", "data", "rules", "lost_worker.json")
    with open(path) as f:
        cases = json.load(f)["cases"]
    assert len(cases) >= 9
    for c in cases:
        killed_for = tuple(c["killed_for"]) if c["killed_for"] is not None else None
        got = _ranktune.reason_classify(c["status"], c["max_rss"], killed_for, c["memory_limit"], c["stderr"])
        assert got == (c["kind"], c["reason"]), c


def test_what_the_environment_says_is_the_rust_rule_on_the_shared_cases(monkeypatch):
    """The cases crates/cli/tests/cli/environment_rules.rs runs in Rust: the
    cache (Cache.from_env), the collective (collective_choice) and the
    run's id (job_id), each asked of the one Rust rule."""
    import json
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "crates", "testkit", "data", "rules", "environment.json")
    with open(path) as f:
        doc = json.load(f)
    assert len(doc["cases"]) >= 14
    for c in doc["cases"]:
        for name in doc["vars"]:
            monkeypatch.delenv(name, raising=False)
        for name, value in c["env"].items():
            monkeypatch.setenv(name, value)
        want = c["cache"]
        if isinstance(want, dict):
            with pytest.raises(ValueError, match=re.escape(want["error"])):
                ranktune.Cache.from_env()
        else:
            got = ranktune.Cache.from_env()
            assert (got.location if got is not None else None) == want, c
        want = c["collective"]
        if isinstance(want, dict):
            with pytest.raises(ValueError, match=re.escape(want["error"])):
                _ranktune.collective_choice()
        else:
            assert _ranktune.collective_choice() == want, c
        assert _ranktune.job_id() == c["job_id"], c


def test_the_miss_dispatch_is_the_rust_rule_on_the_shared_cases(tmp_path):
    """The cases crates/tune/tests/tune/miss_rule.rs runs in Rust, asked of
    the one rule (ranktune_tune::miss_action); and a real op's dispatch in
    each state Python can reach follows it."""
    import json
    import os
    import warnings

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "crates", "testkit", "data", "rules", "miss.json")
    with open(path) as f:
        cases = json.load(f)["cases"]
    assert len(cases) == 12
    for c in cases:
        assert _ranktune.miss_rule(c["found"], c["tuning"]) == c["action"], c
    # What TunedOp.dispatch answers for each of the rule's actions.
    python = {"hit": "hit", "validate": "check", "tune": "tune", "fallback_warn": "fallback", "fallback": "fallback"}
    cache = ranktune.Cache(tmp_path / "t.json")
    f = ranktune.autotune("m", {"a": abs, "b": abs}, key=lambda n: n, cache=cache, validate=True)
    core = f.tuner._core
    for tuning in (False, True):  # nothing
        assert core.dispatch((4,), tuning, 1) == (python[_ranktune.miss_rule("nothing", tuning)], 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(3)  # answered with the fallback: "fallback" from now on
    assert core.dispatch((2,), False, 1)[0] == python[_ranktune.miss_rule("fallback", False)]
    assert core.dispatch((2,), True, 1)[0] == python[_ranktune.miss_rule("fallback", True)]
    with ranktune.tuning():
        f(8)
    assert core.dispatch((8,), False, 1)[0] == python[_ranktune.miss_rule("hit", False)]
    g = ranktune.autotune("m", {"a": abs, "b": abs}, key=lambda n: n, cache=cache, validate=True)
    assert g.tuner._core.dispatch((8,), False, 1)[0] == python[_ranktune.miss_rule("unchecked", False)]
    h = ranktune.autotune("m", {"a": abs, "b": abs}, key=lambda n: n, cache=cache, strategy="merge")
    assert _ranktune.miss_rule("hit_confirm", True) == "tune_confirm"
    assert h.tuner._core.dispatch((8,), True, 1)[0] == "together"  # the ranks confirm it
    assert h.tuner._core.dispatch((8,), False, 1)[0] == python[_ranktune.miss_rule("hit_confirm", False)]
