"""Side-by-side cost of a tuned function's hit against a plain dict look-up
plus the call (issue target: at most 2x). Run: python python/bench/dispatch.py

Prints nanoseconds per call for: the bare call, a dict look-up plus the call,
a hand-written dispatcher (key() + look-up + call), the smallest possible
Python entry (a def holding only that dispatcher: no miss handling at all,
the floor for any entry written in Python), and ranktune.autotune hits:
through the entry generated for a fixed list of positional parameters,
with an int key and a tuple key, and through the general
``*args, **kwargs`` entry (a key that takes ``**kwargs``). Ratios are
against the dict baseline. Each case is a statement timed by timeit (no
wrapper call around it), all in this one process, interleaved, best of 15
rounds."""

import timeit

import ranktune


def impl(n):
    return n


def main():
    table = {64: impl}
    key = lambda n: 64  # noqa: E731 - a hand-written dispatcher's key

    def floor(n):
        return table[key(n)](n)

    def hit(op, key):
        f = ranktune.autotune(op, {"a": impl, "b": impl}, key=key)
        k = key(100)
        f.tuner._hot[k] = impl
        f.tuner._loaded = True
        return f

    scope = {
        "impl": impl,
        "table": table,
        "key": key,
        "floor": floor,
        "f_int": hit("bench", lambda n: 64),
        "f_tup": hit("bench2", lambda n: (64, 8)),
        "f_any": hit("bench3", lambda n, **kw: 64),
    }
    assert scope["f_int"].__code__.co_argcount == 1, "fixed-parameter entry"
    assert scope["f_any"].__code__.co_argcount == 0, "general entry"
    cases = {
        "call only": "impl(100)",
        "dict look-up + call": "table[64](100)",
        "key() + dict look-up + call": "table[key(100)](100)",
        "floor: def of the line above": "floor(100)",
        "autotune hit, int key": "f_int(100)",
        "autotune hit, (int, int) key": "f_tup(100)",
        "autotune hit, general entry": "f_any(100)",
    }
    n = 200_000
    best = {k: float("inf") for k in cases}
    for _ in range(15):
        for name, stmt in cases.items():
            t = timeit.timeit(stmt, number=n, globals=scope) / n * 1e9
            best[name] = min(best[name], t)
    base = best["dict look-up + call"]
    for name, t in best.items():
        print(f"{name:32s} {t:8.1f} ns  {t / base:5.2f}x")


if __name__ == "__main__":
    main()
