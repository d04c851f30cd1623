"""Side-by-side cost of a tuned function's hit against a plain dict look-up
plus the call (issue target: at most 2x). Run: python python/bench/dispatch.py

Prints nanoseconds per call for: the bare call, a dict look-up plus the call,
and ranktune.autotune hits with an int key and a tuple key; ratios are
against the dict baseline. Both sides run in this one process, interleaved,
best of several rounds."""

import timeit

import ranktune


def impl(n):
    return n


def main():
    table = {64: impl}
    key = lambda n: 64  # noqa: E731 - a hand-written dispatcher's key
    f_int = ranktune.autotune("bench", {"a": impl, "b": impl}, key=lambda n: n)
    f_int.tuner._choices[(64,)] = impl
    f_int.tuner._loaded = True
    f_tup = ranktune.autotune("bench2", {"a": impl, "b": impl}, key=lambda n: (n, 8))
    f_tup.tuner._choices[(64, 8)] = impl
    f_tup.tuner._loaded = True
    cases = {
        "call only": lambda: impl(100),
        "dict look-up + call": lambda: table[64](100),
        "key() + dict look-up + call": lambda: table[key(100)](100),
        "autotune hit, int key": lambda: f_int(100),
        "autotune hit, (int, int) key": lambda: f_tup(100),
    }
    n = 200_000
    best = {k: float("inf") for k in cases}
    for _ in range(7):
        for name, fn in cases.items():
            t = timeit.timeit(fn, number=n) / n * 1e9
            best[name] = min(best[name], t)
    base = best["dict look-up + call"]
    for name, t in best.items():
        print(f"{name:32s} {t:8.1f} ns  {t / base:5.2f}x")


if __name__ == "__main__":
    main()
