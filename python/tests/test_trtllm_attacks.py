"""Issue 37: attacks on the TensorRT-LLM drop-in (``ranktune.trtllm``), each
played with real processes, most of them by two real Unix users sharing a
sticky world-writable directory (as on a cluster's scratch space).

The users (``ranktune-attacker``, ``ranktune-victim``, the same as the Rust
two-user tests) are made with ``useradd`` (root only). Outside CI, when this
is not root or ``useradd`` fails, those tests skip loudly; in CI they fail.
The attacker's plants are made by this (root) process and ``lchown``-ed to
the attacker, as the Rust tests do; the victim's save runs in a process of
the victim's own uid and gid.

Attacks 1, 3 and 4 follow a link planted in a sticky directory: with
``fs.protected_symlinks=1`` the kernel refuses to follow it before ranktune
sees it. Those tests pass either way and print which of the two refused.
"""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import ranktune
from conftest import IN_CI

HERE = os.path.dirname(os.path.abspath(__file__))
ATTACKER = "ranktune-attacker"
VICTIM = "ranktune-victim"

# The victim's one entry, as TensorRT-LLM keys it (str() of this tuple is
# the key on disk) and its value (runner_id, tactic, min_time).
KEY = ("trtllm::gemm", "GemmRunner", "0", ((8, 16),))
VALUE = (1, 5, 0.25)
# What the victim's entry looks like in the file.
ON_DISK = {"runner_id": 1, "tactic": "5", "min_time": 0.25}


def protected_symlinks():
    try:
        with open("/proc/sys/fs/protected_symlinks") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _not_possible(why):
    msg = f"two-user attack test cannot run: {why}"
    if IN_CI:
        pytest.fail(msg)
    print(f"SKIPPED (not in CI): {msg}", file=sys.stderr)
    pytest.skip(f"SKIPPED LOUDLY (not in CI): {msg}")


def _ids(name):
    def one(flag):
        r = subprocess.run(["id", flag, name], capture_output=True, text=True)
        try:
            return int(r.stdout.strip()) if r.returncode == 0 else None
        except ValueError:
            return None

    return one("-u"), one("-g")


def _user(name):
    """(uid, gid) of `name`, made with useradd when missing; None when users
    cannot be made here."""
    uid, gid = _ids(name)
    if uid is None:
        try:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                capture_output=True,
            )
        except OSError:
            pass
        # Another test run may have made it meanwhile: look again.
        uid, gid = _ids(name)
    if uid is None or gid is None:
        return None
    return uid, gid


# What each victim process runs: a TensorRT-LLM cache object (the stand-in)
# patched with ranktune.trtllm, one save; the outcome as JSON on the last
# line of stdout.
SAVE = """
    import ast, json, sys, time
    spec = json.loads(sys.argv[1])
    import ranktune, ranktune.trtllm, trtllm_standin
    cls = ranktune.trtllm.install(trtllm_standin.AutoTunerProfilingCache)
    o = cls()
    o.cache = {ast.literal_eval(k): tuple(v) for k, v in spec["cache"]}
    out = {"ok": True}
    t0 = time.monotonic()
    try:
        o.save_cache(spec["path"], spec["rank"])
    except BaseException as e:
        out = {
            "ok": False,
            "type": type(e).__module__ + "." + type(e).__qualname__,
            "ranktune_error": isinstance(e, ranktune.Error),
            "lock_timeout": isinstance(e, getattr(ranktune, "LockTimeout", ())),
            "message": str(e),
        }
    out["elapsed"] = time.monotonic() - t0
    sys.stderr.flush()
    print(json.dumps(out), flush=True)
    """


def _pythonpath(extra):
    """`extra` first, then where this process found ranktune (so a child of
    another user imports the same build), then PYTHONPATH."""
    parts = [extra, os.path.dirname(os.path.dirname(os.path.abspath(ranktune.__file__)))]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)


def _env(home, lib, **more):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "PYTHONPATH": _pythonpath(lib),
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
    }
    env.update(more)
    return env


def _outcome(proc_out, proc_err, rc):
    lines = [l for l in proc_out.splitlines() if l.strip()]
    assert rc == 0 and lines, f"victim process failed ({rc}):\nstdout: {proc_out}\nstderr: {proc_err}"
    out = json.loads(lines[-1])
    out["stderr"] = proc_err
    return out


def _communicate(p, timeout):
    """(stdout, stderr) of `p`; (None, stderr) when it ran past `timeout`
    seconds (then it is killed)."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    p.kill()
    _, se = p.communicate()
    return None, se


def _save_once(path, env, timeout=10):
    """One patched save of KEY into `path` by another process, as this
    user: (its outcome, seconds it took, its stderr); (None, ...) when it
    ran past `timeout` seconds (then it is killed)."""
    spec = {"path": path, "rank": 0, "cache": [[repr(KEY), list(VALUE)]]}
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SAVE), json.dumps(spec)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    so, se = _communicate(p, timeout)
    elapsed = time.monotonic() - t0
    return (None if so is None else _outcome(so, se, p.returncode)), elapsed, se


class Scene:
    """A fresh root (0755, root's) holding `shared` (root's, 01777, like
    /tmp), a `lib` dir with the stand-in, the victim's HOME (0700) and the
    two users."""

    def __init__(self):
        if os.geteuid() != 0:
            _not_possible("not root, cannot make users")
        attacker, victim = _user(ATTACKER), _user(VICTIM)
        if attacker is None or victim is None:
            _not_possible("useradd failed (or no `id`)")
        self.attacker, self.victim = attacker, victim
        self.root = tempfile.mkdtemp(prefix="ranktune-attacks-")
        try:
            os.chmod(self.root, 0o755)
            self.shared = self.mkdir("shared", 0o1777)
            self.lib = self.mkdir("lib", 0o755)
            shutil.copy(os.path.join(HERE, "trtllm_standin.py"), self.lib)
            os.chmod(os.path.join(self.lib, "trtllm_standin.py"), 0o644)
            self.home = self.mkdir("victim-HOME", 0o700, owner=victim)
            self._check_victim_can_import()
        except BaseException:
            self.cleanup()
            raise

    def mkdir(self, name, mode, owner=None):
        p = os.path.join(self.root, name)
        os.mkdir(p)
        if owner:
            os.chown(p, *owner)
        os.chmod(p, mode)
        return p

    def write(self, path, text, owner, mode):
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, *owner)
        os.chmod(path, mode)

    def link(self, target, path, owner):
        os.symlink(target, path)
        os.lchown(path, *owner)

    def _check_victim_can_import(self):
        """Picks an interpreter the victim can run that imports this
        process's ranktune: this one, else (when it lies under a directory
        others cannot enter, e.g. a venv made from a Python under /root) a
        system one of the same version with ranktune's directory on
        PYTHONPATH."""
        ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        candidates = [sys.executable, os.path.realpath(sys.executable), getattr(sys, "_base_executable", "")]
        candidates += [os.path.join(d, ver) for d in ("/usr/local/bin", "/usr/bin", "/bin")]
        errors = []
        for exe in dict.fromkeys(c for c in candidates if c):
            if not os.path.isfile(exe):
                continue
            try:
                r = subprocess.run(
                    [exe, "-c", "import sys, ranktune.trtllm, trtllm_standin; print(sys.version_info[:2])"],
                    env=_env(self.home, self.lib),
                    cwd=self.home,
                    user=self.victim[0],
                    group=self.victim[1],
                    extra_groups=[],
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            except OSError as e:
                errors.append(f"{exe}: {e}")
                continue
            if r.returncode == 0 and r.stdout.strip() == str(tuple(sys.version_info[:2])):
                self.python = exe
                print(f"the victim's processes run {exe}")
                return
            errors.append(f"{exe}: {r.stderr.strip()[-300:] or r.stdout.strip()}")
        _not_possible(
            f"user {VICTIM} cannot run a {ver} that imports ranktune from {_pythonpath(self.lib)} "
            f"(every directory on the way must be world-searchable and the files world-readable): "
            + "; ".join(errors)
        )

    def save(self, path, as_user=True, timeout=30, cache=((KEY, VALUE),), rank=0, env=None):
        """One save of `cache` into `path` through the drop-in, in a process
        of the victim (or, `as_user=False`, of this process's uid: root)."""
        spec = {"path": path, "rank": rank, "cache": [[repr(k), list(v)] for k, v in cache]}
        kw = {}
        if as_user:
            kw = {"user": self.victim[0], "group": self.victim[1], "extra_groups": []}
        r = subprocess.run(
            [self.python if as_user else sys.executable, "-c", textwrap.dedent(SAVE), json.dumps(spec)],
            env=_env(self.home, self.lib, **(env or {})),
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
            **kw,
        )
        return _outcome(r.stdout, r.stderr, r.returncode)

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def scene():
    s = Scene()
    try:
        yield s
    finally:
        s.cleanup()


def _listing(d):
    """{name: (kind, bytes)} of `d`, links not followed."""
    out = {}
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            with open(p, "rb") as f:
                out[name] = ("file", f.read())
        elif stat.S_ISLNK(st.st_mode):
            out[name] = ("link", os.readlink(p))
        else:
            out[name] = ("other", stat.S_IFMT(st.st_mode))
    return out


def _names(msg, name):
    """Whether `msg` names `name` (a path or file name), not merely a longer
    name starting with it (`c.json` is not named by `c.json.lock`)."""
    return re.search(re.escape(name) + r"(?![\w.-])", msg) is not None


def _who_refused(out, link_name):
    """Which of the two refused a planted link (printed by the tests)."""
    msg = out.get("message", "")
    if out["ok"]:
        return "no refusal: the save succeeded"
    if "symbolic link" in msg and _names(msg, link_name):
        return f"ranktune refused the link: {msg}"
    if protected_symlinks() != 0:
        return f"the kernel refused (fs.protected_symlinks={protected_symlinks()}): {out.get('type')}: {msg}"
    return f"neither refused the link as such; the save failed: {out.get('type')}: {msg}"


def _require_link_refusal(out, link_name):
    """A refusal (ranktune.Error) that names `link_name` as a symbolic link;
    with fs.protected_symlinks=1 the kernel may refuse first (any error)."""
    assert not out["ok"], f"the save went through the planted link {link_name}: {out}"
    if protected_symlinks() == 0:
        assert out["ranktune_error"], f"not a ranktune.Error: {out}"
        assert "symbolic link" in out["message"] and _names(out["message"], link_name), (
            f"the error does not name {link_name} as a symbolic link: {out}"
        )


# ---------------------------------------------------------------- attack 1


def test_attack_1_spool_dir_linked_to_victims_private_dir_deletes_nothing(scene):
    """Issue 37, attack 1: the attacker plants `c.json.trtllm-spool` in the
    sticky shared directory as a symbolic link to the victim's 0700
    directory holding `*.json` files of the victim. A victim save through
    the drop-in must leave that directory exactly as it was (nothing
    deleted, changed or created); the save either refuses with an error
    naming the spool path as a symbolic link or succeeds without using the
    link. (With fs.protected_symlinks=1 the kernel may refuse first.)"""
    private = scene.mkdir("victim-private", 0o700, owner=scene.victim)
    for name in ("model.json", "notes.json", "autotuner.json"):
        scene.write(os.path.join(private, name), json.dumps({"mine": name}), scene.victim, 0o600)
    before = _listing(private)
    spool = os.path.join(scene.shared, "c.json.trtllm-spool")
    scene.link(private, spool, scene.attacker)

    out = scene.save(os.path.join(scene.shared, "c.json"))
    print(f"attack 1: {_who_refused(out, 'shared/c.json.trtllm-spool')}")

    after = _listing(private)
    assert after == before, (
        f"the victim's private directory changed: before {sorted(before)}, after {sorted(after)}; "
        f"save: {out}"
    )
    if out["ok"]:
        with open(os.path.join(scene.shared, "c.json")) as f:
            doc = json.load(f)
        assert doc["rank_0"][str(KEY)] == ON_DISK, doc
    else:
        # With fs.protected_symlinks=1 the kernel may refuse first, with
        # whatever error the code meets.
        _require_link_refusal(out, "shared/c.json.trtllm-spool")
    assert os.path.islink(spool) and os.readlink(spool) == private


# ---------------------------------------------------------------- attack 2


def test_attack_2_attackers_spool_dir_cannot_inject_entries(scene):
    """Issue 37, attack 2: the attacker plants `c.json.trtllm-spool` as a
    real 0777 directory of their own holding a valid spool file whose name
    sorts last, carrying the victim's own key with runner 7, tactic 666,
    time 0. The victim's file must never hold the attacker's entry: either
    the save succeeds and the rank section has the victim's values, or it
    raises ranktune.Error (e.g. naming the directory of another user)."""
    spool = scene.mkdir(os.path.join("shared", "c.json.trtllm-spool"), 0o777, owner=scene.attacker)
    evil = {"metadata": [], "sections": [["rank_0", [[str(KEY), 7, "666", 0]]]]}
    scene.write(os.path.join(spool, "zzzzzzzzzzzzzzzzzzzzzzzz-1-0.json"), json.dumps(evil), scene.attacker, 0o666)
    path = os.path.join(scene.shared, "c.json")

    out = scene.save(path)

    doc = None
    if os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
    entry = ((doc or {}).get("rank_0") or {}).get(str(KEY))
    assert not (entry and entry.get("runner_id") == 7 and entry.get("tactic") == "666"), (
        f"the attacker's spool entry replaced the victim's: {entry}; save: {out}"
    )
    if out["ok"]:
        assert entry == ON_DISK, f"the victim's entry is not in the file: {doc}"
    else:
        assert out["ranktune_error"], f"not a ranktune.Error: {out}"


# ---------------------------------------------------------------- attack 3


def _trtllm_cache_with(secret):
    return json.dumps(
        {
            "metadata": {
                "lib_version": "1.2.0rc0.standin",
                "creation_timestamp": 1700000000.0,
                "device_name": "NVIDIA H100 80GB HBM3",
                "device_capability": [9, 0],
            },
            "shared": {},
            "rank_0": {},
            "private_notes": {"token": secret},
        },
        indent=2,
    )


def test_attack_3_cache_file_linked_to_victims_private_file_leaks_nothing(scene):
    """Issue 37, attack 3: the attacker plants `c.json` in the sticky shared
    directory as a symbolic link to a 0644 file inside the victim's 0700
    directory (a TensorRT-LLM cache with an extra member holding a secret).
    Played twice: the victim is `ranktune-victim` (`c.json`), and root
    (`d.json`, linked into a 0700 directory of root's; root may replace the
    attacker's link in the sticky directory, so today's code leaves the
    secret there in a 0644 file). Each save must raise ranktune.Error naming
    its link as a symbolic link (or, with fs.protected_symlinks=1, the
    kernel refuses); no file in the shared directory readable by others may
    contain either secret, and the private files are left as they were."""
    plays = []
    for name, who, owner in (("c.json", "victim", scene.victim), ("d.json", "root", (0, 0))):
        secret = f"SECRET-7c1e0d2b-of-{who}"
        private = scene.mkdir(f"{who}-private", 0o700, owner=owner)
        target = os.path.join(private, "autotuner.json")
        text = _trtllm_cache_with(secret)
        scene.write(target, text, owner, 0o644)
        path = os.path.join(scene.shared, name)
        scene.link(target, path, scene.attacker)
        out = scene.save(path, as_user=who == "victim")
        print(f"attack 3 ({who}): {_who_refused(out, 'shared/' + name)}")
        plays.append((who, secret, target, text, path, out))

    leaks = []
    for d, dirs, files in os.walk(scene.shared):
        for name in files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_mode & stat.S_IROTH:
                with open(p, "rb") as f:
                    data = f.read()
                for who, secret, *_ in plays:
                    if secret.encode() in data:
                        leaks.append(f"{who}'s secret in {p} ({stat.filemode(st.st_mode)}, uid {st.st_uid})")
    assert not leaks, (
        f"a secret is readable by others in the shared directory: {leaks}; "
        f"saves: {[(who, out) for who, *_, out in plays]}"
    )
    for who, secret, target, text, path, out in plays:
        with open(target) as f:
            assert f.read() == text, f"{who}'s private file changed"
        assert os.path.islink(path), f"{path} is no longer the attacker's link"
        assert out["ok"] is False, f"{who}'s save went through the planted link: {out}"
        _require_link_refusal(out, "shared/" + os.path.basename(path))


# ---------------------------------------------------------------- attack 4


def test_attack_4_lock_file_linked_to_a_missing_path_creates_nothing(scene):
    """Issue 37, attack 4: the attacker plants `c.json.lock` in the sticky
    shared directory as a symbolic link to a path that does not exist, in a
    root-owned directory. A save as root must not create that path and must
    raise an error that names the lock file as a symbolic link (with
    fs.protected_symlinks=1 the kernel may refuse first)."""
    rootonly = scene.mkdir("root-only", 0o755)
    target = os.path.join(rootonly, "created-through-the-link")
    lock = os.path.join(scene.shared, "c.json.lock")
    scene.link(target, lock, scene.attacker)

    out = scene.save(os.path.join(scene.shared, "c.json"), as_user=False)
    print(f"attack 4: {_who_refused(out, 'shared/c.json.lock')}")

    assert not os.path.lexists(target), f"the save as root created {target} through the planted link; save: {out}"
    assert os.listdir(rootonly) == []
    _require_link_refusal(out, "shared/c.json.lock")
    assert os.path.islink(lock)


# ---------------------------------------------------------------- attack 5

HOLD_AND_FORK = """
    import os, sys, time
    import ranktune.trtllm
    with ranktune.trtllm.locked(sys.argv[1]):
        pid = os.fork()
        if pid == 0:
            # The child (a worker, a compiler, ...) outlives the lock's block.
            time.sleep(20)
            os._exit(0)
        print(pid, flush=True)
    """


def test_attack_5_a_child_forked_inside_locked_does_not_keep_the_lock(tmp_path):
    """Issue 37, attack 5: a child forked while `ranktune.trtllm.locked()`
    is held (it lives on ~20 s) must not keep the drop-in's lock: once the
    parent has left the block and exited, another process's `save_cache`
    completes within a few seconds (bound: 8 s)."""
    path = str(tmp_path / "c.json")
    pid_file = tmp_path / "child.pid"
    env = dict(os.environ, PYTHONPATH=_pythonpath(HERE))
    child = None
    try:
        with open(pid_file, "w") as out, open(tmp_path / "stderr", "w+") as err:
            # Files, not pipes: the child keeps what it inherited, and a
            # pipe would stay open for its lifetime.
            r = subprocess.run(
                [sys.executable, "-c", textwrap.dedent(HOLD_AND_FORK), path],
                stdout=out, stderr=err, env=env, timeout=30,
            )
            err.seek(0)
            assert r.returncode == 0, err.read()
        child = int(pid_file.read_text().split()[0])
        res, elapsed, se = _save_once(path, env)
        if res is None:
            pytest.fail(f"save_cache waited over 10 s for a lock kept by a child forked inside locked(); stderr: {se[-500:]}")
        assert res["ok"], res
        assert elapsed < 8, f"save_cache took {elapsed:.1f} s (a forked child kept the lock)"
    finally:
        if child:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ---------------------------------------------------------------- attack 6

TWO_THREADS = """
    import os, sys, threading, time
    import ranktune.trtllm
    path, marks, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    fd = os.open(marks, os.O_RDWR)
    end = time.monotonic() + seconds
    def worker(i):
        while time.monotonic() < end:
            with ranktune.trtllm.locked(path):
                os.pwrite(fd, b"1", i)
                time.sleep(0.01)
                os.pwrite(fd, b"0", i)
            time.sleep(0.001)
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    """

UNPATCHED_LOCKER = """
    import fcntl, os, sys, time
    path, marks, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    fd_marks = os.open(marks, os.O_RDONLY)
    end = time.monotonic() + seconds
    rounds = seen = 0
    while time.monotonic() < end:
        # Exactly as TensorRT-LLM's lock_file_for_cache does.
        fd = os.open(path + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            if b"1" in os.pread(fd_marks, 2, 0):
                seen += 1
            rounds += 1
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)
            os.close(fd)
        time.sleep(0.002)
    print(rounds, seen, flush=True)
    """


def test_attack_6_two_threads_in_locked_keep_tensorrt_llms_lock(tmp_path):
    """Issue 37, attack 6: two threads of one patched process enter
    `ranktune.trtllm.locked()` over and over (overlapping: one waits while
    the other is inside). POSIX `lockf` belongs to the process, so closing
    one thread's descriptor must not hand TensorRT-LLM's lock to an
    unpatched process (plain `fcntl.lockf` on `<file>.lock`) while the
    other thread is inside: over ~4 s of rounds the unpatched process must
    never see a thread inside while it holds the lock."""
    path = str(tmp_path / "c.json")
    marks = tmp_path / "inside"
    marks.write_bytes(b"00")
    env = dict(os.environ, PYTHONPATH=_pythonpath(HERE))
    seconds = 4
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), path, str(marks), str(seconds)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for code in (TWO_THREADS, UNPATCHED_LOCKER)
    ]
    try:
        outs = []
        for p in procs:
            so, se = p.communicate(timeout=25)
            assert p.returncode == 0, f"process failed ({p.returncode}): {se}"
            outs.append(so)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    rounds, seen = map(int, outs[1].split())
    print(f"attack 6: the unpatched process took the lock {rounds} times, saw a thread inside {seen} times")
    assert seen == 0, (
        f"the unpatched process held TensorRT-LLM's lockf while a thread was inside locked() "
        f"in {seen} of {rounds} rounds"
    )
    assert rounds >= 1, "the unpatched process never got the lock in 4 s"


# ---------------------------------------------------------------- attack 7

HOLD_LOCKF = """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1] + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(20)
    """


def test_attack_7_save_gives_up_after_ranktune_lock_timeout(tmp_path):
    """Issue 37, attack 7: another process holds `fcntl.lockf` on
    `<file>.lock` for 20 s. A save through the drop-in with
    RANKTUNE_LOCK_TIMEOUT=2 must raise ranktune.LockTimeout within about 2 s
    (under 10 s), worded like the Rust cache's ("timed out after" ...
    "waiting for lock on" ... "raise RANKTUNE_LOCK_TIMEOUT"), and announce
    the wait on the victim's stderr ("waiting for lock on")."""
    path = str(tmp_path / "c.json")
    env = dict(os.environ, PYTHONPATH=_pythonpath(HERE), RANKTUNE_LOCK_TIMEOUT="2")
    # The announcement is a warning: no log filter of the caller's may hide it.
    env.pop("RANKTUNE_LOG", None)
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLD_LOCKF), path],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert holder.stdout.readline().strip() == "held", holder.stderr.read()
        res, elapsed, se = _save_once(path, env)
        if res is None:
            pytest.fail(f"save_cache with RANKTUNE_LOCK_TIMEOUT=2 did not return within 10 s; stderr: {se[-500:]}")
    finally:
        holder.kill()
        holder.communicate()
    assert not res["ok"], f"the save went through while another process held the lock: {res}"
    assert res["lock_timeout"], f"not a ranktune.LockTimeout: {res}"
    assert elapsed < 10, f"took {elapsed:.1f} s"
    msg = res["message"]
    a, b, c = (msg.find(s) for s in ("timed out after", "waiting for lock on", "raise RANKTUNE_LOCK_TIMEOUT"))
    assert 0 <= a < b < c, f"not worded like the Rust cache's LockTimeout: {msg!r}"
    assert "c.json.lock" in msg, msg
    assert "waiting for lock on" in res["stderr"], f"the wait was not announced on stderr: {res['stderr']!r}"
