"""What a spawned measuring worker (``isolate="spawn"``) is told about a
call, and how it rebuilds it: the candidates by module and qualified name,
the arguments by description -- torch tensors and numpy arrays by shape,
strides, dtype and device (filled with random values, as PyTorch Inductor's
subprocess autotuning rebuilds its inputs), plain values as they are.

The description is JSON data, sent in the worker protocol's ``init``
message (its ``spec``); nothing in it is code, and the worker imports only
the modules the parent named for its candidates (the parent checked that
each name is importable and names the very function it was given). No
argument is pickled: an object that is not one of the kinds below is a
``ValueError`` naming the argument, and ``isolate="fork"`` (the worker
inherits the arguments as they are) measures it instead.

Supported arguments (at any depth of plain containers):

- ``torch.Tensor`` (and ``nn.Parameter``) with the strided layout, on any
  device: shape, strides, storage offset, dtype, device and
  ``requires_grad``; floating-point ones are filled with ``randn``, the
  others with zeros (valid indices). ``torch.dtype``, ``torch.device``,
  ``torch.Size``.
- ``numpy.ndarray`` of a non-object dtype (any strides, negative ones
  included): shape, strides, dtype; float and complex ones filled from a
  normal distribution, the others with zeros. numpy scalars.
- ``None``, ``bool``, ``int``, ``float`` (``inf``/``nan`` too), ``str``,
  ``bytes``; ``list``, ``tuple`` and ``dict`` of supported values (exactly
  those types, not subclasses); members of an importable ``enum.Enum``.

Owns the description and the rebuilding; never starts or talks to a
process (``_isolate`` does).
"""

from __future__ import annotations

import base64
import enum
import importlib
import math
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["describe", "rebuild", "reference", "resolve", "check_importable"]

_MAIN_HINT = (
    'define it at module level in an importable module (not the main script), '
    'or use isolate="fork"'
)


class NotImportable(ValueError):
    """A callable a spawned worker cannot import by module and name."""


def reference(fn: Any) -> Dict[str, str]:
    """``{"module", "qualname"}`` of ``fn``, checked to import back to
    ``fn`` itself; ``NotImportable`` says why not (a lambda, a closure, a
    bound method, a ``functools.partial``, the main script, a name that now
    names something else)."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    what = f"{module}.{qualname}" if module and qualname else repr(fn)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise NotImportable(
            f"{what} has no module and qualified name (a functools.partial, a method of a C type?)"
        )
    if qualname == "<lambda>" or qualname.endswith(".<lambda>"):
        raise NotImportable(f"{what} is a lambda")
    if "<locals>" in qualname:
        raise NotImportable(f"{what} is defined inside a function (a closure)")
    if module == "__main__":
        raise NotImportable(f"{qualname} is defined in the main script (__main__)")
    try:
        found = resolve(module, qualname)
    except (ImportError, AttributeError) as e:
        # A builtin whose qualified name is its C class's (torch.mm is
        # torch._VariableFunctionsClass.mm): the package's own name for it.
        top, name = module.split(".")[0], getattr(fn, "__name__", None)
        try:
            alt = resolve(top, name) if isinstance(name, str) else None
        except (ImportError, AttributeError):
            alt = None
        if alt is fn:
            return {"module": top, "qualname": str(name)}
        raise NotImportable(f"{what} cannot be imported: {type(e).__name__}: {e}") from None
    if found is not fn and getattr(fn, "__self__", None) is not None:
        raise NotImportable(f"{what} is a bound method (it needs its object)")
    if found is not fn:
        raise NotImportable(f"{what} names another object than the one given (a decorated or replaced function?)")
    return {"module": module, "qualname": qualname}


def check_importable(fn: Any, what: str) -> Dict[str, str]:
    """``reference(fn)``, its error worded for ``what`` (e.g. ``candidate
    'fast'``) with the fix."""
    try:
        return reference(fn)
    except NotImportable as e:
        raise NotImportable(
            f'isolate="spawn" imports {what} by module and qualified name in a fresh process, '
            f"but {e}: {_MAIN_HINT}"
        ) from None


def resolve(module: str, qualname: str) -> Any:
    """The object ``module.qualname`` names (imports ``module``)."""
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _kind(v: Any) -> str:
    t = type(v)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__


def describe(value: Any, where: str) -> Any:
    """The JSON description of one argument; ``ValueError`` naming
    ``where`` (e.g. ``argument 2``) for a value a worker cannot rebuild."""
    t = type(value)
    if isinstance(value, enum.Enum):
        try:
            ref = reference(t)
        except NotImportable as e:
            raise ValueError(f"{where}: the enum {e}; {_MAIN_HINT}") from None
        return {"enum": {**ref, "name": value.name}}
    if value is None or t is bool or t is str:
        return {"v": value}
    if t is int:
        return {"v": value} if -(2**63) <= value < 2**64 else {"int": str(value)}
    if t is float:
        return {"v": value} if math.isfinite(value) else {"float": repr(value)}
    if t is bytes:
        return {"bytes": base64.b64encode(value).decode()}
    if t is list:
        return {"list": [describe(x, f"{where}[{i}]") for i, x in enumerate(value)]}
    if t is tuple:
        return {"tuple": [describe(x, f"{where}[{i}]") for i, x in enumerate(value)]}
    if t is dict:
        return {
            "dict": [[describe(k, f"{where} key {k!r}"), describe(v, f"{where}[{k!r}]")] for k, v in value.items()]
        }
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(value, torch.Tensor):
            return _describe_tensor(torch, value, where)
        if t is torch.dtype:
            return {"torch_dtype": str(value).split(".", 1)[1]}
        if t is torch.device:
            return {"torch_device": str(value)}
        if t is torch.Size:
            return {"torch_size": [int(d) for d in value]}
    np = sys.modules.get("numpy")
    if np is not None:
        if t is np.ndarray:
            return _describe_array(np, value, where)
        if isinstance(value, np.generic) and value.dtype.kind != "O":
            return {"numpy_scalar": {"dtype": value.dtype.str, "value": describe(value.item(), where)}}
    raise ValueError(
        f'isolate="spawn" rebuilds the arguments in a fresh process from their description, '
        f"but {where} is a {_kind(value)}, which it cannot describe: give torch tensors, numpy "
        "arrays, or plain values (None, bool, int, float, str, bytes, lists, tuples and dicts of "
        'them, enum members), or use isolate="fork" (the worker inherits the arguments as they are)'
    )


def _describe_tensor(torch: Any, t: Any, where: str) -> Dict[str, Any]:
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        raise ValueError(
            f'isolate="spawn": {where} is a tensor subclass ({_kind(t)}), which a fresh process '
            'cannot rebuild from its shape; use isolate="fork"'
        )
    if t.layout != torch.strided or t.is_quantized:
        raise ValueError(
            f'isolate="spawn": {where} is a {t.layout} tensor; only strided (dense) tensors are '
            'rebuilt from their shape; use isolate="fork"'
        )
    return {
        "tensor": {
            "shape": [int(d) for d in t.shape],
            "stride": [int(s) for s in t.stride()],
            "offset": int(t.storage_offset()),
            "dtype": str(t.dtype).split(".", 1)[1],
            "device": str(t.device),
            "requires_grad": bool(t.requires_grad),
        }
    }


def _describe_array(np: Any, a: Any, where: str) -> Dict[str, Any]:
    if a.dtype.kind == "O" or a.dtype.fields is not None:
        raise ValueError(
            f'isolate="spawn": {where} is a numpy array of dtype {a.dtype}, which a fresh process '
            'cannot rebuild from its shape (objects or a record dtype); use isolate="fork"'
        )
    if any(s % a.itemsize for s in a.strides):
        raise ValueError(
            f'isolate="spawn": {where} has strides {a.strides} that are not multiples of its item '
            'size; use isolate="fork"'
        )
    return {"ndarray": {"shape": list(a.shape), "strides": list(a.strides), "dtype": a.dtype.str}}


def describe_call(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """``{"args": [...], "kwargs": {...}}`` for a call."""
    return {
        "args": [describe(a, f"argument {i}") for i, a in enumerate(args)],
        "kwargs": {k: describe(v, f"argument {k!r}") for k, v in kwargs.items()},
    }


# -- in the worker ---------------------------------------------------------------
def rebuild(d: Any) -> Any:
    """The value a description stands for (random contents for tensors and
    arrays). Imports torch or numpy when the description needs them."""
    if not isinstance(d, dict) or len(d) != 1:
        raise ValueError(f"not an argument description: {d!r}")
    ((tag, v),) = d.items()
    if tag == "v":
        return v
    if tag == "int":
        return int(v)
    if tag == "float":
        return float(v)
    if tag == "bytes":
        return base64.b64decode(v)
    if tag == "list":
        return [rebuild(x) for x in v]
    if tag == "tuple":
        return tuple(rebuild(x) for x in v)
    if tag == "dict":
        return {rebuild(k): rebuild(x) for k, x in v}
    if tag == "enum":
        return resolve(v["module"], v["qualname"])[v["name"]]
    if tag == "tensor":
        return _rebuild_tensor(v)
    if tag == "torch_dtype":
        import torch

        return getattr(torch, v)
    if tag == "torch_device":
        import torch

        return torch.device(v)
    if tag == "torch_size":
        import torch

        return torch.Size(v)
    if tag == "ndarray":
        return _rebuild_array(v)
    if tag == "numpy_scalar":
        import numpy as np

        return np.dtype(v["dtype"]).type(rebuild(v["value"]))
    raise ValueError(f"not an argument description: {d!r}")


def _rebuild_tensor(v: Dict[str, Any]) -> Any:
    import torch

    shape, stride, offset = v["shape"], v["stride"], v["offset"]
    dtype = getattr(torch, v["dtype"])
    device = torch.device(v["device"])
    if any(s == 0 for s in shape):
        needed = offset
    else:
        needed = offset + 1 + sum((s - 1) * st for s, st in zip(shape, stride))
    if dtype.is_floating_point:
        if dtype.itemsize == 1:  # float8: no randn of its own
            buf = torch.randn(needed, dtype=torch.float16, device=device).to(dtype)
        else:
            buf = torch.randn(needed, dtype=dtype, device=device)
    else:
        buf = torch.zeros(needed, dtype=dtype, device=device)
    t = torch.as_strided(buf, shape, stride, offset)
    if v.get("requires_grad"):
        t = t.detach().requires_grad_(True)
    return t


def _rebuild_array(v: Dict[str, Any]) -> Any:
    import numpy as np

    dtype = np.dtype(v["dtype"])
    shape, strides = tuple(v["shape"]), tuple(v["strides"])
    if any(s == 0 for s in shape):
        return np.empty(shape, dtype)
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) + dtype.itemsize
    count = (hi - lo) // dtype.itemsize
    if dtype.kind in "fc":
        flat = np.random.default_rng().standard_normal(count).astype(dtype)
    else:
        flat = np.zeros(count, dtype)
    return np.ndarray(shape, dtype, buffer=flat, offset=-lo, strides=strides)


def rebuild_call(spec: Dict[str, Any]) -> Tuple[List[Any], Dict[str, Any]]:
    """The arguments of a ``describe_call`` description."""
    return [rebuild(a) for a in spec["args"]], {k: rebuild(x) for k, x in spec["kwargs"].items()}


def import_named(ref: Optional[Dict[str, str]]) -> Optional[Callable[..., Any]]:
    """The callable a ``reference`` names, or None."""
    if ref is None:
        return None
    return resolve(ref["module"], ref["qualname"])
