"""Isolated measuring from Python beside in-process measuring, in one run:
what a candidate costs measured in-process, in a forked worker and in a
spawned worker; what a worker start costs (fork and spawn, before and
after torch is imported); and what durable saving (``save_every="auto"``)
costs per bucket beside saving only at the end.

Run: python python/bench/isolate.py [--rounds 5] [--buckets 8]

- Per candidate: an op of 8 candidates (``isolate_ops.spin``, busy for 2 µs
  or 80 µs a run) tuned for ``--buckets`` buckets with the default adaptive
  sampling, a fresh ``autotune`` (no cache) per round; the three modes
  alternate within each round; medians over rounds. The extra cost per
  candidate is (mode's time - in-process time) / (buckets x candidates).
  A forked worker serves one bucket; a spawned one all of them.
- Round trip: one request to a forked worker whose run does nothing.
- Worker start: fork->ready and spawn->ready as the op reports them
  (``tuner.worker_start_seconds / worker_starts``), first with torch not
  imported, then with torch imported here (fork copies a bigger process)
  and, for spawn, with a torch tensor argument (the worker imports torch).
- save_every: 32 buckets of a 2-candidate op (~3 ms of measuring each),
  then 48 buckets of ~30 ms, into a cache file in a fresh directory per
  round, the whole ``tuning()`` block timed (exit save included), ``"end"``
  and ``"auto"`` alternating; the difference per bucket, and how many
  saves auto made.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import isolate_ops  # noqa: E402
import ranktune  # noqa: E402


def tune_once(mode, us, buckets, arg=None):
    cands = {"spin": (isolate_ops.spin, [us + i for i in range(8)])}
    f = ranktune.autotune(f"bench-{mode}-{us}-{time.monotonic_ns()}", cands,
                          key=(lambda n: n) if arg is None else (lambda a: a.shape[0]),
                          buckets="exact", isolate=mode)
    t0 = time.perf_counter()
    with ranktune.tuning():
        for b in range(buckets):
            f(b + 1) if arg is None else f(arg(b + 1))
    return time.perf_counter() - t0, f.tuner


def per_candidate(rounds, buckets):
    print(f"== per candidate: 8 candidates x {buckets} buckets, adaptive sampling, {rounds} rounds")
    for us in (2, 80):
        times = {m: [] for m in ("off", "fork", "spawn")}
        starts = {m: [] for m in ("fork", "spawn")}
        for _ in range(rounds):
            for mode in times:
                t, tuner = tune_once(mode, us, buckets)
                times[mode].append(t)
                if mode != "off":
                    starts[mode].append(tuner.worker_start_seconds / tuner.worker_starts)
        base = statistics.median(times["off"])
        n = buckets * 8
        print(f"runs of ~{us} us: in-process {base * 1e3 / buckets:.2f} ms a bucket")
        for mode in ("fork", "spawn"):
            t = statistics.median(times[mode])
            print(f"  {mode:5s} {t * 1e3 / buckets:.2f} ms a bucket ({t / base:.2f}x), "
                  f"+{(t - base) / n * 1e6:.0f} us per candidate; worker start "
                  f"{statistics.median(starts[mode]) * 1e3:.2f} ms (median)")


def round_trip(rounds):
    """µs of one request to a forked worker whose run does nothing (the
    protocol, the socket, the wake-ups), median over rounds of 500."""
    from ranktune import _isolate

    per = []
    for _ in range(rounds):
        w = _isolate.fork_worker(lambda j, reps: 1.0, None)
        w.request(None, 10)
        t0 = time.perf_counter()
        for _ in range(500):
            w.request({"run": 0, "reps": 1}, 10)
        per.append((time.perf_counter() - t0) / 500)
        w.close()
    print(f"== round trip of one request to a forked worker: {statistics.median(per) * 1e6:.1f} us "
          f"(median of {rounds} x 500)")


def starts(rounds, label, arg=None):
    out = {}
    for mode in ("fork", "spawn"):
        s = []
        for _ in range(rounds):
            _, tuner = tune_once(mode, 2, 2, arg)
            s.append(tuner.worker_start_seconds / tuner.worker_starts)
        out[mode] = statistics.median(s)
    print(f"  {label}: fork {out['fork'] * 1e3:.2f} ms, spawn {out['spawn'] * 1e3:.1f} ms "
          f"(median of {rounds}; worker start until ready)")


def save_every(rounds, buckets, sleep_s, label):
    print(f"== save_every: {buckets} buckets, 2 candidates ({label} of measuring a bucket), {rounds} rounds")
    res = {"end": [], "auto": []}
    saves = []
    costs = []

    def slow(n):
        time.sleep(sleep_s)
        return n

    for _ in range(rounds):
        for policy in res:
            with tempfile.TemporaryDirectory() as d:
                f = ranktune.autotune("save", {"a": isolate_ops.double, "b": slow}, key=lambda n: n,
                                      buckets="exact", cache=os.path.join(d, "c.json"),
                                      warmup=1, samples=5)
                t0 = time.perf_counter()
                with ranktune.tuning(save_every=policy) as s:
                    for b in range(buckets):
                        f(b + 1)
                res[policy].append(time.perf_counter() - t0)
                if policy == "auto":
                    saves.append(s.saves)
                    costs.append(s.save_seconds / max(1, s.saves))
                assert len(ranktune.Cache(os.path.join(d, "c.json")).entries()) == buckets
    end, auto = statistics.median(res["end"]), statistics.median(res["auto"])
    print(f"  end  {end * 1e3 / buckets:.2f} ms a bucket (1 save at exit)")
    print(f"  auto {auto * 1e3 / buckets:.2f} ms a bucket ({auto / end:.2f}x, "
          f"+{(auto - end) * 1e3 / buckets:.2f} ms a bucket), {statistics.median(saves):.0f} saves "
          f"(median), {statistics.median(costs) * 1e3:.1f} ms a save")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--buckets", type=int, default=8)
    a = ap.parse_args()
    assert "torch" not in sys.modules
    per_candidate(a.rounds, a.buckets)
    round_trip(a.rounds)
    print("== worker start")
    starts(a.rounds, "torch not imported")
    import torch

    starts(a.rounds, "torch imported here")
    s = []
    for _ in range(max(2, a.rounds // 2)):
        _, tuner = tune_once("spawn", 2, 2, arg=lambda n: torch.zeros(n, 4))
        s.append(tuner.worker_start_seconds / tuner.worker_starts)
    print(f"  spawn with a tensor argument (the worker imports torch): {statistics.median(s):.2f} s "
          f"(median of {len(s)})")
    save_every(a.rounds, 32, 0.0002, "~3 ms")
    save_every(a.rounds, 48, 0.005, "~30 ms")


if __name__ == "__main__":
    main()
