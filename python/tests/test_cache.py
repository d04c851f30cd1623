import fcntl
import json
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import ranktune
from conftest import run_py, wait_ok


def entry(op, rank=0, tactic=1, time_us=10.0, runner="r"):
    return {"op": op, "runner": runner, "bucket": [[64, 64]], "tactic": tactic,
            "time_us": time_us, "rank": rank}


def test_save_then_entries_round_trip(tmp_path):
    c = ranktune.Cache(tmp_path / "tune.json")
    report = c.save([entry("gemm", tactic={"tile": [8, 4]}), entry("softmax", rank=None, tactic="x")])
    assert report == {"written": 2, "total": 2}
    got = {(e["section"], e["op"]): e for e in c.entries()}
    assert got[("rank_0", "gemm")]["tactic"] == {"tile": [8, 4]}
    assert got[("shared", "softmax")]["rank"] is None
    assert got[("rank_0", "gemm")]["stale"] is False
    assert [e["op"] for e in c.entries(rank=0)] == ["gemm"]
    assert c.check() == []


def test_save_rejects_bad_entries_and_keeps_the_file(tmp_path):
    c = ranktune.Cache(tmp_path / "tune.json")
    c.save([entry("gemm")])
    with pytest.raises(ValueError, match=r"entries\[0\].*time_us"):
        c.save([{"op": "x", "runner": "r", "bucket": [[1]]}])
    with pytest.raises(ValueError, match="time_us is -1"):
        c.save([entry("x", time_us=-1.0)])
    with pytest.raises(TypeError, match="object values cannot be stored"):
        c.save([entry("x", tactic=object())])
    assert [e["op"] for e in c.entries()] == ["gemm"]


def test_corrupt_file_raises_corruptfile_and_check_reports_it(tmp_path):
    p = tmp_path / "tune.json"
    p.write_text('{"format": "ranktune-cache", "sections": {')
    c = ranktune.Cache(p)
    with pytest.raises(ranktune.CorruptFile, match="does not parse"):
        c.entries()
    assert issubclass(ranktune.CorruptFile, ranktune.Error)
    problems = c.check()
    assert len(problems) == 1 and problems[0].startswith("unusable:")


def _redis_server(tmp_path):
    """A redis-server on a free loopback port (skipped locally when none is
    installed; in CI it must be there)."""
    import shutil

    from conftest import IN_CI

    exe = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)
    if exe is None:
        if IN_CI:
            pytest.fail("redis-server is not installed, but CI is set: .ci/run must install it")
        pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
    # Ports below the kernel's range for outgoing connections, so no client
    # is given ours meanwhile; a start counts only when the server answering
    # is the process started (INFO server names its pid), else another port.
    for _ in range(5):
        port = _free_port_below_ephemeral()
        proc = subprocess.Popen(
            [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while proc.poll() is None and time.time() < deadline:
            if _answers_as(port, proc.pid):
                return proc, port
            time.sleep(0.02)
        proc.kill()
        proc.wait()
    pytest.fail("redis-server did not start on any of five ports")


def _free_port_below_ephemeral():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            floor = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        floor = 32768
    while True:
        port = random.randrange(10000, floor) if floor > 11000 else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]


def _answers_as(port, pid):
    """Whether the server on `port` is process `pid` (`INFO server`)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"INFO server\r\n")
            got = b""
            while b"process_id:" not in got or not got.endswith(b"\r\n\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
            return f"\nprocess_id:{pid}\r\n".encode() in got
    except OSError:
        return False


def test_a_redis_cache_saves_lists_and_checks(tmp_path):
    proc, port = _redis_server(tmp_path)
    try:
        url = f"redis://127.0.0.1:{port}/0?prefix=py"
        c = ranktune.Cache(url)
        assert c.location == url
        assert c.save([entry("gemm"), entry("softmax", rank=1)]) == {"written": 2, "total": 2}
        assert c.save([entry("rmsnorm", rank=None)])["total"] == 3
        assert sorted(e["op"] for e in c.entries()) == ["gemm", "rmsnorm", "softmax"]
        assert [e["op"] for e in c.entries(rank=1)] == ["softmax"]
        assert c.check() == []
        # Passwords never show.
        hidden = ranktune.Cache(f"redis://u:hunter2@127.0.0.1:{port}/0")
        assert "hunter2" not in repr(hidden) and "hunter2" not in hidden.location
    finally:
        proc.kill()
        proc.wait()


def test_an_unknown_scheme_is_a_clear_error():
    with pytest.raises(ValueError, match="not a cache location this build knows"):
        ranktune.Cache("valkey://localhost/0")


def test_lock_timeout_is_its_own_exception(tmp_path):
    p = tmp_path / "tune.json"
    ranktune.Cache(p).save([entry("a")])
    with open(str(p) + ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = run_py(
            """
            import sys, ranktune
            try:
                ranktune.Cache(sys.argv[1]).save([{"op": "b", "runner": "r", "bucket": [[1]], "time_us": 1.0}])
            except ranktune.LockTimeout as e:
                print("LockTimeout:", e)
            """,
            p,
            env={"RANKTUNE_LOCK_TIMEOUT": "0.3"},
        )
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "LockTimeout: saving into" in out and "timed out after" in out and "RANKTUNE_LOCK_TIMEOUT" in out


def test_32_processes_save_at_once_and_nothing_is_lost(tmp_path):
    p = tmp_path / "tune.json"
    code = """
        import sys, ranktune
        rank = int(sys.argv[2])
        c = ranktune.Cache(sys.argv[1])
        for i in range(4):
            c.save([{"op": f"op{i}", "runner": "r", "bucket": [[i]], "tactic": rank,
                     "time_us": 1.0 + rank, "rank": rank}])
        """
    procs = [run_py(code, p, r) for r in range(32)]
    wait_ok(procs)
    got = {(e["rank"], e["op"]) for e in ranktune.Cache(p).entries()}
    assert got == {(r, f"op{i}") for r in range(32) for i in range(4)}
    assert not any(x.startswith("unusable") for x in ranktune.Cache(p).check())


def test_writer_killed_mid_save_leaves_a_valid_file_with_every_returned_save(tmp_path):
    p = tmp_path / "tune.json"
    proc = run_py(
        """
        import sys, ranktune
        c = ranktune.Cache(sys.argv[1])
        i = 0
        while True:
            c.save([{"op": f"op{i}", "runner": "r", "bucket": [[i]], "time_us": 1.0,
                     "tactic": "x" * 2000, "rank": 0}])
            print(i, flush=True)
            i += 1
        """,
        p,
    )
    returned = []
    deadline = time.time() + 60
    while len(returned) < 30 and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        returned.append(int(line))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(returned) >= 30, proc.stderr.read()
    c = ranktune.Cache(p)
    ops = {e["op"] for e in c.entries()}
    assert {f"op{i}" for i in returned} <= ops
    assert not any(x.startswith("unusable") for x in c.check())
    # The next save works and keeps everything.
    c.save([entry("after")])
    assert {f"op{i}" for i in returned} | {"after"} <= {e["op"] for e in c.entries()}


def test_python_cache_read_by_cli_and_cli_cache_read_by_python(tmp_path, cli):
    a = tmp_path / "a.json"
    ranktune.Cache(a).save([entry("gemm", rank=0, tactic=[1, 2]), entry("gemm", rank=1, tactic=[3, 4])])
    shown = json.loads(subprocess.run([cli, "cache", "show", "--json", str(a)], check=True,
                                      capture_output=True, text=True).stdout)
    assert shown["entries"] == ranktune.Cache(a).entries()
    # check: same lines as the CLI (here: the ranks disagree)
    out = subprocess.run([cli, "cache", "check", str(a)], capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stdout.splitlines() == ranktune.Cache(a).check()
    # The reverse: a cache the CLI wrote (merged from a.json into b.json).
    b = tmp_path / "b.json"
    subprocess.run([cli, "cache", "merge", str(a), "-o", str(b)], check=True, capture_output=True)
    shown_b = json.loads(subprocess.run([cli, "cache", "show", "--json", str(b)], check=True,
                                        capture_output=True, text=True).stdout)
    assert ranktune.Cache(b).entries() == shown_b["entries"]
    assert {(e["rank"], json.dumps(e["tactic"])) for e in ranktune.Cache(b).entries()} == {
        (0, "[1, 2]"), (1, "[3, 4]")}


def test_export_trtllm_and_import_back(tmp_path, cli):
    a = tmp_path / "a.json"
    ranktune.Cache(a).save([entry("gemm", rank=0, tactic=7, time_us=20.0)])
    out = tmp_path / "trt.json"
    assert ranktune.Cache(a).export(out)["written"] == 1
    with pytest.raises(ranktune.Error, match="force=True"):
        ranktune.Cache(a).export(out)
    b = ranktune.Cache(tmp_path / "b.json")
    r = b.import_file(out, rank=0)
    assert r["format"] == "trtllm" and r["written"] == 1
    (e,) = b.entries()
    assert (e["op"], e["tactic"], e["time_us"], e["rank"]) == ("gemm", 7, 20.0, 0)
    # The CLI imports the file Python exported the same way.
    c = tmp_path / "c.json"
    subprocess.run([cli, "cache", "import", str(c), str(out), "--rank", "0"], check=True,
                   capture_output=True)
    assert [(x["op"], x["tactic"]) for x in ranktune.Cache(c).entries()] == [("gemm", 7)]


def test_rank_info_follows_the_launcher_environment():
    proc = run_py("import ranktune, json; print(json.dumps(ranktune.rank_info()))",
                  env={"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"})
    (out,) = wait_ok([proc])
    info = json.loads(out)
    assert (info["rank"], info["world_size"], info["local_rank"]) == (3, 8, 1)
    bad = run_py("""
        import ranktune
        try:
            ranktune.rank_info()
        except ranktune.Error as e:
            print(e)
        """, env={"RANK": "x", "WORLD_SIZE": "2"})
    (out,) = wait_ok([bad])
    assert 'RANK="x" is not a non-negative integer' in out


def test_threads_save_and_dispatch_at_once(tmp_path):
    """The package is safe from several threads: 8 threads saving into one
    cache lose nothing, and tuned calls from many threads all return right."""
    import threading

    p = tmp_path / "threads.json"
    cache = ranktune.Cache(p)
    errors = []

    def saver(t):
        try:
            for i in range(20):
                cache.save([{"op": f"t{t}", "runner": "r", "bucket": [[i]], "time_us": 1.0, "rank": t}])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=saver, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(ranktune.Cache(p).entries()) == 8 * 20

    f = ranktune.autotune("inc", {"a": lambda n: n + 1, "b": lambda n: n + 1}, key=lambda n: n, cache=cache)
    with ranktune.tuning():
        f(5)
    results = []

    def caller():
        results.append(all(f(n) == n + 1 for n in range(1, 200)))

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [True] * 8


FIXTURES = Path(__file__).resolve().parents[2] / "crates" / "formats" / "tests" / "fixtures"


def _files(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "fmt, source",
    [
        ("triton", "triton/h100"),
        ("vllm-moe", "vllm_moe/rocm"),
        ("flashinfer", "flashinfer/b200.json"),
        ("trtllm", "trtllm/timings_238.json"),
    ],
)
def test_every_format_imports_and_exports_back_to_the_same_bytes(tmp_path, fmt, source):
    """Python's import_file and export speak every format the CLI does, with
    the same exact round trip (through the same library code)."""
    src = FIXTURES / source
    cache = ranktune.Cache(tmp_path / "c.json")
    r = cache.import_file(src, format=fmt)
    assert r["format"] == fmt and r["written"] > 0, r
    out = tmp_path / "out"
    if src.is_dir():
        e = cache.export(out, format=fmt)
        assert e["written"] == r["written"] and e["files"] >= 1, e
        wanted = {k: v for k, v in _files(src).items()
                  if fmt != "triton" or k.name.endswith(".autotune.json")}
        assert _files(out) == wanted
        with pytest.raises(ranktune.Error, match="force=True"):
            cache.export(out, format=fmt)
    else:
        e = cache.export(out, format=fmt)
        assert e == {"written": r["written"], "skipped": 0, "files": 1}
        assert out.read_bytes() == src.read_bytes()
    with pytest.raises(ValueError, match="use one of"):
        cache.export(tmp_path / "x", format="onnx")


def test_a_password_with_any_character_is_never_printed():
    """Issue: `Cache('redis://:pa/ss@…')` echoed the URL whole."""
    for pw in ["Zq1Xw/Vb9Kp", "Zq2Xw?Vb9Kp", "Zq3Xw#Vb9Kp", "Zq4Xw@Vb9Kp", "/Qr5Tz7Hc%2F"]:
        for url in (f"redis://:{pw}@127.0.0.1:1/0?prefix=x", f"redis://:{pw}@/0"):
            texts = []
            try:
                c = ranktune.Cache(url)
                texts += [repr(c), str(c.path)]
                c.entries()
            except Exception as e:  # noqa: BLE001 - every error's text is checked
                texts.append(f"{type(e).__name__}: {e}")
            for t in texts:
                for piece in ("Zq", "Vb9Kp", "Qr5Tz7Hc"):
                    assert piece not in t, f"{pw!r} leaked in {t!r}"


def test_a_missing_file_is_one_rule_for_entries_and_check(tmp_path):
    """Issue: `entries()` returned [] silently where `check()` raised."""
    missing = tmp_path / "nope" / "x.json"
    c = ranktune.Cache(str(missing))
    for call in (c.entries, c.check):
        with pytest.raises(ranktune.Error, match="does not exist"):
            call()
    assert not missing.parent.exists()


def test_children_forked_during_saves_never_hold_the_lock(tmp_path):
    """Issue: a thread saving while the main thread forked sleeping
    children took exactly the children's lifetime (the child kept the
    flock); every save must stay fast and the lock be free afterwards."""
    code = """
import fcntl, os, sys, threading, time
import ranktune
path = sys.argv[1]
c = ranktune.Cache(path)
worst = []
def saver():
    t0 = time.time()
    i = 0
    while time.time() - t0 < 1.5:
        t = time.time()
        c.save([{"op": "gemm", "runner": "r", "bucket": [[i % 32 + 1, 8]], "time_us": 1.0,
                 "rank": 0, "tactic": i}])
        worst.append(time.time() - t)
        i += 1
th = threading.Thread(target=saver)
th.start()
kids = []
t0 = time.time()
while time.time() - t0 < 1.2:
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
    time.sleep(0.005)
th.join()
with open(path + ".lock") as f:
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        free = True
    except OSError:
        free = False
for pid in kids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print(len(kids), len(worst), max(worst), free)
"""
    (out,) = wait_ok([run_py(code, tmp_path / "c.json")], timeout=120)
    kids, saves, worst, free = out.split()
    assert int(kids) > 20 and int(saves) > 5, out
    assert float(worst) < 5.0, f"a save waited {worst} s for a forked child: {out}"
    assert free == "True", out
