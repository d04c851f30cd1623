"""The blocklist from Python: known-bad candidates are not run by a tuning
measure (they count as failed, with their reason) unless retry_failed;
one retried that works leaves the list; validate= checks the first use of
a cached choice, falls back with one warning and marks it bad; the records
are listed by Cache.blocklist(), `ranktune cache show --json` and check()."""

import json
import subprocess
import time
import warnings

import pytest

import ranktune
from ranktune import _ranktune


def make(cache, calls, fast=None, **kw):
    def slow(n):
        calls.append("slow")
        time.sleep(0.01)
        return n * 2

    def quick(n):
        calls.append("fast")
        return n * 2

    return ranktune.autotune(
        "double", {"slow": slow, "fast": fast or quick}, key=lambda n: n, cache=cache, **kw
    )


def block_fast(cache, bucket=64, kind="crash"):
    _ranktune.tune_block(cache, "double", "fast", None, [bucket], kind, "crashed: SIGSEGV", 0)


def test_a_known_bad_candidate_is_not_run_and_counts_as_failed(tmp_path):
    cache = ranktune.Cache(tmp_path / "t.json")
    block_fast(cache)
    calls = []
    f = make(cache, calls)
    with ranktune.tuning(), pytest.warns(RuntimeWarning, match="not measuring known-bad candidates") as w:
        assert f(100) == 200  # bucket 64: fast is blocked
        assert f(40) == 80  # bucket 32: smaller, measured
    assert {x.filename for x in w if "known-bad" in str(x.message)} == {__file__}, "at the caller's line"
    assert f.tuner.skipped == [("fast", None, "crash: crashed: SIGSEGV")]
    entries = {e["bucket"][0][0]: e for e in cache.entries()}
    assert entries[64]["runner"] == "slow"
    (failed,) = [c for c in entries[64]["candidates"] if "error" in c]
    assert "known-bad" in failed["error"]
    assert entries[32]["runner"] == "fast"
    (rec,) = cache.blocklist()
    assert (rec["runner"], rec["kind"], rec["bucket"], rec["here"]) == ("fast", "crash", [[64]], True)
    assert any("known-bad tactic: double/fast" in line for line in cache.check())


def test_retry_failed_runs_it_and_a_working_one_leaves_the_blocklist(tmp_path, monkeypatch):
    cache = ranktune.Cache(tmp_path / "t.json")
    block_fast(cache)
    calls = []
    f = make(cache, calls, retry_failed=True)
    with ranktune.tuning():
        f(100)
    assert "fast" in calls and f.tuner.skipped == []
    assert cache.blocklist() == []
    # The environment variable does the same; a bad value is refused.
    block_fast(cache)
    monkeypatch.setenv("RANKTUNE_RETRY_FAILED", "1")
    calls = []
    g = make(cache, calls)
    with ranktune.tuning():
        g(300)  # bucket 256: blocked by the record at 64
    assert "fast" in calls and cache.blocklist() == []
    monkeypatch.setenv("RANKTUNE_RETRY_FAILED", "perhaps")
    with pytest.raises(ValueError, match="RANKTUNE_RETRY_FAILED"):
        make(cache, [])


def test_a_cached_choice_that_fails_validation_falls_back_once_and_is_tuned_again(tmp_path):
    path = tmp_path / "t.json"
    calls = []
    f = make(ranktune.Cache(path), calls)
    with ranktune.tuning():
        f(100)
    assert [e["runner"] for e in ranktune.Cache(path).entries()] == ["fast"]

    # A new process (a fresh autotune) whose `fast` now computes wrongly.
    def wrong(n):
        calls.append("wrong")
        return n * 3

    calls.clear()
    g = make(ranktune.Cache(path), calls, fast=wrong, validate=lambda out, ref: out == ref)
    with pytest.warns(RuntimeWarning, match="failed its validation"):
        assert g(100) == 200, "the fallback's result"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(5):
            assert g(100) == 200
    assert calls.count("wrong") == 1, calls
    (rec,) = ranktune.Cache(path).blocklist()
    assert (rec["runner"], rec["kind"]) == ("fast", "validation")
    assert "returned False" in rec["message"]
    # The next tuning run tunes the bucket again, without it.
    calls.clear()
    h = make(ranktune.Cache(path), calls, fast=wrong)
    with ranktune.tuning(), pytest.warns(RuntimeWarning, match="fast: validation: validate"):
        h(100)
    assert h.tuner.measured == 1 and "wrong" not in calls


def test_a_cached_choice_that_passes_is_checked_once(tmp_path):
    path = tmp_path / "t.json"
    calls = []
    f = make(ranktune.Cache(path), calls)
    with ranktune.tuning():
        f(100)
    calls.clear()
    g = make(ranktune.Cache(path), calls, validate=lambda out, ref: out == ref)
    for _ in range(4):
        assert g(100) == 200
    assert calls == ["fast", "slow", "fast", "fast", "fast"], "one reference run, on first use"
    assert ranktune.Cache(path).blocklist() == []


def test_validate_true_only_requires_that_it_runs(tmp_path):
    path = tmp_path / "t.json"
    f = make(ranktune.Cache(path), [])
    with ranktune.tuning():
        f(100)

    def broken(n):
        raise RuntimeError("launch failed")

    g = make(ranktune.Cache(path), [], fast=broken, validate=True)
    with pytest.warns(RuntimeWarning, match="it raised RuntimeError: launch failed"):
        assert g(100) == 200
    with pytest.raises(ValueError, match="validate="):
        make(ranktune.Cache(path), [], validate="yes")


def test_the_cli_lists_what_python_blocked(tmp_path, cli):
    path = tmp_path / "t.json"
    cache = ranktune.Cache(path)
    block_fast(cache, kind="timeout")
    out = subprocess.run([cli, "cache", "show", str(path), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    (rec,) = json.loads(out.stdout)["blocklist"]
    assert (rec["op"], rec["kind"], rec["fingerprint"]) == ("double", "timeout", "python")
    check = subprocess.run([cli, "cache", "check", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    assert "known-bad tactic: double/fast" in check.stdout
