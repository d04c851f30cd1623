"""Many ranks saving TensorRT-LLM's autotuner cache into one file at once:
ranktune.trtllm's drop-in beside the stand-in of TensorRT-LLM's own save
(python/tests/trtllm_standin.py), in the same run, both writing
TensorRT-LLM's format; then one rank's load of the full file.

Run: python python/bench/trtllm_save.py [--ranks 64] [--entries 1000] [--rounds 3]

Each round starts every rank as its own process; a rank builds its cache
(``--entries`` entries with ``-1`` dims), says it is ready and waits; the
clock starts when all are released and stops when the last ``save_cache``
returned (each rank reports ``time.perf_counter()``, the system-wide
monotonic clock, so process exit is not counted).
Afterwards the file is checked with the stand-in's loader: every entry of
every rank present and exact, else the run fails. The two implementations
alternate round by round."""

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")

RANK = """
import sys, time
sys.path.insert(0, sys.argv[4])
import trtllm_standin
cls = trtllm_standin.AutoTunerProfilingCache
if sys.argv[3] == "dropin":
    import ranktune.trtllm
    cls = ranktune.trtllm.install(cls)
rank, n = int(sys.argv[2]), int(sys.argv[5])
o = cls()
o.cache = {("trtllm::moe", "MoeRunner", f"({rank}, 'w4a8')", ((m + 1, -1), (0,), (7168, 4096))):
           (m % 3, (m, 128, "k"), 0.001 * (m + 1) / 3) for m in range(n)}
print("ready", flush=True)
sys.stdin.readline()
o.save_cache(sys.argv[1], rank)
print(time.perf_counter(), flush=True)
"""


def expected(rank, n):
    return {("trtllm::moe", "MoeRunner", f"({rank}, 'w4a8')", ((m + 1, -1), (0,), (7168, 4096))):
            (m % 3, (m, 128, "k"), 0.001 * (m + 1) / 3) for m in range(n)}


def one_round(impl, ranks, n):
    sys.path.insert(0, TESTS)
    import trtllm_standin

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "autotuner.json")
        procs = [
            subprocess.Popen([sys.executable, "-c", RANK, path, str(r), impl, TESTS, str(n)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for r in range(ranks)
        ]
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise SystemExit(f"{impl}: a rank failed to start")
        start = time.perf_counter()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        # When the last save returned (CLOCK_MONOTONIC, one clock for every
        # process): interpreter start-up and exit are left out for both.
        ends = [float(p.stdout.readline()) for p in procs]
        for p in procs:
            if p.wait() != 0:
                raise SystemExit(f"{impl}: a rank failed")
        save_s = max(ends) - start
        # Nothing lost, for TensorRT-LLM's own loader.
        for r in range(ranks):
            o = trtllm_standin.AutoTunerProfilingCache()
            o.load_cache(path, r)
            want = expected(r, n)
            got = {k: (v[0], v[1], struct.pack("<d", v[2])) for k, v in o.cache.items()}
            if got != {k: (v[0], v[1], struct.pack("<d", v[2])) for k, v in want.items()}:
                raise SystemExit(f"{impl}: rank {r} lost or changed entries")
        # One rank's load of the full file, by this implementation.
        cls = trtllm_standin.AutoTunerProfilingCache
        if impl == "dropin":
            import ranktune.trtllm

            loader = ranktune.trtllm.patch(cls())
        else:
            loader = cls()
        loads = []
        for _ in range(5):
            t = time.perf_counter()
            loader.load_cache(path, ranks // 2)
            loads.append(time.perf_counter() - t)
        return save_s, min(loads), max(loads), os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    res = {"standin": [], "dropin": []}
    for i in range(args.rounds):
        for impl in (("standin", "dropin") if i % 2 == 0 else ("dropin", "standin")):
            res[impl].append(one_round(impl, args.ranks, args.entries))
            s, lmin, lmax, size = res[impl][-1]
            print(f"round {i} {impl:8s} save {s:7.2f} s  load {lmin:.3f}-{lmax:.3f} s  file {size / 1e6:.1f} MB", flush=True)
    med = {k: statistics.median(r[0] for r in v) for k, v in res.items()}
    print(f"\n{args.ranks} ranks x {args.entries} entries, median of {args.rounds} rounds:")
    for k, v in res.items():
        saves = [r[0] for r in v]
        print(f"  {k:8s} save {med[k]:.2f} s ({min(saves):.2f}-{max(saves):.2f}); "
              f"one rank's load {min(r[1] for r in v):.3f}-{max(r[2] for r in v):.3f} s")
    print(f"  drop-in {med['standin'] / med['dropin']:.1f}x faster to save; nothing lost in either")


if __name__ == "__main__":
    main()
