#!/usr/bin/env python3
"""Where a profiled program's time goes: its kernels' device times summed by phase and kernel name.

  python3 tools/bench/bundle_kernels.py BUNDLE_DIR_OR_JSON [--top N]

Reads a trace bundle (bundle.json, written by KILN_DEBUG=dir or compile(fn, {.debug_dir = dir});
given a directory, the one bundle.json beneath it) and prints the kernel count, the summed
`time_us`, and one row per (phase, name) with the name's dtype/shape suffix dropped
(`conv_f32_r4` -> `conv`), largest first.
"""
import argparse
import collections
import glob
import json
import os
import re
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bundle")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    path = args.bundle
    if os.path.isdir(path):
        found = glob.glob(os.path.join(path, "**", "bundle.json"), recursive=True)
        if len(found) != 1:
            sys.exit(f"bundle_kernels: {path} holds {len(found)} bundle.json files; name one")
        path = found[0]
    with open(path) as f:
        kernels = json.load(f)["kernels"]
    rows = collections.defaultdict(lambda: [0, 0.0])
    for k in kernels:
        key = (k.get("phase", ""), re.sub(r"_(f|i|u|bf)\d+.*", "", k["name"]))
        rows[key][0] += 1
        rows[key][1] += k.get("time_us", 0.0)
    total = sum(t for _, t in rows.values())
    print(f"{len(kernels)} kernels, {total / 1e3:.1f} ms")
    for (phase, name), (count, us) in sorted(rows.items(), key=lambda r: -r[1][1])[: args.top]:
        print(f"{phase:20s} {name:40s} {count:5d} {us / 1e3:9.1f} ms")


if __name__ == "__main__":
    main()
