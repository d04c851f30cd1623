"""The type stub of the extension (``ranktune/_ranktune.pyi``) names exactly
what the extension defines: every function, class, exception and constant
of ``_ranktune``, and every public method and property of its classes,
each in the stub, and nothing in the stub that the extension lacks. So a
name changed in Rust (crates/py) cannot drift from the one Python users and
their type checkers see (issue 37: one name per concept)."""

import ast
import os

import ranktune
from ranktune import _ranktune

STUB = os.path.join(os.path.dirname(os.path.abspath(ranktune.__file__)), "_ranktune.pyi")


def _stub():
    with open(STUB) as f:
        tree = ast.parse(f.read())
    top, classes = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top.add(node.name)
        elif isinstance(node, ast.ClassDef):
            top.add(node.name)
            classes[node.name] = {
                n.name for n in node.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
            }
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
        elif isinstance(node, ast.Assign):
            top.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in top if not n.startswith("_")}, classes


def _runtime():
    names = {n for n in dir(_ranktune) if not n.startswith("_")}
    classes = {}
    for n in names:
        obj = getattr(_ranktune, n)
        if isinstance(obj, type):
            classes[n] = {a for a in vars(obj) if not a.startswith("_")}
    return names, classes


def test_the_stub_names_exactly_what_the_extension_defines():
    stub, _ = _stub()
    runtime, _ = _runtime()
    assert not runtime - stub, f"defined by the extension, missing from {STUB}: {sorted(runtime - stub)}"
    assert not stub - runtime, f"in {STUB}, not defined by the extension: {sorted(stub - runtime)}"


def test_every_class_has_the_stubs_methods_and_properties():
    _, stub = _stub()
    _, runtime = _runtime()
    for name, attrs in runtime.items():
        if issubclass(getattr(_ranktune, name), BaseException):
            continue  # exceptions add nothing of their own
        want = stub.get(name, set())
        assert attrs == want, (
            f"{name}: the extension has {sorted(attrs - want)} that the stub lacks, "
            f"the stub has {sorted(want - attrs)} that the extension lacks"
        )


def test_the_package_exports_the_extensions_errors_themselves():
    # One class per concept: ranktune.Error and its subclasses are the ones
    # Rust raises, not Python copies.
    for name in ("Error", "LockTimeout", "CorruptFile", "UnsupportedFile"):
        assert getattr(ranktune, name) is getattr(_ranktune, name)


def test_the_python_package_stays_a_shell_over_the_rust_core():
    """Issue 37: the rules live in Rust once, so the Python package keeps
    only what must be Python -- at most 2,100 non-blank lines in all,
    docstrings included (2,951 before the tuner's decisions, its saves and
    the worker's loop moved into Rust)."""
    root = os.path.dirname(os.path.abspath(ranktune.__file__))
    lines = 0
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    lines += sum(1 for line in f if line.strip())
    assert lines <= 2100, f"{lines} non-blank lines of Python in {root}: a rule written in Python?"
