"""The record types of ``ranktune.records`` (what the API's dicts hold) are
held to what the Rust side returns: each is made by the real call and its
keys compared with the TypedDict's, both ways (issue 37: one name per
concept; ``test_stub.py`` does the same for the extension's names).
``Resolution``, a collective strategy's answer, needs ranks and is not
made here."""

import typing

import ranktune
import ranktune.trtllm
import trtllm_standin
from ranktune import _ranktune, records


def keys_match(record_type, value):
    """Every key the type requires is there, and nothing it does not name."""
    hints = typing.get_type_hints(record_type)
    required = set(getattr(record_type, "__required_keys__", hints))
    assert required <= set(value), f"{record_type.__name__}: missing {sorted(required - set(value))} in {value}"
    assert set(value) <= set(hints), f"{record_type.__name__}: unnamed {sorted(set(value) - set(hints))} in {value}"


def test_each_record_type_is_what_the_call_returns(tmp_path):
    keys_match(records.RankInfo, ranktune.rank_info())
    ok, bad = _ranktune.tune_measure(2, lambda i: [None, 1 / 0][i] if i else None, False, 1, 3)
    keys_match(records.Measured, ok)
    keys_match(records.Measured, bad)
    keys_match(records.Stats, ok)

    cache = ranktune.Cache(str(tmp_path / "tune.json"))
    f = ranktune.autotune("recs", {"a": abs, "b": (lambda n, tactic: abs(n), [1, 2])}, key=lambda n: n, cache=cache)
    with ranktune.tuning():
        f(-3)
    entry = cache.entries()[0]
    keys_match(records.Entry, entry)
    for c in entry["candidates"]:
        keys_match(records.Candidate, c)
        if "stats" in c:
            keys_match(records.Stats, c["stats"])

    other = ranktune.Cache(str(tmp_path / "other.json"))
    keys_match(records.SaveReport, other.save([{k: v for k, v in entry.items() if k not in ("stale",)}]))
    out = tmp_path / "trt.json"
    keys_match(records.ExportReport, cache.export(str(out), format="trtllm"))
    keys_match(records.ImportReport, ranktune.Cache(str(tmp_path / "back.json")).import_file(str(out)))

    o = ranktune.trtllm.patch(trtllm_standin.AutoTunerProfilingCache())
    o.cache = {("op", "R", "0", ((8,),)): (0, 3, 0.5)}
    keys_match(records.TrtllmSaveReport, ranktune.trtllm.save_cache(o, str(tmp_path / "t.json"), 0))
