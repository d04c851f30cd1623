"""A cache written by the Python package before it asked the Rust tuner for
the candidate-set checksum (0.1: a SHA-256 of the candidates' reprs) keeps
loading: its entries are hits, not stale, not re-tuned.

data/cache_python_0_1.json was written by that package (python/tests/
data/README.md says how): op ``legacy_op``, candidates ``a``, ``b`` with
tactics 16 and (1, "x"), ``c``, tuned at 3, 100 and 1000 (buckets 2, 64,
512) into ``rank_0``.
"""

import os
import warnings

import ranktune

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cache_python_0_1.json")


def _rehomed(tmp_path):
    """The fixture's entries in a cache of this machine: they were measured
    on the machine that wrote them (their `env`), which would make them
    stale anywhere else; what is tested here is their checksum."""
    rows = ranktune.Cache(FIXTURE).entries()
    assert rows and all(r["checksum"] for r in rows)
    for r in rows:
        del r["env"]
    path = tmp_path / "tune.json"
    ranktune.Cache(path).save(rows)
    return path, rows


def _legacy_op(cache, ran):
    def a(n):
        ran.append(("a", None))
        return n

    def b(n, tactic):
        ran.append(("b", tactic))
        return n

    def c(n):
        ran.append(("c", None))
        return n

    return ranktune.autotune(
        "legacy_op", {"a": a, "b": (b, [16, (1, "x")]), "c": c}, key=lambda n: n, cache=cache
    )


def _stored(t):
    return tuple(_stored(x) for x in t) if isinstance(t, list) else t


def test_a_cache_written_by_the_0_1_package_still_hits(tmp_path):
    path, rows = _rehomed(tmp_path)
    ran = []
    f = _legacy_op(str(path), ran)
    # The entries carry the old checksum, not the one written today.
    assert {r["checksum"] for r in rows} == {f.tuner._legacy_checksum}
    assert f.tuner._checksum != f.tuner._legacy_checksum
    by_bucket = {r["bucket"][0][0]: (r["runner"], _stored(r["tactic"])) for r in rows}
    assert sorted(by_bucket) == [2, 64, 512]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a miss would warn
        for n in (3, 100, 1000):
            f(n)
    assert ran == [by_bucket[2], by_bucket[64], by_bucket[512]]
    assert not any(e["stale"] for e in ranktune.Cache(path).entries())
    # In tuning mode too: nothing is measured again, nothing is rewritten.
    g = _legacy_op(str(path), [])
    with ranktune.tuning():
        for n in (2, 120, 600):
            g(n)
    assert g.tuner.measured == 0
    after = ranktune.Cache(path).entries()
    assert len(after) == 3 and {r["checksum"] for r in after} == {f.tuner._legacy_checksum}
