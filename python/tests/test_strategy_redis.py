"""strategy= with a redis:// cache (issue 24 item 4): Python ranks meet on
the cache's Redis server, exactly as `ranktune tune --cache redis://...`
does, whatever their working directories; nothing is created in a local
directory named after the URL."""

import json

import pytest

from conftest import run_py, wait_ok
from test_cache import _redis_server

RANK = """
import json, os, sys, time, warnings, ranktune
from ranktune import _ranktune
def cand(delay):
    def f(n):
        time.sleep(delay)
        return n * 2
    return f
f = ranktune.autotune("double", {"slow": cand(0.02), "fast": cand(0.0)},
                      key=lambda n: n, cache=sys.argv[1], strategy="broadcast")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with ranktune.tuning():
        assert f(100) == 200
from ranktune.tune import _coordinator
print(json.dumps({"fallbacks": f.tuner.fallbacks, "measured": f.tuner.measured,
                  "meets": _coordinator(f.tuner._cache).describe(),
                  "cwd": sorted(os.listdir("."))}))
"""


def _require_password(port, password):
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        cmd = ["CONFIG", "SET", "requirepass", password]
        s.sendall(f"*{len(cmd)}\r\n".encode() + b"".join(
            f"${len(a.encode())}\r\n{a}\r\n".encode() for a in cmd))
        assert s.recv(64).startswith(b"+OK")


@pytest.mark.parametrize("password", [None, "Zm9v/YmFy+cXV4"])
def test_ranks_in_different_directories_meet_on_the_cache_server(tmp_path, password):
    server, port = _redis_server(tmp_path)
    try:
        auth = ""
        if password:
            _require_password(port, password)
            auth = f":{password}@"
        url = f"redis://{auth}127.0.0.1:{port}/0?prefix=pyjob"
        procs = []
        for r in range(2):
            wd = tmp_path / f"rank{r}"
            wd.mkdir()
            env = {"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r),
                   "RANKTUNE_JOB_ID": "py-redis", "RANKTUNE_STRATEGY_TIMEOUT": "20"}
            env.pop("RANKTUNE_COLLECTIVE", None)
            procs.append(run_py(RANK, url, env=env, cwd=wd))
        outs = [json.loads(o) for o in wait_ok(procs, timeout=120)]
    finally:
        server.kill()
        server.wait()
    for r, o in enumerate(outs):
        assert o["fallbacks"] == [], o
        assert not password or password not in json.dumps(o), o
        assert "Redis" in o["meets"] and f"127.0.0.1:{port}" in o["meets"], o
        # Nothing like ./redis:/127.0.0.1:PORT/.ranktune-collective/ appears.
        assert o["cwd"] == [], o
    # broadcast: rank 0 measured, rank 1 did not.
    assert [o["measured"] for o in outs] == [1, 0]

