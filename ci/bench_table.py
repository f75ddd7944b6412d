#!/usr/bin/env python3
"""Side-by-side table of bench_<coll>_<mode>_<lib>.log files (ci/gpu-test.sh)."""
import glob
import os
import re
import sys

out = sys.argv[1]
rows = {}
status = {}
for path in sorted(glob.glob(os.path.join(out, "bench_*.log"))):
    m = re.match(r"bench_(.+)_(eager|graph)_(uniccl|nccl)\.log", os.path.basename(path))
    if not m:
        continue
    coll, mode, lib = m.groups()
    text = open(path, errors="replace").read()
    rc = re.findall(r"^rc=(\d+)", text, re.M)
    status[(coll, mode, lib)] = rc[-1] if rc else "?"
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit():
            rows.setdefault((coll, mode, int(f[0])), {})[lib] = (f[5], f[7], f[8])

print(f"{'collective':<15}{'mode':<6}{'bytes':>12} {'uniccl us':>10} {'nccl us':>10} {'uni busbw':>10} {'nccl busbw':>10} {'ratio':>7} wrong")
for (coll, mode, size) in sorted(rows):
    r = rows[(coll, mode, size)]
    u = r.get("uniccl", ("-", "-", "-"))
    n = r.get("nccl", ("-", "-", "-"))
    try:
        ratio = (float(u[1]) / float(n[1])) if size >= (1 << 20) else (float(u[0]) / float(n[0]))
        ratio = f"{ratio:.2f}"
    except (ValueError, ZeroDivisionError):
        ratio = "-"
    print(f"{coll:<15}{mode:<6}{size:>12} {u[0]:>10} {n[0]:>10} {u[1]:>10} {n[1]:>10} {ratio:>7} {u[2]}/{n[2]}")
print("(ratio: busbw uniccl/NCCL for >= 1 MiB, time uniccl/NCCL below)")
for k, v in sorted(status.items()):
    if v != "0":
        print("FAILED run:", k, "rc", v)
