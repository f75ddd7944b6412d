#!/usr/bin/env python3
"""Checks that uniccl's drop-in library exports every function NVIDIA's
libnccl.so.2 exports, so that programs linked against NCCL (PyTorch's
libtorch_cuda.so among them) load with uniccl in its place.

Both libraries are read with `nm -D --defined-only` when the test runs.
NVIDIA's library: the second argument if given, else $UNICCL_NVIDIA_NCCL,
else the first of the usual CUDA and distribution paths that exists.

usage: compare_exports.py OUR_LIBRARY [NVIDIA_LIBRARY]
exit 0: nothing missing; 1: functions missing (listed); 2: tool failure;
77: NVIDIA's library not found (skipped, with the reason).
"""

import os
import shutil
import subprocess
import sys

CANDIDATES = [
    "/usr/local/cuda/lib64/libnccl.so.2",
    "/usr/local/cuda/lib/libnccl.so.2",
    "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
    "/usr/lib64/libnccl.so.2",
]


def functions(lib):
    nm = shutil.which("nm")
    if nm is None:
        print("compare_exports: nm not found (install binutils)")
        sys.exit(2)
    res = subprocess.run([nm, "-D", "--defined-only", lib], capture_output=True, text=True)
    if res.returncode != 0:
        print(f"compare_exports: nm failed on {lib}: {res.stderr.strip()}")
        sys.exit(2)
    names = set()
    for line in res.stdout.splitlines():
        parts = line.split()
        # T/t/W/w/i: code (strong, weak, indirect); data symbols are not API.
        if len(parts) >= 3 and parts[1] in "TtWwi":
            names.add(parts[2].split("@")[0])
    return names


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    ours = sys.argv[1]
    theirs = sys.argv[2] if len(sys.argv) == 3 else os.environ.get("UNICCL_NVIDIA_NCCL")
    if not theirs:
        theirs = next((p for p in CANDIDATES if os.path.exists(p)), None)
    if not theirs or not os.path.exists(theirs):
        print("skip: NVIDIA's libnccl.so.2 not found (looked in " + ", ".join(CANDIDATES)
              + "; set UNICCL_NVIDIA_NCCL to point at one)")
        return 77
    want, have = functions(theirs), functions(ours)
    # C++ internals NVIDIA's build leaks (mangled names) are not API.
    want = {n for n in want if not n.startswith("_Z")}
    missing = sorted(want - have)
    if missing:
        print(f"FAIL: {ours} lacks {len(missing)} function(s) {theirs} exports:")
        for n in missing:
            print("  " + n)
        return 1
    print(f"ok: {ours} exports all {len(want)} functions of {theirs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
