"""FlashInfer's own `load_configs` reads ranktune's export of real FlashInfer
caches (written by FlashInfer 0.7.4 and 0.6.15 themselves,
crates/formats/tests/fixtures/peers/flashinfer-*/).

Each fixture goes through `ranktune cache import` and `cache export
--format flashinfer`; then, in a fresh process, FlashInfer's real
`AutoTuner` (only its autotuner modules, imported from the unpacked wheel
with the stand-ins of tools/peer-fixtures/flashinfer_fixtures.py) loads the
export and the original: it must accept the export and hold the same
configs, policies, selection records and product records from both, and
its own `save_configs` of what it read from the export must write the
fixture again, byte for byte.

Needs the unpacked flashinfer-python wheels: `$RANKTUNE_PEER_WHEELS/
flashinfer-<version>/flashinfer/autotuner/` (.ci/run downloads them).
Skipped outside CI when missing, a failure in CI."""

import json
import os
import subprocess
import sys

import pytest

from conftest import IN_CI

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEERS = os.path.join(ROOT, "crates", "formats", "tests", "fixtures", "peers")
TOOLS = os.path.join(ROOT, "tools", "peer-fixtures")
VERSIONS = ["0.7.4", "0.6.15"]
FILES = ["tuned.json", "merged.json"]

LOAD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import flashinfer_fixtures

at = flashinfer_fixtures.load_tuner(sys.argv[2])
out = {}
for label, path in (("export", sys.argv[3]), ("original", sys.argv[4])):
    tuner = at.AutoTuner()
    ok = tuner.load_configs(path)
    got = {"loaded": ok,
           "configs": {k: repr(v) for k, v in tuner._file_configs.items()},
           "policies": {k: repr(v) for k, v in getattr(tuner, "_file_config_policies", {}).items()},
           "selections": {k: repr(v) for k, v in getattr(tuner, "_file_config_selections", {}).items()},
           "records": repr(getattr(tuner, "_namespaced_records", None))}
    if label == "export":
        tuner.save_configs(sys.argv[5])
    out[label] = got
print(json.dumps(out))
"""


def wheel_dir(version):
    base = os.environ.get("RANKTUNE_PEER_WHEELS", "")
    path = os.path.join(base, f"flashinfer-{version}")
    if not base or not os.path.isdir(os.path.join(path, "flashinfer", "autotuner")):
        msg = (f"the unpacked flashinfer-python {version} wheel is missing: set RANKTUNE_PEER_WHEELS "
               f"to a folder holding flashinfer-{version}/ (pip download flashinfer-python=={version} "
               "--no-deps, then unzip; .ci/run does this)")
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", FILES)
def test_flashinfer_loads_the_export(cli, tmp_path, version, name):
    wheel = wheel_dir(version)
    fixture = os.path.join(PEERS, f"flashinfer-{version}", name)
    cache = tmp_path / "cache.json"
    exported = tmp_path / "exported.json"
    resaved = tmp_path / "resaved.json"
    r = subprocess.run([cli, "cache", "import", str(cache), fixture, "--format", "flashinfer"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([cli, "cache", "export", str(cache), "-o", str(exported),
                        "--format", "flashinfer"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    out = subprocess.run([sys.executable, "-c", LOAD, TOOLS, wheel, str(exported), fixture,
                          str(resaved)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["export"]["loaded"] is True, out.stderr
    assert got["original"]["loaded"] is True, out.stderr
    with open(fixture) as f:
        entries = [k for k in json.load(f) if not k.startswith("_")]
    assert len(got["export"]["configs"]) == len(entries) >= 30
    assert got["export"] == got["original"]
    # FlashInfer's own save of what it read from ranktune's export is the
    # fixture FlashInfer wrote.
    with open(fixture) as f, open(resaved) as g:
        assert g.read() == f.read()
