#!/usr/bin/env python3
"""Compiles a kernel source with nvcc and -DUNICCL_AMD_SYNC=1 (what meson's
-Damd_sync=true adds) to PTX and checks that the kernels run the AMD path's
synchronization (docs/amd.md, "AMD synchronization on NVIDIA GPUs"):

  - no named barrier (bar.sync / barrier.sync / bar.arrive / bar.red with an
    id other than 0): sub-groups meet in device/sub_barrier.h's software
    barrier, whose CTA-scope atomics (ld.acquire.cta, atom.acq_rel.cta.add,
    st.release.cta) and warp meeting points (bar.warp.sync) are there;
  - LL lines stored and polled as 8-byte halves (no 16-byte volatile store
    or load), polls relaxed (ld.relaxed.sys, no ld.acquire.sys) with an
    acquire fence after the spin (fence.acq_rel.sys);
  - Simple slots read with streaming loads (no ld.global.cg).

--rules devapi: the Device API's steps (src/device/port_check_devapi.cc,
include/nccl_device/impl/port.h):

  - LSA barrier flags polled relaxed (ld.relaxed.sys.u32, no acquire load)
    with an acquire fence after the spin, posted as a fence then a relaxed
    store (no st.release.sys);
  - LL all-to-all lines and GIN descriptors stored and loaded as 8-byte
    relaxed halves (no 16-byte volatile or write-through access); GIN
    signals polled relaxed; sleeping spins (nanosleep, HIP's s_sleep);
  - GIN's release before a descriptor a fence.acq_rel.sys (HIP's release
    fence), not membar.sys.

  amd_sync_check.py NVCC SRC [-I DIR ...]   # exit 0 ok, 1 failed, 77 no nvcc
  amd_sync_check.py NVCC SRC --expect-fail  # the rules reject the default build's code
  amd_sync_check.py NVCC SRC --rules devapi [--expect-fail]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

NAMED_BARRIER = re.compile(r"^\s*(?:bar|barrier)(?:\.cta)?\.(?:sync|arrive|red)(?:\.aligned)?(?:\.\w+)*\s+([^,;\s]+)",
                           re.M)
# The kernels' protocol code (device/port.h).
REQUIRED = [
    (r"\batom\.acq_rel\.cta\.add\.u32\b", "sub-group barrier arrival (CTA-scope acq_rel fetch-add)"),
    (r"\bld\.acquire\.cta\.u32\b", "sub-group barrier generation load (CTA-scope acquire)"),
    (r"\bst\.release\.cta\.u32\b", "sub-group barrier release (CTA-scope release store)"),
    (r"\bbar\.warp\.sync\b", "the wavefront's (warp's) meeting point"),
    (r"\bst\.volatile\.global\.u64\b", "LL line halves stored as 8 bytes"),
    (r"\bld\.relaxed\.sys\.global\.u64\b", "relaxed 8-byte polls (counters, LL halves)"),
    (r"\bfence\.acq_rel\.sys\b", "the acquire fence after a poll / release fence before a post"),
]
FORBIDDEN = [
    (r"\bst\.volatile\.global\.v4\.", "a 16-byte LL line store"),
    (r"\bld\.volatile\.global\.v4\.", "a 16-byte LL line (or work item) load"),
    (r"\bld\.acquire\.sys\.", "an acquire poll (the HIP path polls relaxed and fences once)"),
    (r"\bld\.global\.cg\.", "an L1-bypassing slot load (the HIP path uses plain streaming loads)"),
]
# The Device API (include/nccl_device/impl/port.h): generic addresses.
DEVAPI_REQUIRED = [
    (r"\bld\.relaxed\.sys(?:\.global)?\.u32\b", "relaxed 4-byte polls (LSA barrier flags, GIN queue indices)"),
    (r"\bst\.relaxed\.sys(?:\.global)?\.u32\b", "LSA barrier posts as relaxed stores after a fence"),
    (r"\bld\.relaxed\.sys(?:\.global)?\.u64\b", "relaxed 8-byte loads (LL halves, GIN signals)"),
    (r"\bst\.relaxed\.sys(?:\.global)?\.u64\b", "relaxed 8-byte stores (LL halves, GIN descriptors)"),
    (r"\bfence\.acq_rel\.sys\b", "the fence after a spin / before a post"),
    (r"\bnanosleep\b", "a pause in every spin (HIP's s_sleep)"),
]
DEVAPI_FORBIDDEN = [
    (r"\bld\.acquire\.sys\.", "an acquire poll (the HIP path polls relaxed and acquires once)"),
    (r"\bst\.release\.sys\.", "a release store (the HIP path fences, then stores relaxed)"),
    (r"\bld\.volatile(?:\.global)?\.v4\.", "a 16-byte LL line load"),
    (r"\bst\.volatile(?:\.global)?\.v4\.", "a 16-byte LL line store"),
    (r"\bst\.global\.wt\.v4\.", "a 16-byte GIN descriptor store (HIP stores 8-byte words)"),
    (r"\bld\.volatile(?:\.global)?\.u32\b", "a volatile GIN index load (HIP loads relaxed at system scope)"),
    (r"\bmembar\.sys\b", "membar.sys (HIP's release before a descriptor is a release fence)"),
]
RULES = {"p2p": (REQUIRED, FORBIDDEN, True), "devapi": (DEVAPI_REQUIRED, DEVAPI_FORBIDDEN, False)}


def check(ptx, rules="p2p"):
    required, forbidden, no_named_barriers = RULES[rules]
    errors = []
    for m in NAMED_BARRIER.finditer(ptx) if no_named_barriers else []:
        if m.group(1) != "0":
            errors.append(f"named barrier left: {m.group(0).strip()}")
    for pat, what in required:
        if not re.search(pat, ptx):
            errors.append(f"missing {what} ({pat})")
    for pat, what in forbidden:
        m = re.search(pat, ptx)
        if m:
            line = ptx[ptx.rfind("\n", 0, m.start()) + 1:ptx.find("\n", m.start())].strip()
            errors.append(f"found {what}: {line}")
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("nvcc")
    ap.add_argument("src")
    ap.add_argument("-I", dest="inc", action="append", default=[])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--rules", choices=sorted(RULES), default="p2p",
                    help="p2p: the kernels' protocol code; devapi: the Device API's steps")
    ap.add_argument("--expect-fail", action="store_true",
                    help="compile without UNICCL_AMD_SYNC and expect the rules to reject it")
    a = ap.parse_args()
    nvcc = shutil.which(a.nvcc) or (a.nvcc if os.path.exists(a.nvcc) else None)
    if not nvcc:
        print(f"amd_sync_check.py: no {a.nvcc}: skipped")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "k.ptx")
        cmd = [nvcc, "-std=c++17", "--expt-relaxed-constexpr", "-x", "cu", f"-arch={a.arch}", "-ptx",
               "-DUNICCL_GPU_BACKEND_CUDA=1"] + [f"-I{d}" for d in a.inc]
        if not a.expect_fail:
            cmd.append("-DUNICCL_AMD_SYNC=1")
        cmd += [a.src, "-o", out]
        print("+", " ".join(cmd))
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout + r.stderr)
            return 1
        ptx = open(out).read()
    errors = check(ptx, a.rules)
    if a.expect_fail:
        if not errors:
            print("FAIL: the rules accepted the default build's code")
            return 1
        print(f"ok: the rules reject the default build's code ({len(errors)} findings, e.g. {errors[0]})")
        return 0
    for e in errors:
        print("FAIL:", e)
    if not errors and a.rules == "devapi":
        print(f"ok: {os.path.basename(a.src)} with UNICCL_AMD_SYNC: relaxed polls + fences, fence + relaxed "
              "posts, 8-byte LL halves and descriptors, sleeping spins")
    elif not errors:
        print(f"ok: {os.path.basename(a.src)} with UNICCL_AMD_SYNC: no named barrier, 8-byte LL halves, "
              "CTA-scope barrier atomics, relaxed polls + fences")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
