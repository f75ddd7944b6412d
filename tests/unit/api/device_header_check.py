#!/usr/bin/env python3
"""Compiles a kernel that includes "nccl_device.h" with a GPU compiler (nvcc
or hipcc) and checks that every nccl*.h it opened is uniccl's own.

nvcc puts its toolkit's include directory (which holds NVIDIA's nccl.h and
nccl_device/) on the search path by itself, so a wrong include order would
silently build against NVIDIA's headers; the compiler's dependency list (-M)
shows which files were really read.

usage: device_header_check.py COMPILER cuda|hip INCLUDE_DIR
exit 0: compiled, only uniccl's nccl headers; 1: failure; 77: no such compiler.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE = r'''
#include "nccl_device.h"

// Device code uses the host-device team arithmetic on a device communicator.
__global__ void teams(ncclDevComm comm, int* out) {
  ncclTeam rail = ncclTeamRail(comm);
  out[0] = ncclTeamRankToWorld(comm, rail, 0);
  out[1] = ncclTeamRankIsMember(ncclTeamLsa(comm), ncclTeamWorld(comm), 1);
  out[2] = (int)ncclGetResourceBufferOffset(1);
}

// Host code calls the host API (declarations only: nothing is linked).
int hostSide(ncclComm_t comm) {
  ncclLsaBarrierHandle_t h;
  ncclDevResourceRequirements_t req;
  if (ncclLsaBarrierCreateRequirement(ncclTeamLsa(comm), 1, &h, &req) != ncclSuccess) return -1;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclDevComm dc;
  return ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess ? ncclLLA2ACalcSlots(4, 8) : -1;
}
'''


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in ("cuda", "hip"):
        sys.exit(__doc__)
    compiler, kind, inc = sys.argv[1], sys.argv[2], os.path.realpath(sys.argv[3])
    exe = shutil.which(compiler)
    if exe is None:
        print(f"skip: {compiler} not found")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "device_header." + ("cu" if kind == "cuda" else "hip"))
        with open(src, "w") as f:
            f.write(SOURCE)
        args = [exe, "-std=c++17", "-I" + inc]
        if kind == "hip":
            args += ["-x", "hip", "--offload-arch=gfx90a", "-D__HIP_PLATFORM_AMD__"]
        deps = subprocess.run(args + ["-M", src], capture_output=True, text=True)
        if deps.returncode != 0:
            print(f"FAIL: {' '.join(args)} -M failed:\n{deps.stderr}")
            return 1
        files = [os.path.realpath(p) for p in re.split(r"\s+", deps.stdout.replace("\\\n", " ")) if p.endswith(".h")]
        ours = [p for p in files if p.startswith(inc + os.sep)]
        foreign = [p for p in files if os.path.basename(p).startswith("nccl") and not p.startswith(inc + os.sep)
                   or os.sep + "nccl_device" + os.sep in p and not p.startswith(inc + os.sep)]
        if foreign:
            print("FAIL: vendor NCCL headers were read instead of uniccl's:\n  " + "\n  ".join(foreign))
            return 1
        if os.path.join(inc, "nccl_device.h") not in ours:
            print(f"FAIL: {inc}/nccl_device.h was not read; read: {ours}")
            return 1
        obj = os.path.join(tmp, "device_header.o")
        build = subprocess.run(args + ["-c", src, "-o", obj], capture_output=True, text=True)
        if build.returncode != 0:
            print(f"FAIL: {' '.join(args)} -c failed:\n{build.stderr}")
            return 1
        print(f"ok: {compiler} compiled a kernel with uniccl's nccl_device.h; nccl headers read: "
              + ", ".join(os.path.relpath(p, inc) for p in ours if os.path.basename(p).startswith("nccl")
                          or "nccl_device" in p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
