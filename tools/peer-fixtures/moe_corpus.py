"""Copies a broad sample of the tuned fused-MoE config files that vLLM's and
SGLang's wheels ship into a test corpus (the files are data: copied as they
are, byte for byte).

The sample is deterministic: the files are grouped by what varies between
them (device, dtype, block shape, and the name's extra selectors such as
`_down`, `per_channel_quant=` or `backend=`, and for SGLang the Triton-version
folder); one file of each kind of selectors is taken, then the groups are
visited round-robin, smallest expert count first, until `count` files.

Usage:
    pip download vllm==0.34.0 --no-deps -d /tmp/vllm && (cd /tmp/vllm && unzip -q -o *.whl 'vllm/model_executor/layers/fused_moe/configs/*')
    pip download sglang==0.5.23 --no-deps -d /tmp/sglang && (cd /tmp/sglang && unzip -q -o *.whl 'sglang/srt/layers/moe/*')
    python3 tools/peer-fixtures/moe_corpus.py vllm /tmp/vllm crates/formats/tests/fixtures/peers/vllm-0.34.0
    python3 tools/peer-fixtures/moe_corpus.py sglang /tmp/sglang crates/formats/tests/fixtures/peers/sglang-0.5.23
"""

import os
import re
import shutil
import sys

ROOTS = {
    "vllm": "vllm/model_executor/layers/fused_moe/configs",
    "sglang": "sglang/srt/layers/moe/moe_runner/triton_utils/configs",
}
NAME = re.compile(r"^E=(\d+),N=(\d+),device_name=(.*)\.json$")


def group_of(folder, name):
    m = NAME.match(name)
    rest = m.group(3)
    device = re.split(r",(?:dtype|block_shape|per_channel_quant|backend)=", rest)[0]
    selectors = rest[len(device):]
    selectors = re.sub(r"\d+", "#", selectors)
    return (folder, device, selectors)


def sample(peer, wheel_dir, out_dir, count):
    root = os.path.join(wheel_dir, ROOTS[peer])
    found = []
    for folder, _, names in os.walk(root):
        rel = os.path.relpath(folder, root)
        for name in names:
            if NAME.match(name):
                found.append(("" if rel == "." else rel, name))
    groups = {}
    for folder, name in sorted(found, key=lambda f: (int(NAME.match(f[1]).group(1)), f)):
        groups.setdefault(group_of(folder, name), []).append((folder, name))
    # First one file of each kind of selectors (per folder), so the rare
    # name forms (`_down`, `backend=`, `per_channel_quant=`) are all in;
    # then rounds over the (folder, device, selectors) groups, largest first.
    order = sorted(groups, key=lambda g: (-len(groups[g]), g))
    taken = []
    seen = set()
    for g in order:
        if (g[0], g[2]) not in seen and len(taken) < count:
            seen.add((g[0], g[2]))
            taken.append(groups[g].pop(0))
    while len(taken) < count and any(groups.values()):
        for g in order:
            if groups[g] and len(taken) < count:
                taken.append(groups[g].pop(0))
    if os.path.isdir(out_dir):
        for folder, _, names in os.walk(out_dir):
            for name in names:
                if name.endswith(".json"):
                    os.remove(os.path.join(folder, name))
    for folder, name in taken:
        os.makedirs(os.path.join(out_dir, folder), exist_ok=True)
        shutil.copyfile(os.path.join(root, folder, name), os.path.join(out_dir, folder, name))
    print(f"{peer}: {len(taken)} of {len(found)} files, {len(order)} kinds of name")


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5) or sys.argv[1] not in ROOTS:
        sys.exit("usage: moe_corpus.py vllm|sglang <unpacked wheel dir> <out dir> [count=40]")
    sample(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) == 5 else 40)
