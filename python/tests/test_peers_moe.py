"""vLLM's and SGLang's own config loaders read ranktune's export of the
fused-MoE config files their wheels ship (a sample in
crates/formats/tests/fixtures/peers/vllm-*/ and sglang-*/).

The corpus goes through `ranktune cache import` and `cache export --format
vllm-moe`. Then the loaders' real functions — vLLM's `get_config_file_name`
and `get_moe_configs` (vllm/model_executor/layers/fused_moe/fused_moe.py),
SGLang's (sglang/srt/layers/moe/moe_runner/triton_utils/
fused_moe_triton_config.py) — are taken out of the installed source with
`ast` and run with stand-ins for what they query (the device name, vLLM's
`envs`, SGLang's Triton version and runtime context, the logger): for every
file, the loader finds ranktune's export by the name it builds itself, and
returns what it returns for the shipped file.

Needs the unpacked wheels under `$RANKTUNE_PEER_WHEELS/vllm-<version>/` and
`sglang-<version>/` (.ci/run downloads them). Skipped outside CI when
missing, a failure in CI."""

import ast
import functools
import json
import logging
import os
import re
import subprocess
import types
from typing import Any, Dict, List, Optional, Tuple

import pytest

from conftest import IN_CI

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEERS = os.path.join(ROOT, "crates", "formats", "tests", "fixtures", "peers")
VLLM, SGLANG = "vllm-0.34.0", "sglang-0.5.23"
SOURCES = {
    VLLM: "vllm/model_executor/layers/fused_moe/fused_moe.py",
    SGLANG: "sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py",
}
NAME = re.compile(
    r"^E=(\d+),N=(\d+),device_name=(.*?)(?:,dtype=([^,]+?))?(?:,block_shape=\[(\d+), ?(\d+)\])?"
    r"(,per_channel_quant=True)?(,backend=[a-z]+)?(_down)?\.json$"
)


class Logger:
    """Stands in for the peers' loggers (their `*_once` variants too)."""

    def __getattr__(self, name):
        return lambda *a, **k: None


def loader_functions(peer, names, env):
    """The named top-level functions of the peer's installed source, compiled
    into a namespace holding `env` (the stand-ins)."""
    base = os.environ.get("RANKTUNE_PEER_WHEELS", "")
    path = os.path.join(base, peer, SOURCES[peer])
    if not base or not os.path.isfile(path):
        msg = (f"the unpacked {peer} wheel is missing ({SOURCES[peer]}): set RANKTUNE_PEER_WHEELS "
               f"to a folder holding {peer}/ (pip download --no-deps, then unzip; .ci/run does this)")
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert sorted(n.name for n in found) == sorted(names), f"{path} no longer defines {names}"
    ns = {"functools": functools, "json": json, "os": os, "logging": logging, "Any": Any,
          "Dict": Dict, "List": List, "Optional": Optional, "Tuple": Tuple,
          "logger": Logger(), "__file__": os.path.join(env.pop("_here"), "fused_moe.py")}
    ns.update(env)
    exec(compile(ast.Module(body=found, type_ignores=[]), path, "exec"), ns)
    return ns


def files_of(peer):
    out = []
    for folder, _, names in os.walk(os.path.join(PEERS, peer)):
        for name in sorted(names):
            if name.endswith(".json"):
                out.append((os.path.relpath(folder, os.path.join(PEERS, peer)), name))
    return sorted(out)


def ranktune_export(cli, src, dest, tmp_path):
    cache = tmp_path / (os.path.basename(dest) + ".cache.json")
    r = subprocess.run([cli, "cache", "import", str(cache), src, "--format", "vllm-moe"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([cli, "cache", "export", str(cache), "-o", str(dest), "--format", "vllm-moe"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def parse(name):
    m = NAME.match(name)
    assert m, name
    e, n, device, dtype, bn, bk, pcq, backend, down = m.groups()
    return dict(E=int(e), N=int(n), device=device, dtype=dtype,
                block=(int(bn), int(bk)) if bn else None, pcq=bool(pcq), backend=backend,
                down=bool(down))


def test_vllm_get_moe_configs_reads_the_export(cli, tmp_path):
    out = tmp_path / "vllm-export"
    ranktune_export(cli, os.path.join(PEERS, VLLM), out, tmp_path)
    device = {"name": None}
    envs = types.SimpleNamespace(VLLM_BATCH_INVARIANT=False, VLLM_TUNED_CONFIG_FOLDER=None)
    ns = loader_functions(VLLM, ["get_config_file_name", "get_moe_configs"], {
        "envs": envs, "get_device_name_as_file_name": lambda: device["name"],
        "_here": str(tmp_path / "no-such-package")})
    read = 0
    for _, name in files_of(VLLM):
        p = parse(name)
        if p["backend"]:
            continue  # read by the FlyDSL backend's own lookup, not get_moe_configs
        device["name"] = p["device"]
        got = {}
        for label, folder in (("export", str(out)), ("shipped", os.path.join(PEERS, VLLM))):
            envs.VLLM_TUNED_CONFIG_FOLDER = folder
            ns["get_moe_configs"].cache_clear()
            block = p["block"] or (None, None)
            got[label] = ns["get_moe_configs"](p["E"], p["N"], p["dtype"], block[0], block[1],
                                               down_moe=p["down"])
        assert got["export"] is not None, f"vLLM did not find {name} in the export"
        assert got["export"] == got["shipped"], name
        with open(os.path.join(PEERS, VLLM, name)) as f:
            shipped = json.load(f)
        shipped.pop("triton_version", None)
        assert got["export"] == {int(k): v for k, v in shipped.items()}, name
        read += 1
    assert read >= 35


def test_sglang_get_moe_configs_reads_the_export(cli, tmp_path):
    device = {"name": None}
    triton = types.SimpleNamespace(__version__=None)
    exec_ctx = types.SimpleNamespace(deterministic=types.SimpleNamespace(
        enable_deterministic_inference=False))
    ns = loader_functions(SGLANG, ["get_config_file_name", "get_moe_configs"], {
        "triton": triton, "get_device_name": lambda: device["name"], "get_exec": lambda: exec_ctx,
        "_here": str(tmp_path / "no-such-package")})
    files = files_of(SGLANG)
    out = tmp_path / "sglang-export"
    for folder in sorted({f for f, _ in files}):
        ranktune_export(cli, os.path.join(PEERS, SGLANG, folder), out / "configs" / folder,
                        tmp_path)
    for folder, name in files:
        p = parse(name)
        device["name"] = p["device"]
        triton.__version__ = folder.removeprefix("triton_").replace("_", ".")
        block = p["block"] or (0, 0)
        got = {}
        for label, root in (("export", str(out)), ("shipped", os.path.join(PEERS, SGLANG))):
            os.environ["SGLANG_MOE_CONFIG_DIR"] = root
            ns["get_moe_configs"].cache_clear()
            if label == "shipped":
                # The corpus keeps SGLang's layout minus the `configs/` level.
                os.environ["SGLANG_MOE_CONFIG_DIR"] = str(tmp_path / "shipped")
                link = tmp_path / "shipped" / "configs"
                if not link.exists():
                    link.parent.mkdir(exist_ok=True)
                    link.symlink_to(os.path.join(PEERS, SGLANG))
            got[label] = ns["get_moe_configs"](p["E"], p["N"], p["dtype"], block[0], block[1],
                                               per_channel_quant=p["pcq"], down_moe=p["down"])
        os.environ.pop("SGLANG_MOE_CONFIG_DIR", None)
        assert got["export"] is not None, f"SGLang did not find {folder}/{name} in the export"
        assert got["export"] == got["shipped"], name
        with open(os.path.join(PEERS, SGLANG, folder, name)) as f:
            shipped = json.load(f)
        assert got["export"] == {int(k): v for k, v in shipped.items()}, name
    assert len(files) == 40
