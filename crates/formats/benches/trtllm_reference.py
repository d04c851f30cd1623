"""Baseline for benches/cache_interop.rs: the reference's way of reading and
writing its cache (json + ast.literal_eval of every key and tactic; str()/repr()
keys and tactics + json.dump), timed on the same file the Rust bench uses.

Usage: python3 trtllm_reference.py FILE ROUNDS  ->  prints "load_s save_s" (medians)
"""
import ast, io, json, statistics, sys, time

path, rounds = sys.argv[1], int(sys.argv[2])


def load(text):
    doc = json.loads(text)
    out = {}
    for name, section in doc.items():
        if name == "metadata":
            continue
        entries = {}
        for k, v in section.items():
            key = ast.literal_eval(k)
            entries[key] = (v["runner_id"], ast.literal_eval(v["tactic"]), v["min_time"])
        out[name] = entries
    return doc["metadata"], out


def save(meta, sections):
    doc = {"metadata": meta}
    for name, entries in sections.items():
        doc[name] = {str(k): {"runner_id": r, "tactic": repr(t), "min_time": m}
                     for k, (r, t, m) in entries.items()}
    buf = io.StringIO()
    json.dump(doc, buf, indent=2)
    return buf.getvalue()


text = open(path).read()
loads, saves = [], []
for _ in range(rounds):
    t0 = time.perf_counter()
    meta, sections = load(text)
    t1 = time.perf_counter()
    save(meta, sections)
    t2 = time.perf_counter()
    loads.append(t1 - t0)
    saves.append(t2 - t1)
print(statistics.median(loads), statistics.median(saves))
