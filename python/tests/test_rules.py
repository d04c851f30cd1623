"""What ranktune.autotune asks the Rust crates: bucketing, strategy names
and their default, the checksum and fingerprint (crates/py/src/rules.rs)."""

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
