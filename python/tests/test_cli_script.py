"""The `ranktune` command that `pip install .` puts beside the interpreter
(issue 25): the same CLI as the cargo-built binary -- the same `--help`,
the same exit statuses -- and `tune --ranks N` starts its ranks with it."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import IN_CI

SCRIPT = shutil.which("ranktune", path=os.path.dirname(sys.executable))


@pytest.fixture(scope="module")
def script():
    if SCRIPT is None:
        if IN_CI:
            pytest.fail("the package installed no `ranktune` script beside the interpreter")
        pytest.skip("no `ranktune` script beside this interpreter (pip install . makes one)")
    return SCRIPT


def run(cmd, *args, cwd=None):
    return subprocess.run([cmd, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_help_and_exit_statuses_match_the_binary(script, cli, tmp_path):
    for args in (["--help"], ["cache", "--help"], ["tune", "--help"], ["--version"]):
        a, b = run(script, *args), run(cli, *args)
        assert (a.returncode, a.stdout) == (b.returncode, b.stdout), args
    # Usage error (2), a missing file (2), and a healthy check (0).
    for args in (["--bogus"], ["cache", "show", str(tmp_path / "missing.json")]):
        a, b = run(script, *args), run(cli, *args)
        assert a.returncode == b.returncode == 2, (args, a.stderr)
        assert a.stderr == b.stderr, args


def test_tune_with_ranks_starts_them_with_the_script(script, tmp_path):
    p = run(script, "tune", "--ranks", "2", "--quick", "--ops", "softmax", "--max-tokens", "4",
            "--cache", "c.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "on 2 ranks" in p.stdout, p.stdout
    check = run(script, "cache", "check", "c.json", cwd=tmp_path)
    assert check.returncode == 0 and "healthy" in check.stdout, check.stdout + check.stderr
