"""`ranktune trace merge -o x.pftrace` read back with Perfetto's own Python
package (`pip install perfetto`, which ships the generated trace protos),
checked against the JSON merge of the same inputs: per merged pid, the
slices (names, begin and end times), instants, counter samples and flows."""

import collections
import json
import os
import random
import subprocess

import pytest

from conftest import IN_CI

try:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent
except ImportError:  # pragma: no cover - depends on the venv
    Trace = None

BASE = 1_700_000_000_000_000_000


@pytest.fixture(scope="module")
def protos():
    if Trace is None:
        msg = "Perfetto's Python package is missing: pip install perfetto"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return Trace


def write_rank(path, rank, steps=4):
    """A Kineto-like rank: nested CPU ops (two with the same start), a GPU
    kernel with a flow from its launch, a B/E collective, instants, a
    two-series counter; events shuffled a little, as real files are."""
    pid = 4000 + rank
    ev = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": 11, "args": {"name": "main"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
    ]
    t = 10.0 + rank * 3.5
    for s in range(steps):
        ev += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": pid,
             "tid": 11, "ts": round(t, 3), "dur": 100.0, "args": {"step": s}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": 11,
             "ts": round(t + 1, 3), "dur": 40.5, "args": {"Input Dims": [[2, 3]], "x": 1.5}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": pid, "tid": 11,
             "ts": round(t + 1, 3), "dur": 10.125},
            {"ph": "s", "cat": "ac2g", "name": "launch", "id": s + 1, "pid": pid, "tid": 11,
             "ts": round(t + 2, 3), "bp": "e"},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
             "ts": round(t + 50, 3), "dur": 20.0},
            {"ph": "f", "cat": "ac2g", "name": "launch", "id": s + 1, "pid": 0, "tid": 7,
             "ts": round(t + 50, 3), "bp": "e"},
            {"ph": "B", "name": "nccl:all_reduce", "pid": pid, "tid": 11, "ts": round(t + 60, 3)},
            {"ph": "E", "pid": pid, "tid": 11, "ts": round(t + 90, 3)},
            {"ph": "i", "name": "mark", "s": "t", "pid": pid, "tid": 11, "ts": round(t + 95, 3)},
            {"ph": "i", "name": "epoch", "s": "p", "pid": pid, "tid": 11, "ts": round(t + 96, 3)},
            {"ph": "C", "name": "mem", "pid": pid, "ts": round(t + 5, 3),
             "args": {"allocated": 100 + s, "reserved": 200}},
        ]
        t += 100
    head, rest = ev[:3], ev[3:]
    # Shuffled within every 4 steps (44 events): out of order, but within
    # the converter's reorder window.
    rng = random.Random(rank)
    for i in range(0, len(rest), 44):
        part = rest[i:i + 44]
        rng.shuffle(part)
        rest[i:i + 44] = part
    doc = {"distributedInfo": {"rank": rank, "world_size": 3},
           "baseTimeNanoseconds": BASE + rank * 1000, "traceEvents": head + rest}
    with open(path, "w") as f:
        json.dump(doc, f)


def merge(cli, inputs, out, *extra):
    r = subprocess.run([cli, "trace", "merge", str(inputs), "-o", str(out), *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def read_pftrace(path):
    """Slices, instants, counters and flows per merged pid, from the protos."""
    t = Trace()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    tracks, names = {}, {}
    for p in t.packet:
        if p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor
    for p in t.packet:
        for n in p.interned_data.event_names:
            names[(p.trusted_packet_sequence_id, n.iid)] = n.name

    def pid_of(uuid):
        d = tracks[uuid]
        while not d.HasField("process"):
            d = tracks[d.parent_uuid]
        return d.process.pid

    out = collections.defaultdict(lambda: collections.defaultdict(list))
    open_slices = collections.defaultdict(list)
    flows = collections.Counter()
    pids = {}
    for d in tracks.values():
        if d.HasField("process"):
            pids[d.process.pid] = d.process.process_name
    for p in sorted(t.packet, key=lambda p: p.timestamp):  # stable, like Perfetto's sorter
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        pid = pid_of(e.track_uuid)
        name = names.get((p.trusted_packet_sequence_id, e.name_iid), e.name)
        flows["start"] += len(e.flow_ids)
        flows["end"] += len(e.terminating_flow_ids)
        if e.type == TrackEvent.TYPE_SLICE_BEGIN:
            open_slices[e.track_uuid].append((name, p.timestamp))
        elif e.type == TrackEvent.TYPE_SLICE_END:
            n, start = open_slices[e.track_uuid].pop()
            out[pid]["slices"].append((n, start, p.timestamp))
        elif e.type == TrackEvent.TYPE_INSTANT:
            out[pid]["instants"].append((name, p.timestamp))
            if tracks[e.track_uuid].HasField("process"):
                out[pid]["process_instants"].append((name, p.timestamp))
        elif e.type == TrackEvent.TYPE_COUNTER:
            out[pid]["counters"].append((tracks[e.track_uuid].name, p.timestamp,
                                         e.double_counter_value))
    assert all(not v for v in open_slices.values()), "slices left open"
    return out, flows, pids


def read_json(path):
    """The same view of the JSON merge (µs → ns)."""
    doc = json.load(open(path))
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    begun = collections.defaultdict(list)
    flows = collections.Counter()
    pids = {}
    ns = lambda us: round(us * 1000)
    for e in sorted(doc["traceEvents"], key=lambda e: e.get("ts", 0)):
        ph, pid = e["ph"], e["pid"]
        if ph == "M" and e["name"] == "process_name":
            pids[pid] = e["args"]["name"]
        elif ph == "X":
            out[pid]["slices"].append((e["name"], ns(e["ts"]), ns(e["ts"] + e["dur"])))
        elif ph == "B":
            begun[(pid, e["tid"])].append((e["name"], ns(e["ts"])))
        elif ph == "E":
            n, start = begun[(pid, e["tid"])].pop()
            out[pid]["slices"].append((n, start, ns(e["ts"])))
        elif ph == "i":
            out[pid]["instants"].append((e["name"], ns(e["ts"])))
            if e.get("s") == "p":
                out[pid]["process_instants"].append((e["name"], ns(e["ts"])))
        elif ph == "C":
            for k, v in e["args"].items():
                out[pid]["counters"].append((f"{e['name']} {k}", ns(e["ts"]), float(v)))
        elif ph in "st":
            flows["start"] += 1
        elif ph == "f":
            flows["end"] += 1
    return out, flows, pids


# 6000 steps: every rank is several chunks of the merge's output, so the
# ranks' packet sequences interleave in the file.
@pytest.mark.parametrize("steps", [4, 6000])
def test_pftrace_matches_the_json_merge(cli, protos, tmp_path, steps):
    inputs = tmp_path / "traces"
    inputs.mkdir()
    for r in range(3):
        write_rank(inputs / f"trace_{r}.json", r, steps)
    merge(cli, inputs, tmp_path / "m.json", "--jobs", "2")
    r = merge(cli, inputs, tmp_path / "m.pftrace", "--jobs", "2")
    assert "merged 3 ranks" in r.stdout
    pf, pf_flows, pf_pids = read_pftrace(tmp_path / "m.pftrace")
    js, js_flows, js_pids = read_json(tmp_path / "m.json")
    # The same processes, with the same merged pids and names.
    assert pf_pids == js_pids and len(pf_pids) == 6, (pf_pids, js_pids)
    assert sorted(pf) == sorted(js)
    for pid in js:
        for kind in ("slices", "instants", "process_instants", "counters"):
            assert sorted(pf[pid][kind]) == sorted(js[pid][kind]), (pid, kind)
    # `steps` steps × (X×4 + B/E) per rank; flows: one start and one end per step.
    assert sum(len(v["slices"]) for v in pf.values()) == 3 * steps * 5
    assert sum(len(v["counters"]) for v in pf.values()) == 3 * steps * 2
    assert sum(len(v["process_instants"]) for v in pf.values()) == 3 * steps
    assert pf_flows == js_flows == {"start": 3 * steps, "end": 3 * steps}
    if steps > 4:
        t = protos()
        t.ParseFromString((tmp_path / "m.pftrace").read_bytes())
        seqs = [p.trusted_packet_sequence_id for p in t.packet]
        switches = sum(a != b for a, b in zip(seqs, seqs[1:]))
        assert switches > 3, f"ranks not interleaved: {switches} sequence changes"
    # Rank 1's clock base is 1 µs later: its first step is 3.5 + 1 µs after rank 0's.
    steps = {pid: min(s[1] for s in v["slices"] if s[0] == "ProfilerStep#0")
             for pid, v in pf.items() if any(s[0] == "ProfilerStep#0" for s in v["slices"])}
    assert steps[1000] - steps[0] == 4500, steps
    # Smaller than the JSON.
    assert os.path.getsize(tmp_path / "m.pftrace") < os.path.getsize(tmp_path / "m.json") / 2


def test_pftrace_is_the_same_for_any_number_of_workers(cli, protos, tmp_path):
    inputs = tmp_path / "traces"
    inputs.mkdir()
    for r in range(3):
        write_rank(inputs / f"trace_{r}.json", r, steps=50)
    merge(cli, inputs, tmp_path / "one.perfetto-trace", "--jobs", "1")
    merge(cli, inputs, tmp_path / "two.perfetto-trace", "--jobs", "2")
    one = (tmp_path / "one.perfetto-trace").read_bytes()
    assert one == (tmp_path / "two.perfetto-trace").read_bytes()
    t = protos()
    t.ParseFromString(one)
    assert len(t.packet) > 3 * 50 * 10
