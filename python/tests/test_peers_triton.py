"""Triton's own disk-cache read loads ranktune's export of real Triton 3.9
files (written by Triton itself, crates/formats/tests/fixtures/peers/).

The kernels, the stand-ins for the GPU queries and the tuned calls are the
ones `tools/peer-fixtures/triton_fixtures.py` wrote the fixtures with; here
they run again against the folder `ranktune cache export --format triton`
wrote, with a benchmark that counts its calls: Triton must pick each call's
fastest config from the files alone, without benchmarking once.

Needs `triton` (3.9.0, installs without a GPU): skipped outside CI when it
is missing, a failure in CI."""

import json
import os
import subprocess
import sys

import pytest

from conftest import IN_CI

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "crates", "formats", "tests", "fixtures", "peers", "triton-3.9.0")
TOOLS = os.path.join(ROOT, "tools", "peer-fixtures")

LOAD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import triton_fixtures

plan, calls = triton_fixtures.setup(sys.argv[2])
benchmarked = 0
chosen = []
for timings, tuned, args in calls:
    plan[:] = list(timings)
    tuned.cache.clear()
    before = len(plan)
    tuned.run(*args)
    benchmarked += before - len(plan)
    inf = float("inf")
    # Triton's own rule: the config with the smallest timing (lists compare
    # element-wise); a config that did not fit timed inf.
    best = min(range(len(tuned.configs)),
               key=lambda i: [inf] * 3 if timings[i] is None else timings[i])
    chosen.append([str(tuned.best_config), str(tuned.configs[best])])
print(json.dumps({"benchmarked": benchmarked, "chosen": chosen}))
"""


@pytest.fixture(scope="module")
def triton_python():
    try:
        import triton  # noqa: F401
    except ImportError:
        msg = "triton is not installed (pip install triton==3.9.0; no GPU needed)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return sys.executable


def load_with_triton(python, cache_dir):
    out = subprocess.run([python, "-c", LOAD, TOOLS, str(cache_dir)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_triton_reads_the_export_without_benchmarking(triton_python, cli, tmp_path):
    cache = tmp_path / "cache.json"
    out = tmp_path / "triton-cache"
    r = subprocess.run([cli, "cache", "import", str(cache), FIXTURES, "--format", "triton"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([cli, "cache", "export", str(cache), "-o", str(out), "--format", "triton"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    got = load_with_triton(triton_python, out)
    assert got["benchmarked"] == 0, got
    assert len(got["chosen"]) == 5, got
    for picked, fastest in got["chosen"]:
        assert picked == fastest, got


def test_without_the_files_triton_benchmarks(triton_python, tmp_path):
    """The control: the same calls against an empty cache folder benchmark
    every config, so the test above can tell a hit from a miss."""
    got = load_with_triton(triton_python, tmp_path / "empty")
    assert got["benchmarked"] == 3 * 3 + 2 * 2, got
