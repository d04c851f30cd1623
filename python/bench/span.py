"""Per-span cost of recording from Python, next to torch.profiler's
record_function when torch is importable. Run: python python/bench/span.py"""

import contextlib
import os
import tempfile
import timeit

import ranktune.trace as trace


def main():
    n = 100_000
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        trace.start(os.path.join(d, "t.json"))

        @trace.span("decorated")
        def work():
            pass

        s = trace.span("ctx")

        def ctx():
            with s:
                pass

        def ctx_new():
            with trace.span("ctx2", i=1):
                pass

        def nothing():
            with contextlib.nullcontext():
                pass

        cases = {"nullcontext (baseline)": nothing, "span object reused": ctx,
                 "span(name, i=1) each time": ctx_new, "@span decorator": work}
        try:
            import torch  # noqa: F401
            from torch.profiler import ProfilerActivity, profile, record_function

            def torch_rf():
                with record_function("rf"):
                    pass

            cases["torch record_function (profiling)"] = torch_rf
        except ImportError:
            print("torch not importable: record_function not measured")
        prof = None
        if "torch record_function (profiling)" in cases:
            prof = profile(activities=[ProfilerActivity.CPU])
            prof.__enter__()
        for _ in range(5):
            for name, fn in cases.items():
                t = min(timeit.repeat(fn, number=n, repeat=1)) / n * 1e9
                rows[name] = min(rows.get(name, float("inf")), t)
        if prof is not None:
            prof.__exit__(None, None, None)
        trace.stop()
    for name, t in rows.items():
        print(f"{name:36s} {t:8.1f} ns per span")


if __name__ == "__main__":
    main()
