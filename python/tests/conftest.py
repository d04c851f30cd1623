"""Shared fixtures: the `ranktune` command for CLI round trips, and a helper
that runs Python snippets in real processes."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _find_cli():
    exe = os.environ.get("RANKTUNE_CLI") or shutil.which("ranktune")
    if exe:
        return exe
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(root, "target")
    for profile in ("debug", "release"):
        cand = os.path.join(target, profile, "ranktune")
        if os.access(cand, os.X_OK):
            return cand
    return None


@pytest.fixture(scope="session")
def cli():
    """Path of the `ranktune` command (RANKTUNE_CLI, PATH, or the cargo
    target dir). Missing: skipped locally, a failure in CI."""
    exe = _find_cli()
    if exe is None:
        msg = "the ranktune command was not found; build it with `cargo build -p ranktune` or set RANKTUNE_CLI"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def run_py(code, *args, env=None, **kw):
    """Starts `python -c code args...` (dedented) and returns the Popen."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        env=e,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def wait_ok(procs, timeout=120):
    """Waits for every process; fails with its stderr if one failed."""
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, f"process failed ({p.returncode}): {err}"
        outs.append(out)
    return outs
