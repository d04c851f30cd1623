#!/usr/bin/env python3
"""Baseline for benches/trace_merge.rs: the usual ad-hoc merge of per-rank
Chrome/Kineto traces in Python (json.load every file, remap pids, ids and
timestamps, json.dump one file). It does the same remapping as
`ranktune trace merge` so the two can be timed side by side.

usage: python_merge.py INPUT... -o OUT
"""
import json
import os
import re
import sys


def rank_of(path, doc):
    info = doc.get("distributedInfo") if isinstance(doc, dict) else None
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return info["rank"]
    m = re.search(r"rank[_-]?(\d+)|_(\d+)(?:\.pt\.trace)?\.json", os.path.basename(path), re.I)
    if m:
        return int(m.group(1) or m.group(2))
    return 0


def main(argv):
    if "-o" not in argv:
        sys.exit(__doc__)
    i = argv.index("-o")
    out = argv[i + 1]
    inputs = argv[:i] + argv[i + 2:]
    files = []
    for a in inputs:
        if os.path.isdir(a):
            files += sorted(os.path.join(a, f) for f in os.listdir(a) if f.endswith(".json"))
        else:
            files.append(a)
    traces = []
    for f in files:
        with open(f) as fh:
            doc = json.load(fh)
        if isinstance(doc, list):
            doc = {"traceEvents": doc}
        traces.append((rank_of(f, doc), f, doc))
    traces.sort(key=lambda t: t[0])
    base = min(int(d.get("baseTimeNanoseconds", 0)) for _, _, d in traces)
    stride = max(r for r, _, _ in traces) + 1
    events = []
    for rank, f, doc in traces:
        shift = (int(doc.get("baseTimeNanoseconds", 0)) - base) / 1000.0
        pids, names, sorts = {}, {}, {}
        for e in doc["traceEvents"]:
            pid = e.get("pid")
            new = pids.get(pid)
            if new is None:
                new = pids[pid] = rank * 1000 + len(pids)
            if e.get("ph") == "M" and e.get("name") == "process_name":
                names[pid] = e.get("args", {}).get("name")
                continue
            if e.get("ph") == "M" and e.get("name") == "process_sort_index":
                sorts[pid] = e.get("args", {}).get("sort_index")
                continue
            e["pid"] = new
            if shift and "ts" in e:
                e["ts"] += shift
            for k in ("id", "bind_id"):
                if isinstance(e.get(k), int):
                    e[k] = e[k] * stride + rank
            events.append(e)
        for k, (pid, new) in enumerate(pids.items()):
            name = "rank %d · pid %s" % (rank, pid)
            if names.get(pid):
                name += " · " + names[pid]
            events.append({"ph": "M", "name": "process_name", "pid": new, "tid": 0, "args": {"name": name}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": new, "tid": 0,
                           "args": {"sort_index": rank * 1000000 + k}})
    with open(out, "w") as fh:
        json.dump({"schemaVersion": 1, "displayTimeUnit": "ms", "baseTimeNanoseconds": base,
                   "traceEvents": events}, fh)


if __name__ == "__main__":
    main(sys.argv[1:])
