"""Isolated measuring from Python, with real processes: candidates that
really segfault, abort, exit, hang and allocate without bound are each one
failed candidate with its reason, the tune completes and saves, the hard
failures are on the blocklist, and the next tune -- without isolation --
skips them (it would die otherwise) and says so. Forked and spawned
workers; a spawned one rebuilds torch tensors and numpy arrays from their
description; a candidate it cannot import is a clear error."""

import gc
import json
import os
import re
import sys
import types

import pytest

import isolate_ops as ops
import ranktune
from ranktune import _ranktune
from conftest import run_py, wait_ok

CRASHERS = {
    "segfault": ("crash", "crashed: SIGSEGV (signal 11)"),
    "abort": ("crash", "crashed: SIGABRT (signal 6)"),
    "exits": ("crash", "the worker exited with status 3"),
    # The time is what it took (more than the limit on a loaded machine).
    "hang": ("timeout", r"timed out after \d+\.\d s \(limit 1\.0 s\)"),
    "hoard": ("memory", "ran out of memory: limit 128 MiB (MemoryError)"),
}


def crashy(cache, isolate, names=CRASHERS):
    cands = {"double": ops.double, **{n: getattr(ops, n) for n in names},
             "raises": ops.raises, "double_too": ops.double_too}
    limits = {"candidate_timeout": 1, "candidate_memory": 128} if isolate != "off" else {}
    return ranktune.autotune("crashy", cands, key=lambda n: n, cache=cache, isolate=isolate,
                             warmup=1, samples=3, **limits)


def said(reason, text):
    """Whether ``text`` starts with ``reason`` (a regex for the time-out's,
    plain text for the others)."""
    if reason.startswith("timed out"):
        return re.match(reason, text) is not None
    return text.startswith(reason)


def errors_of(entry):
    return {c["runner"]: c.get("error") for c in entry["candidates"]}


def check_crashes_recorded(path, f, names):
    (entry,) = ranktune.Cache(path).entries()
    assert entry["runner"] in ("double", "double_too")
    errors = errors_of(entry)
    for name in names:
        kind, reason = CRASHERS[name]
        assert said(reason, errors[name]), (name, errors[name])
    assert errors["raises"] == "ValueError: bad tile", "an exception stays an error"
    assert errors["double"] is None and errors["double_too"] is None
    assert sorted((r, k) for _, r, _, k, _ in f.tuner.failures) == sorted(
        (n, CRASHERS[n][0]) for n in names)
    blocked = {r["runner"]: r for r in ranktune.Cache(path).blocklist()}
    assert sorted(blocked) == sorted(names), "every hard failure, and only those"
    for name in names:
        assert blocked[name]["kind"] == CRASHERS[name][0]
        assert said(CRASHERS[name][1], blocked[name]["message"])
        assert blocked[name]["bucket"] == [[64]]


def check_next_tune_skips_them(path, names):
    # Without isolation: running any of them would kill this process.
    g = crashy(ranktune.Cache(path), "off", names)
    with ranktune.tuning(), pytest.warns(RuntimeWarning, match="not measuring known-bad") as w:
        assert g(200) == 400  # bucket 128: the records at 64 cover it
    assert "crashed: SIGSEGV (signal 11)" in str(w[0].message)
    assert sorted(s[0] for s in g.tuner.skipped) == sorted(names)
    entry = [e for e in ranktune.Cache(path).entries() if e["bucket"] == [[128]]][0]
    for name in names:
        assert errors_of(entry)[name].startswith("skipped: a known-bad tactic (" + CRASHERS[name][0])


def test_fork_each_real_crash_is_one_failed_candidate_and_goes_on_the_blocklist(tmp_path):
    path = tmp_path / "t.json"
    f = crashy(ranktune.Cache(path), "fork")
    with ranktune.tuning():
        assert f(100) == 200
    check_crashes_recorded(path, f, CRASHERS)
    # A fresh worker after each hard failure (hoard's MemoryError is
    # answered by a worker that stays), reused otherwise.
    assert 4 <= f.tuner.worker_starts <= 6, f.tuner.worker_starts
    assert 0 < f.tuner.worker_start_seconds < 5
    check_next_tune_skips_them(path, CRASHERS)


def test_spawn_each_real_crash_is_one_failed_candidate(tmp_path):
    path = tmp_path / "t.json"
    names = ["segfault", "abort", "hang", "hoard"]
    f = crashy(ranktune.Cache(path), "spawn", names)
    with ranktune.tuning():
        assert f(100) == 200
    check_crashes_recorded(path, f, names)
    check_next_tune_skips_them(path, names)


def test_a_signal_sent_to_itself_is_a_crash_and_true_means_fork(tmp_path):
    path = tmp_path / "t.json"
    f = ranktune.autotune("selfkill", {"double": ops.double, "kill": ops.kill_segv},
                          key=lambda n: n, cache=ranktune.Cache(path), isolate=True)
    with ranktune.tuning():
        assert f(7) == 14
    assert f.tuner._isolation == "fork"
    assert errors_of(ranktune.Cache(path).entries()[0])["kill"] == "crashed: SIGSEGV (signal 11)"


def test_the_environment_turns_it_on_and_bad_values_name_what_to_give(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKTUNE_ISOLATE", "fork")
    monkeypatch.setenv("RANKTUNE_CANDIDATE_TIMEOUT", "1")
    f = ranktune.autotune("env", {"double": ops.double, "hang": ops.hang}, key=lambda n: n)
    with ranktune.tuning():
        assert f(3) == 6
    kind, why = f.tuner.failures[0][3:]
    assert kind == "timeout" and said(CRASHERS["hang"][1], why), why
    bad = [
        ({"RANKTUNE_ISOLATE": "maybe"}, {}, 'RANKTUNE_ISOLATE="maybe" is not an isolation mode; give off'),
        ({}, {"isolate": "always"}, 'isolate="always" is not an isolation mode; give off (or 0)'),
        ({"RANKTUNE_CANDIDATE_TIMEOUT": "soon"}, {"isolate": "fork"},
         'RANKTUNE_CANDIDATE_TIMEOUT="soon" is not a number of seconds; give e.g. 30 or 2.5'),
        ({}, {"isolate": "fork", "candidate_timeout": -1},
         'candidate_timeout="-1" is not a usable time; give a number of seconds above 0'),
        ({"RANKTUNE_CANDIDATE_MEMORY": "lots"}, {"isolate": "spawn"},
         'RANKTUNE_CANDIDATE_MEMORY="lots" is not a whole number of MiB; give e.g. 4096'),
        ({}, {"isolate": "fork", "candidate_memory": 0}, 'candidate_memory="0" is not a usable number of MiB; give one from 1'),
        ({}, {"isolate": "off", "candidate_timeout": 3}, "limit isolated workers; add isolate="),
    ]
    for env, kw, text in bad:
        for var in ("RANKTUNE_ISOLATE", "RANKTUNE_CANDIDATE_TIMEOUT", "RANKTUNE_CANDIDATE_MEMORY"):
            monkeypatch.delenv(var, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        with pytest.raises(ValueError) as e:
            ranktune.autotune("bad", {"double": ops.double}, key=lambda n: n, **kw)
        assert text in str(e.value), (text, str(e.value))


def test_a_bad_variable_reads_the_same_to_python_and_to_the_command(cli, tmp_path, monkeypatch):
    # One parser (ranktune_tune::isolation::settings): a job's variables
    # mean the same, and are refused in the same words, on both sides.
    import subprocess

    for env in ({"RANKTUNE_ISOLATE": "maybe"}, {"RANKTUNE_ISOLATE": "spawn", "RANKTUNE_CANDIDATE_TIMEOUT": "-1"},
                {"RANKTUNE_ISOLATE": "1", "RANKTUNE_CANDIDATE_MEMORY": "lots"}):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        with pytest.raises(ValueError) as e:
            ranktune.autotune("bad", {"double": ops.double}, key=lambda n: n)
        out = subprocess.run([cli, "tune", "--ops", "softmax", "--quick", "--max-tokens", "1",
                              "--cache", str(tmp_path / "c.json")],
                             capture_output=True, text=True, timeout=60, env=dict(os.environ))
        assert out.returncode == 2 and str(e.value) in out.stderr, (str(e.value), out.stderr)
        for k in env:
            monkeypatch.delenv(k)


def test_the_memory_line_is_the_cause_not_the_failed_report_of_it():
    memory_line = _ranktune.reason_memory_line
    # A native candidate under RUST_BACKTRACE: its backtrace could not allocate either.
    twice = "memory allocation of 67108864 bytes failed\nmemory allocation of 1308987 bytes failed\n"
    assert memory_line(twice) == "memory allocation of 67108864 bytes failed"
    assert memory_line("Traceback (most recent call last):\n  raise MemoryError\nMemoryError\n") == "MemoryError"
    assert memory_line("ValueError: no\n") is None


def test_the_time_limit_defaults_are_the_rust_tuners():
    lim = _ranktune.IsolationLimits(1)
    assert lim.timeout is None and lim.derived == (5.0, 50.0, 60.0)
    assert lim.timeout_for(None) == 60.0, "nothing of the bucket timed yet"
    assert lim.timeout_for(10.0) == 5.0, "the floor"
    assert lim.timeout_for(1e6) == 50.0, "50 x a 1 s reference"
    assert _ranktune.IsolationLimits(1, 2.5).timeout_for(1e9) == 2.5
    assert _ranktune.IsolationLimits(1, None, 64).memory == 64 << 20
    two = _ranktune.IsolationLimits(2).memory
    one = _ranktune.IsolationLimits(1).memory
    assert one is None or two <= one // 2 + (64 << 20)


def test_spawn_refuses_candidates_it_cannot_import_naming_them_and_the_fix():
    def local(n):
        return n

    cases = [
        ({"double": ops.double, "lam": lambda n: n}, "candidate 'lam'", "is a lambda"),
        ({"double": ops.double, "local": local}, "candidate 'local'", "(a closure)"),
        ({"double": ops.double, "m": (ops.sleepy, [1])}, None, None),
    ]
    for cands, who, why in cases:
        if who is None:
            ranktune.autotune("ok", cands, key=lambda n: n, isolate="spawn")
            continue
        with pytest.raises(ValueError) as e:
            ranktune.autotune("nope", cands, key=lambda n: n, isolate="spawn")
        text = str(e.value)
        assert who in text and why in text and 'use isolate="fork"' in text, text
    # A timer= must be importable too.
    with pytest.raises(ValueError, match=r"timer= .* is a lambda"):
        ranktune.autotune("t", {"double": ops.double}, key=lambda n: n, isolate="spawn",
                          timer=lambda run: 1.0)


def test_spawn_a_candidate_the_worker_cannot_import_fails_alone(tmp_path):
    # Importable here (registered in sys.modules), not in a fresh process.
    mod = types.ModuleType("made_up_in_this_process")
    exec("def twice(n):\n    return 2 * n\n", mod.__dict__)
    mod.twice.__module__ = mod.__name__
    sys.modules[mod.__name__] = mod
    try:
        f = ranktune.autotune("imp", {"double": ops.double, "twice": mod.twice},
                              key=lambda n: n, cache=tmp_path / "t.json", isolate="spawn",
                              warmup=1, samples=2)
        with ranktune.tuning():
            assert f(5) == 10
    finally:
        del sys.modules[mod.__name__]
    err = errors_of(ranktune.Cache(tmp_path / "t.json").entries()[0])["twice"]
    assert err.startswith("the spawned worker cannot import candidate 'twice' "
                          "(made_up_in_this_process.twice): ModuleNotFoundError"), err
    assert ranktune.Cache(tmp_path / "t.json").blocklist() == [], "not a hard failure"


def test_spawn_refuses_an_argument_it_cannot_rebuild():
    f = ranktune.autotune("obj", {"a": ops.quiet, "b": ops.quiet}, key=lambda *a: 1,
                          isolate="spawn")
    with ranktune.tuning(), pytest.raises(ValueError) as e:
        f(1, object())
    assert "argument 1 is a object, which it cannot describe" in str(e.value)
    assert 'use isolate="fork"' in str(e.value)


def test_spawn_rebuilds_torch_tensors_numpy_arrays_and_plain_values(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    import spawn_ops

    base = torch.randn(8, 6, dtype=torch.float64)
    args = (
        torch.randn(4, 3),                               # contiguous float32
        base.t(),                                        # non-contiguous (transposed)
        base[1:7:2, 1:],                                 # strided slice with an offset
        torch.zeros(5, dtype=torch.int64),               # indices
        torch.randn(2, 3, dtype=torch.bfloat16).requires_grad_(),
        np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-2],  # negative strides
        np.zeros((2, 2), dtype=np.int16),
        (3, [1.5, "x"], {"k": None}, float("inf")),
        spawn_ops.Tile.BIG,
    )
    kwargs = {"dtype": torch.float16, "size": torch.Size([2, 2]), "scale": np.float32(0.5)}

    def shape(v):
        return ops._shape_of(v)

    want = {"args": [shape(a) for a in args], "kwargs": {k: shape(v) for k, v in kwargs.items()}}
    probe = tmp_path / "probe.json"
    monkeypatch.setenv("ISOLATE_PROBE", str(probe))
    f = ranktune.autotune("rebuild", {"quiet": ops.quiet, "probe": ops.probe},
                          key=lambda *a, **k: 1, cache=tmp_path / "t.json", isolate="spawn",
                          warmup=1, samples=2)
    with ranktune.tuning():
        f(*args, **kwargs)
        g = ranktune.autotune("rebuild2", {"quiet": ops.quiet, "probe": ops.probe},
                              key=lambda *a, **k: 1, isolate="spawn", warmup=1, samples=2)
    got = json.loads(probe.read_text())
    assert got["pid"] != os.getpid()
    assert got["args"] == want["args"]
    assert got["kwargs"] == want["kwargs"]
    assert f.tuner.worker_starts == 1
    assert ranktune.Cache(tmp_path / "t.json").entries()[0]["runner"] in ("quiet", "probe")
    del g


def test_spawn_keeps_its_worker_for_the_next_bucket_with_torch(tmp_path):
    torch = pytest.importorskip("torch")
    import spawn_ops

    # torch.mm is a builtin whose qualified name is its C class's: the
    # worker imports it as torch.mm.
    f = ranktune.autotune("mm", {"mm": spawn_ops.mm, "torch_mm": torch.mm, "mm_t": spawn_ops.mm_t},
                          key=lambda a, b: a.shape[0], cache=tmp_path / "t.json", isolate="spawn",
                          warmup=1, samples=3)
    b = torch.randn(32, 16)
    with ranktune.tuning():
        for rows in (64, 16, 4):
            assert f(torch.randn(rows, 32), b).shape == (rows, 16)
    assert f.tuner.worker_starts == 1, "one worker (one torch import) for the three buckets"
    assert f.tuner.measured == 3 and f.tuner.failures == []
    entries = ranktune.Cache(tmp_path / "t.json").entries()
    assert len(entries) == 3
    assert all("error" not in c for e in entries for c in e["candidates"]), entries


# A rank whose candidate segfaults on rank 1 only, tuned with `merge` over
# the cache's directory: every rank still takes part in every exchange.
RANK = """
import json, sys, ranktune
sys.path.insert(0, sys.argv[3])
import isolate_ops as ops
f = ranktune.autotune("lockstep", {"double": ops.double, "crash1": ops.segfault_on_rank_1,
                                   "double_too": ops.double_too},
                      key=lambda n: n, cache=sys.argv[1], strategy=sys.argv[2], isolate="fork",
                      warmup=1, samples=3)
with ranktune.tuning():
    assert f(100) == 200 and f(3) == 6
print(json.dumps({"failures": f.tuner.failures, "fallbacks": f.tuner.fallbacks}))
"""


def test_a_crash_on_one_rank_fails_the_candidate_for_all_and_no_rank_waits(tmp_path):
    cache = tmp_path / "tune.json"
    here = os.path.dirname(os.path.abspath(__file__))
    procs = [
        run_py(RANK, cache, "merge", here,
               env={"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r),
                    "RANKTUNE_JOB_ID": "py-isolate-lockstep", "RANKTUNE_STRATEGY_TIMEOUT": "60"})
        for r in range(2)
    ]
    outs = [json.loads(o) for o in wait_ok(procs, timeout=120)]
    assert [o["fallbacks"] for o in outs] == [[], []], "nobody waited out the timeout"
    assert outs[0]["failures"] == []
    assert sorted((tuple(b), r, k) for b, r, _, k, _ in outs[1]["failures"]) == [
        ((2,), "crash1", "crash"), ((64,), "crash1", "crash")]
    entries = ranktune.Cache(cache).entries()
    assert sorted(e["bucket"][0][0] for e in entries) == [2, 64]
    for e in entries:
        assert e["section"] == "shared" and e["runner"] != "crash1"
        err = errors_of(e)["crash1"]
        assert "crashed: SIGSEGV (signal 11)" in err, err


def test_isolated_timings_are_the_in_process_statistic(tmp_path):
    # Sleeps of 1 and 3 ms: the same statistic (keys, samples, the fastest
    # sample -- the medians move with the machine's load) measured
    # in-process and in a worker.
    medians = {}
    for mode in ("off", "fork"):
        path = tmp_path / f"{mode}.json"
        f = ranktune.autotune("sleepy", {"sleepy": (ops.sleepy, [3, 1])}, key=lambda n: n,
                              cache=path, isolate=mode, warmup=1, samples=5)
        with ranktune.tuning():
            f(1)
        (entry,) = ranktune.Cache(path).entries()
        assert entry["tactic"] == 1
        stats = [c["stats"] for c in entry["candidates"]]
        assert [s["samples"] for s in stats] == [5, 5]
        assert all(set(s) == {"min_us", "median_us", "p90_us", "spread", "samples"} for s in stats)
        medians[mode] = [s["min_us"] for s in stats]
    # The fastest of five 1 ms and 3 ms sleeps: a sleep never ends early,
    # and oversleeps by a scheduler tick at most on a loaded machine; the
    # worker adds no more than the protocol's round trip (~20 µs).
    for ms, off, fork in zip((3, 1), medians["off"], medians["fork"]):
        for us in (off, fork):
            assert ms * 1000 <= us < ms * 1000 + 5000, medians
        assert abs(fork - off) < 5000, medians


def test_a_store_that_fails_after_a_crash_loses_neither_the_bucket_nor_the_record(
    tmp_path, monkeypatch
):
    # The cache's lock held while a bucket with a crashing candidate is
    # measured: the call returns its result (the save warns), and the
    # choice and the crash's blocklist record are saved together later.
    import fcntl

    monkeypatch.setenv("RANKTUNE_LOCK_TIMEOUT", "0.3")
    path = tmp_path / "t.json"
    f = ranktune.autotune("locked", {"double": ops.double, "segfault": ops.segfault},
                          key=lambda n: n, cache=ranktune.Cache(path), isolate="fork",
                          warmup=1, samples=2)
    held = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        with pytest.warns(RuntimeWarning, match="saving tuned choices failed"):
            with ranktune.tuning() as s:
                assert f(3) == 6
                assert (s.saved, s.pending) == (0, 1)
                fcntl.flock(held, fcntl.LOCK_UN)
    finally:
        os.close(held)
    assert [e["bucket"] for e in ranktune.Cache(path).entries()] == [[[2]]]
    assert [(r["runner"], r["kind"]) for r in ranktune.Cache(path).blocklist()] == [("segfault", "crash")]


def test_a_bucket_rule_that_keeps_negative_dims(tmp_path):
    # Its choices are cached and load back; its hard failures are in
    # tuner.failures (the blocklist keys sizes), said once.
    path = tmp_path / "t.json"

    def make():
        return ranktune.autotune("neg", {"double": ops.double, "segfault": ops.segfault},
                                 key=lambda n: n, buckets=lambda dims: dims,
                                 cache=ranktune.Cache(path), isolate="fork", warmup=1, samples=2)

    f = make()
    with ranktune.tuning(), pytest.warns(RuntimeWarning, match="has a negative dim"):
        assert f(-3) == -6
    assert f.tuner.failures[0][:4] == ((-3,), "segfault", None, "crash")
    assert [e["bucket"] for e in ranktune.Cache(path).entries()] == [[[-3]]]
    assert ranktune.Cache(path).blocklist() == []
    g = make()
    assert g(-3) == -6 and g.tuner.measured == 0, "a hit, outside tuning"


def open_fds():
    return sorted(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_workers_that_cannot_start_leave_no_descriptors_open(tmp_path, monkeypatch):
    # A worker that exits before it is ready (/bin/false), and one that
    # cannot be spawned at all (no such program): each start fails the
    # bucket's candidates, and leaves nothing open.
    for exe, why in (("/bin/false", "the worker exited with status 1"),
                     (str(tmp_path / "no-such-python"), "No such file")):
        monkeypatch.setattr(sys, "executable", exe)
        f = ranktune.autotune("nostart", {"double": ops.double, "double_too": ops.double_too},
                              key=lambda n: n, buckets="exact", isolate="spawn",
                              warmup=1, samples=2)
        before = open_fds()
        with ranktune.tuning():
            for n in range(1, 9):
                with pytest.raises(ranktune.Error, match="could not start") as e:
                    f(n)
                assert why in str(e.value), str(e.value)
        assert f.tuner.worker_starts == (8 if exe == "/bin/false" else 0)
        assert open_fds() == before, exe


def test_a_dropped_ops_kept_worker_is_reaped_when_tuning_ends():
    # Every candidate raises (not a hard failure): the spawned worker is
    # kept, the bucket fails, and the op is dropped by its caller.
    f = ranktune.autotune("dropped", {"raises": ops.raises, "raises_too": ops.raises},
                          key=lambda n: n, isolate="spawn", warmup=1, samples=2)
    with ranktune.tuning():
        with pytest.raises(ranktune.Error, match="every candidate of dropped failed"):
            f(1)
        pid = f.tuner._pool.worker_pid
        del f
        gc.collect()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped already: no zombie left


def test_a_candidate_reading_standard_input_gets_an_empty_one(tmp_path):
    # A spawned worker's protocol was on its descriptor 0: a candidate that
    # reads it must not take the protocol's bytes (or hang on them).
    for mode in ("spawn", "fork"):
        f = ranktune.autotune(f"stdin_{mode}", {"double": ops.double, "reads": ops.reads_stdin},
                              key=lambda n: n, isolate=mode, candidate_timeout=5,
                              warmup=1, samples=2)
        with ranktune.tuning():
            assert f(4) == 8
        assert f.tuner.failures == [], f.tuner.failures


def test_spawn_refuses_a_call_too_large_for_one_protocol_line():
    f = ranktune.autotune("big", {"a": ops.quiet, "b": ops.quiet}, key=lambda *a: 1,
                          isolate="spawn")
    with ranktune.tuning(), pytest.raises(ValueError) as e:
        f(1, list(range(300_000)))
    text = str(e.value)
    assert f"at most {_ranktune.PROTOCOL_MAX_LINE} bytes" in text and "(argument 1: " in text, text
    assert f.tuner.worker_starts == 0


def test_the_environment_asks_spawn_of_ops_a_worker_cannot_import_only_when_measuring(
    tmp_path, monkeypatch
):
    # RANKTUNE_ISOLATE=spawn for a whole job: an op of lambdas is defined
    # and runs from the cache; only a measure needs the worker's imports.
    path = tmp_path / "t.json"
    cands = {"double": lambda n: n * 2, "double_too": lambda n: n + n}
    with ranktune.tuning():
        ranktune.autotune("lam", cands, key=lambda n: n, cache=path, warmup=1, samples=2)(3)
    monkeypatch.setenv("RANKTUNE_ISOLATE", "spawn")
    f = ranktune.autotune("lam", cands, key=lambda n: n, cache=path, warmup=1, samples=2)
    with ranktune.tuning():
        assert f(3) == 6, "a hit: nothing to measure"
        with pytest.raises(ValueError) as e:
            f(100)
    text = str(e.value)
    assert text.startswith("lam, measured under RANKTUNE_ISOLATE=spawn: ") and "is a lambda" in text
    assert "candidate 'double'" in text and 'use isolate="fork"' in text, text


def test_spawn_arguments_that_cannot_be_rebuilt_after_a_failure_fail_later_runs(tmp_path):
    import spawn_ops

    f = ranktune.autotune("halfwritten", {"quiet": ops.quiet, "breaks": ops.breaks_enum,
                                          "quiet_too": ops.quiet},
                          key=lambda *a: 1, cache=tmp_path / "t.json", isolate="spawn",
                          warmup=1, samples=2)
    with ranktune.tuning():
        f(spawn_ops.Tile.BIG)
    errors = errors_of(ranktune.Cache(tmp_path / "t.json").entries()[0])
    assert errors["breaks"].startswith("ValueError: broke it (and the arguments could not be rebuilt")
    assert errors["quiet_too"].startswith(
        "the spawned worker could not rebuild the arguments after a failed run"), errors
