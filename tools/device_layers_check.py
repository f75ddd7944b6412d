#!/usr/bin/env python3
"""Checks, in the PTX nvcc makes, that uniccl's two device layers agree where
they meet (docs/architecture.md, "Device portability").

The kernels (src/device/port.h) and the Device API
(include/nccl_device/impl/port.h) share their system-scope primitives
(include/nccl_device/impl/sync.h) on HIP, in the emulator and under
UNICCL_AMD_SYNC, but keep their own CUDA bodies: .global PTX in the kernels,
libcu++ on generic addresses in the Device API. Both guard the same kind of
memory: symmetric-window data that a peer GPU reads after a flag. So on CUDA,
in the default build and with UNICCL_AMD_SYNC:

  - the kernels' symmetric-barrier post (port_check's uniccl_check_sym_post)
    and the Device API's LSA-barrier arrive (port_check_devapi's
    uniccl_check_devapi_arrive) both publish at system scope: an
    st.release.sys, or a system-scope fence and then an st.relaxed.sys;
  - the symmetric-barrier poll (uniccl_check_sym_poll) and the LSA-barrier
    wait (uniccl_check_devapi_wait) both acquire at system scope: an
    ld.acquire.sys, or ld.relaxed.sys polls and then a system-scope fence;
  - both spins pause alike: a nanosleep in both (UNICCL_AMD_SYNC) or in
    neither (default).

The AMD targets' agreement is tools/port_check.py's: it reads the same steps
of both layers with the same system-scope rules.

  device_layers_check.py NVCC PORT_CHECK_SRC DEVAPI_SRC [-I DIR ...]
  device_layers_check.py --self-test        # the rules on known-good and known-bad PTX
Exit 0 ok, 1 failed, 77 no nvcc.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

RELEASE_STORE = re.compile(r"\bst\.release\.sys(?:\.global)?\.[bu](?:32|64)\b")
RELAXED_STORE = re.compile(r"\bst\.relaxed\.sys(?:\.global)?\.[bu](?:32|64)\b")
ACQUIRE_LOAD = re.compile(r"\bld\.acquire\.sys(?:\.global)?\.[bu](?:32|64)\b")
RELAXED_LOAD = re.compile(r"\bld\.relaxed\.sys(?:\.global)?\.[bu](?:32|64)\b")
SYS_FENCE = re.compile(r"\b(?:fence\.(?:acq_rel|sc)\.sys|membar\.sys)\b")
PAUSE = re.compile(r"\bnanosleep\b")

POSTS = ("uniccl_check_sym_post", "uniccl_check_devapi_arrive")
POLLS = ("uniccl_check_sym_poll", "uniccl_check_devapi_wait")


def entries(ptx):
    """Kernel name -> body, for every .entry of the PTX."""
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(", ptx):
        start = ptx.find("{", m.end())
        depth, i = 0, start
        while i < len(ptx):
            depth += {"{": 1, "}": -1}.get(ptx[i], 0)
            if depth == 0:
                break
            i += 1
        out[m.group(1)] = ptx[start:i + 1]
    return out


def publishes_at_system_scope(body):
    if RELEASE_STORE.search(body):
        return True
    fence = SYS_FENCE.search(body)
    return bool(fence and RELAXED_STORE.search(body, fence.end()))


def acquires_at_system_scope(body):
    if ACQUIRE_LOAD.search(body):
        return True
    poll = RELAXED_LOAD.search(body)
    return bool(poll and SYS_FENCE.search(body, poll.end()))


def check(ptx, mode):
    fns = entries(ptx)
    errors = []
    for name in POSTS + POLLS:
        if name not in fns:
            errors.append(f"{mode}: {name} missing from the PTX")
    if errors:
        return errors
    for name in POSTS:
        if not publishes_at_system_scope(fns[name]):
            errors.append(f"{mode}: {name} does not publish at system scope (st.release.sys, or a .sys fence "
                          "then st.relaxed.sys)")
    for name in POLLS:
        if not acquires_at_system_scope(fns[name]):
            errors.append(f"{mode}: {name} does not acquire at system scope (ld.acquire.sys, or ld.relaxed.sys "
                          "then a .sys fence)")
    pauses = {name: bool(PAUSE.search(fns[name])) for name in POLLS}
    if len(set(pauses.values())) != 1:
        errors.append(f"{mode}: the two layers' spins pause differently: "
                      + ", ".join(f"{n} {'sleeps' if p else 'does not sleep'}" for n, p in pauses.items()))
    return errors


def compile_ptx(nvcc, srcs, incs, amd_sync):
    with tempfile.TemporaryDirectory() as tmp:
        tu = os.path.join(tmp, "layers.cu")
        with open(tu, "w") as f:
            f.write("".join(f'#include "{os.path.abspath(s)}"\n' for s in srcs))
        out = os.path.join(tmp, "layers.ptx")
        cmd = [nvcc, "-std=c++17", "--expt-relaxed-constexpr", "-arch=sm_90", "-ptx", "-O3",
               "-DUNICCL_GPU_BACKEND_CUDA=1"] + [f"-I{d}" for d in incs]
        if amd_sync:
            cmd.append("-DUNICCL_AMD_SYNC=1")
        cmd += [tu, "-o", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return None, "+ " + " ".join(cmd) + "\n" + r.stdout + r.stderr
        return open(out).read(), None


def self_test():
    def ptx(post, arrive, poll, wait):
        return "".join(f".visible .entry {n}(\n.param .u64 p\n)\n{{\n{b}\n}}\n"
                       for n, b in (("uniccl_check_sym_post", post), ("uniccl_check_devapi_arrive", arrive),
                                    ("uniccl_check_sym_poll", poll), ("uniccl_check_devapi_wait", wait)))
    good_default = ptx("st.release.sys.global.u64 [%rd1], %rd2;", "st.release.sys.b32 [%rd1], %r2;",
                       "$L1: ld.acquire.sys.global.u64 %rd3, [%rd1]; @%p1 bra $L1;",
                       "$L1: ld.acquire.sys.b32 %r3, [%rd1]; @%p1 bra $L1;")
    good_amd_sync = ptx("fence.acq_rel.sys; st.relaxed.sys.global.u64 [%rd1], %rd2;",
                        "fence.acq_rel.sys; st.relaxed.sys.u32 [%rd1], %r2;",
                        "$L1: ld.relaxed.sys.global.u64 %rd3, [%rd1]; nanosleep.u32 32; @%p1 bra $L1; "
                        "fence.acq_rel.sys;",
                        "$L1: ld.relaxed.sys.u32 %r3, [%rd1]; nanosleep.u32 32; @%p1 bra $L1; fence.acq_rel.sys;")
    cases = [
        ("default build's shape", good_default, 0),
        ("AMD sync's shape", good_amd_sync, 0),
        ("a GPU-scope release", good_default.replace("st.release.sys.b32", "st.release.gpu.b32"), 1),
        ("a relaxed post without a fence", good_amd_sync.replace("fence.acq_rel.sys; st.relaxed.sys.u32",
                                                                 "st.relaxed.sys.u32"), 1),
        ("a GPU-scope acquire", good_default.replace("ld.acquire.sys.global.u64", "ld.acquire.gpu.global.u64"), 1),
        ("relaxed polls without the fence", good_amd_sync.replace("@%p1 bra $L1; fence.acq_rel.sys;",
                                                                  "@%p1 bra $L1;"), 1),
        ("one layer's spin sleeping, not the other's", good_amd_sync.replace("nanosleep.u32 32; @%p1 bra $L1; "
                                                                             "fence.acq_rel.sys;\n}\n",
                                                                             "@%p1 bra $L1; fence.acq_rel.sys;\n}\n",
                                                                             1), 1),
        ("a step missing", good_default.replace("uniccl_check_devapi_wait", "other"), 1),
    ]
    wrong = 0
    for label, text, want in cases:
        errors = check(text, "self-test")
        got = 1 if errors else 0
        wrong += got != want
        print(f"self-test: {label}: {'rejected' if got else 'accepted'} ({'ok' if got == want else 'WRONG'})")
    print(f"self-test: {len(cases) - wrong} of {len(cases)} verdicts right")
    return 1 if wrong else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser()
    ap.add_argument("nvcc")
    ap.add_argument("port_check_src")
    ap.add_argument("devapi_src")
    ap.add_argument("-I", dest="inc", action="append", default=[])
    a = ap.parse_args()
    nvcc = shutil.which(a.nvcc) or (a.nvcc if os.path.exists(a.nvcc) else None)
    if not nvcc:
        print(f"device_layers_check.py: no {a.nvcc}: skipped")
        return 77
    failed = False
    for mode, amd_sync in (("default", False), ("UNICCL_AMD_SYNC", True)):
        ptx, err = compile_ptx(nvcc, [a.port_check_src, a.devapi_src], a.inc, amd_sync)
        if ptx is None:
            print(err)
            return 1
        errors = check(ptx, mode)
        for e in errors:
            print("FAIL:", e)
        failed |= bool(errors)
        if not errors:
            print(f"ok ({mode}): the symmetric barrier and the LSA barrier both post and acquire at system "
                  "scope, and their spins pause alike")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
