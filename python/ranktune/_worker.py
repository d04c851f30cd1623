"""``python -m ranktune._worker --parent PID [--memory BYTES]``: the
measuring worker of ``ranktune.autotune(isolate="spawn")``.

A fresh interpreter -- nothing inherited, so it may create its own CUDA
context -- that speaks the worker protocol
(``crates/tune/src/isolation/protocol.rs``) on its standard input and
output (one Unix socket; the tuning process started it with ``posix_spawn``):

- ``{"init": {...}}``: the op, the candidates (``runner``, ``runner_name``,
  ``tactic``, ``value``) and, in ``spec["python"]``, how to rebuild the
  call: each candidate's module and qualified name (and its tactic's
  description), the arguments' descriptions (``ranktune._rebuild``), an
  importable ``timer=``/``sync=``, and the tuning process's ``sys.path``.
  It imports, rebuilds, and answers ``{"ready": {"pid": N}}`` -- or
  ``{"error": ...}`` when the arguments cannot be rebuilt. A candidate that
  cannot be imported fails alone (each of its runs answers why). Unlike a
  Rust tuner's worker it also takes a later ``init``: the op's next bucket,
  so one process (and its torch import) serves them all.
- ``{"run": p, "reps": n}``: runs candidate ``p`` ``n`` times, timed as the
  in-process tuner times them; ``{"us": x}`` or ``{"error": ..., "kind":
  "error"|"memory"}``. After a failed run the arguments are rebuilt (a
  candidate that raised may have left them half-written).
- End of input: it exits 0.

Before anything else it sets itself up as the Rust worker is set up
between fork and exec (``_isolate.prepare_worker``, the Rust rule of ``isolation::setup``): SIGINT/SIGTERM
ignored, the crash signals' default actions, killed when the tuning
process dies. Its memory limit (``RLIMIT_AS``) is ``BYTES`` over its own
size once each ``init`` is set up -- imports made, arguments rebuilt --
because a fresh interpreter starts far smaller than the tuning process
(the Rust rule, growth over the tuning process's size, would let a worker
without torch allocate all the address space torch reserved there). Its
standard output is pointed at its standard error (a pipe the tuning
process reads for reasons), so a candidate's ``print`` cannot break the
protocol.

Nothing it reads is evaluated as code: the messages are JSON, and it
imports only modules the tuning process named (and checked) for its
candidates, its timer and its enums.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from ranktune import _isolate, _ranktune, _rebuild
from ranktune._ranktune import PROTOCOL_VERSION


class _Setup:
    """What one ``init`` set up: the candidates (or why each cannot be
    imported), the arguments, and how to time."""

    def __init__(self, init: Dict[str, Any], memory: Optional[int]) -> None:
        spec = (init.get("spec") or {}).get("python")
        if not isinstance(spec, dict):
            raise ValueError("the init has no spec.python: this worker serves ranktune.autotune only")
        for p in reversed(spec.get("sys_path") or []):
            if isinstance(p, str) and p not in sys.path:
                sys.path.insert(0, p)
        self.memory = memory
        self.call = spec["call"]
        self.cands: List[Tuple[Optional[Callable[..., Any]], str]] = []
        for c, ref in zip(init["candidates"], spec["candidates"]):
            try:
                fn = _rebuild.resolve(ref["module"], ref["qualname"])
                if "tactic" in ref:
                    tactic = _rebuild.rebuild(ref["tactic"])
                    fn = _with_tactic(fn, tactic)
                self.cands.append((fn, ""))
            except Exception as e:  # noqa: BLE001 -- this candidate fails alone, with why
                why = (
                    f"the spawned worker cannot import candidate {c['runner_name']!r} "
                    f"({ref['module']}.{ref['qualname']}): {type(e).__name__}: {e}"
                )
                self.cands.append((None, why))
        self.timer = _rebuild.import_named(spec.get("timer"))
        self.sync = _rebuild.import_named(spec.get("sync"))
        self.args: List[Any] = []
        self.kwargs: Dict[str, Any] = {}
        # Why the arguments are unusable (a rebuild after a failed run
        # failed): every later run fails with it instead of running on
        # half-written arguments.
        self.broken: Optional[str] = None
        self.rebuild()

    def rebuild(self) -> None:
        self.args, self.kwargs = _rebuild.rebuild_call(self.call)
        self.on_gpu = False
        if self.timer is None and self.sync is None and "torch" in sys.modules:
            from ranktune import torch as rt_torch

            self.on_gpu = rt_torch.on_gpu(self.args, self.kwargs)

    def run(self, p: int, reps: int) -> Dict[str, Any]:
        if not 0 <= p < len(self.cands):
            return {"error": f"no candidate {p}", "kind": "error"}
        fn, why = self.cands[p]
        if fn is None:
            return {"error": why, "kind": "error"}
        if self.broken is not None:
            return {"error": self.broken, "kind": "error"}
        args, kwargs = self.args, self.kwargs
        timer, sync = self.timer, self.sync
        if self.on_gpu:
            from ranktune import torch as rt_torch

            timer = rt_torch.timer

        def once() -> Any:
            if timer is not None:
                return timer(lambda: fn(*args, **kwargs))
            if sync is not None:
                sync()
                fn(*args, **kwargs)
                sync()
                return None
            fn(*args, **kwargs)
            return None

        reply: Dict[str, Any] = _ranktune.worker_run(once, reps, timer is not None, self.memory)
        if "us" in reply:
            return reply
        try:
            self.rebuild()
        except Exception as e:  # noqa: BLE001 -- this bucket's later runs fail with it
            self.args, self.kwargs = [], {}
            self.broken = (
                "the spawned worker could not rebuild the arguments after a failed run: "
                f"{type(e).__name__}: {e}"
            )
            reply["error"] += f" (and the arguments could not be rebuilt: {type(e).__name__}: {e})"
        return reply


def _with_tactic(fn: Callable[..., Any], tactic: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, tactic=tactic, **kwargs)

    return call


def main(argv: List[str]) -> int:
    parent, memory = 0, None
    it = iter(argv)
    for a in it:
        if a == "--parent":
            parent = int(next(it))
        elif a == "--memory":
            memory = int(next(it))
        else:
            sys.stderr.write(f"ranktune._worker: unknown argument {a!r}\n")
            return 2
    _isolate.prepare_worker(parent, None)
    # The protocol moves off descriptor 0 (the socket), which then reads
    # /dev/null, so a candidate reading its standard input cannot take the
    # protocol's bytes; descriptor 1, where a candidate's print goes,
    # becomes the standard error pipe.
    proto = os.dup(0)
    _isolate.stdin_from_devnull()
    os.dup2(2, 1)
    setup: Optional[_Setup] = None
    pid = os.getpid()

    def handle(req: Dict[str, Any]) -> Dict[str, Any]:
        nonlocal setup
        if "init" in req:
            init = req["init"]
            if init.get("protocol") != PROTOCOL_VERSION:
                return {"error": f"protocol {init.get('protocol')} is not supported", "kind": "error"}
            if memory is not None:
                # Set up without the last bucket's limit: imports and
                # arguments are ours, not a candidate's.
                _isolate.limit_memory(None)
            # The last bucket's set-up (its arguments: maybe large
            # tensors) is freed before the next one is built.
            setup = None
            try:
                setup = _Setup(init, memory)
            except Exception as e:  # noqa: BLE001 -- the set-up's failure, answered
                setup = None
                return {"error": f"{type(e).__name__}: {e}", "kind": "error"}
            if memory is not None:
                # A candidate may grow the worker by `memory` over its size now.
                _isolate.limit_memory(memory)
            return {"ready": {"pid": pid}}
        if setup is None:
            return {"error": "a spawned worker needs an init message first", "kind": "error"}
        return setup.run(req["run"], req["reps"])

    _ranktune.worker_serve(proto, handle, ready=False)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
