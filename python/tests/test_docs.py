"""The README's Python example and docs/python.md's torch example run as
written (the torch one when torch is importable)."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def blocks(path):
    text = open(os.path.join(ROOT, path)).read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_readme_python_example_runs_and_prints_what_it_says(tmp_path):
    (code,) = [b for b in blocks("README.md") if "autotune" in b]
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    expected = re.search(r"# (traces/trace_0.json fast)", code).group(1)
    assert out.stdout.strip() == expected


def test_torch_example_runs_when_torch_is_importable(tmp_path):
    pytest.importorskip("torch")
    (code,) = [b for b in blocks("docs/python.md") if "import torch" in b]
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def test_isolation_python_example_runs_and_prints_what_it_says(tmp_path):
    pytest.importorskip("numpy")
    ops, code = [b for b in blocks("docs/isolation.md") if "my_ops" in b]
    (tmp_path / "my_ops.py").write_text(ops)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    expected = re.search(r"# (\[None.*)", code).group(1)
    assert out.stdout.strip() == expected
