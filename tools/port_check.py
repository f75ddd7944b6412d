#!/usr/bin/env python3
"""Reads the AMD GPU code of the port layer's protocol steps (the extern "C"
kernels of src/device/port_check.in) and of the Device API's steps
(src/device/port_check_devapi.cc), and checks the cache bits and fences
each step must have, per target (docs/amd.md has the table).

Two kinds of steps. The P2P protocol's counters and slots are uncached
memory: no step may write back or invalidate the L2 at system scope. The
symmetric barrier and the Device API's LSA barrier and GIN waits guard
window data that is coarse-grained (an L2 may hold it): their release
writes the L2 back at system scope before the flag store, their acquire
invalidates at system scope after the poll and writes nothing back (the
AMDGPU memory model: gfx90a buffer_wbl2 / buffer_invl2 + buffer_wbinvl1_vol,
gfx94x buffer_wbl2 sc0 sc1 / buffer_inv sc0 sc1 with sc0 sc1 on the flag
accesses, RDNA a wait for the stores / buffer_gl0_inv + buffer_gl1_inv).
The LL all-to-all's lines are uncached and carry their flags: 8-byte
halves with the coherent bits, no cache maintenance at all.

  port_check.py --hipcc hipcc --src port_check.cpp --src port_check_devapi.cc -I include -I src \
                --arch gfx90a,gfx940,gfx1030,gfx1100
  port_check.py --self-test     # the rules reject known-bad code

No GPU is needed: hipcc -S for each target (-nogpulib: nothing is linked).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def family(arch):
    if arch.startswith("gfx94"):
        return "gfx94"
    if arch.startswith("gfx9"):
        return "gfx9"
    if arch.startswith("gfx10"):
        return "gfx10"
    if arch.startswith("gfx11"):
        return "gfx11"
    raise SystemExit(f"port_check.py: no rules for target {arch}")


# Coherent (L1-bypassing) access bits of a polled load, per family.
POLL_BITS = {"gfx9": r"\bglc\b", "gfx94": r"\bsc0 sc1\b", "gfx10": r"\bglc dlc\b", "gfx11": r"\bglc\b"}
# An L1 (vector cache) invalidate: the acquire after a poll.
L1_INV = {"gfx9": r"buffer_wbinvl1_vol", "gfx94": r"buffer_inv sc1\b", "gfx10": r"buffer_gl0_inv",
          "gfx11": r"buffer_gl0_inv"}
# A nontemporal (streaming) store: LL lines.
NT_STORE = {"gfx9": r"\bglc slc\b", "gfx94": r"\bnt\b", "gfx10": r"\bglc slc\b", "gfx11": r"\bglc slc dlc\b"}
# Writebacks / invalidates of the whole L2 at system scope: never per step.
# (gfx94x's agent-scope "buffer_wbl2 sc1" writes back only non-coherent
# lines, which the polled memory never has: allowed there.)
SYSTEM_L2 = [r"buffer_wbl2\s*$", r"buffer_wbl2 sc0 sc1", r"buffer_invl2", r"buffer_inv sc0 sc1"]

# System scope, for the steps that guard coarse-grained window data. Keyed
# by target: gfx908 (also gfx9) has no L2 writeback and is not listed.
def sys_key(arch):
    if arch == "gfx90a":
        return "gfx90a"
    fam = family(arch)
    if fam in ("gfx94", "gfx10", "gfx11"):
        return fam
    raise SystemExit(f"port_check.py: no system-scope rules for target {arch}")


# The release's L2 writeback before a flag store (none on RDNA, whose L2 is
# coherent for the system: the wait for the stores is the release there).
SYS_WRITEBACK = {"gfx90a": r"^buffer_wbl2$", "gfx94": r"^buffer_wbl2 sc0 sc1$", "gfx10": None, "gfx11": None}
STORE_WAIT = {"gfx90a": r"s_waitcnt vmcnt\(0\)", "gfx94": r"s_waitcnt vmcnt\(0\)",
              "gfx10": r"s_waitcnt_vscnt null, 0x0", "gfx11": r"s_waitcnt_vscnt null, 0x0"}
# The acquire's invalidates after the poll.
SYS_INVALIDATE = {"gfx90a": [r"^buffer_invl2$", r"^buffer_wbinvl1_vol$"], "gfx94": [r"^buffer_inv sc0 sc1$"],
                  "gfx10": [r"^buffer_gl0_inv$", r"^buffer_gl1_inv$"], "gfx11": [r"^buffer_gl0_inv$", r"^buffer_gl1_inv$"]}
ANY_WRITEBACK = r"^buffer_wbl2\b"
LOAD4 = r"^(global|flat)_load_(dword|b32)\b"
LOAD8 = r"^(global|flat)_load_(dwordx2|b64)\b"
STORE4 = r"^(global|flat)_store_(dword|b32)\b"
STORE8 = r"^(global|flat)_store_(dwordx2|b64)\b"
WIDE = r"^(global|flat)_(load|store)_(dwordx4|b128)\b"
# Kernels held to the system-scope rules (the others: no system-scope L2 traffic).
SYSTEM_STEPS = ("uniccl_check_sym_", "uniccl_check_devapi_")


def functions(asm):
    """{kernel name: [instruction lines]} for the uniccl_check_* kernels."""
    out, cur = {}, None
    for line in asm.splitlines():
        m = re.match(r"^(uniccl_check_\w+):", line)
        if m:
            cur = m.group(1)
            out[cur] = []
            continue
        if cur is None:
            continue
        if "s_endpgm" in line:
            cur = None
            continue
        s = line.split(";")[0].strip()
        if s and not s.startswith("."):
            out[cur].append(s)
        elif re.match(r"^\.LBB\w+:", line.strip()):
            out[cur].append(line.strip().split()[0] + ("  LOOP" if "Loop Header" in line else ""))
    return out


def loop_body(lines):
    """Instructions from the first loop header to the last branch back to it."""
    for i, l in enumerate(lines):
        if l.endswith("LOOP"):
            label = l.split(":")[0]
            for j in range(len(lines) - 1, i, -1):
                if re.search(r"s_c?branch\w*\s+" + re.escape(label) + r"$", lines[j]):
                    return lines[i:j + 1], lines[j + 1:]
            return lines[i:], []
    return [], lines


def loops(lines):
    """(first, last) instruction indices of every loop: a label and a later branch back to it."""
    labels = {l.split(":")[0]: i for i, l in enumerate(lines) if re.match(r"^\.LBB\w+:", l)}
    out = []
    for j, l in enumerate(lines):
        m = re.search(r"s_c?branch\w*\s+(\.LBB\w+)$", l)
        if m and labels.get(m.group(1), j) < j:
            out.append((labels[m.group(1)], j))
    return out


def spins(lines, load):
    """The loops that sleep and load with `load` (a pattern) inside: the body lines of each."""
    out = []
    for a, b in loops(lines):
        body = lines[a:b + 1]
        if any(l.startswith("s_sleep") for l in body) and any(re.search(load, l) for l in body):
            out.append(body)
    return out


def check_system(arch, fns, need, any_re):
    """The symmetric barrier's and the Device API's steps (module docstring)."""
    fam, key = family(arch), sys_key(arch)
    poll_bits = POLL_BITS[fam]

    def release_before(lines, k, what):
        """Instruction k is a flag store that a system-scope release precedes."""
        need(any_re(lines[max(0, k - 3):k], STORE_WAIT[key]),
             f"{what}: the flag store is not preceded by a wait for the stores ({STORE_WAIT[key]})")
        if SYS_WRITEBACK[key]:
            need(any_re(lines[max(0, k - 4):k], SYS_WRITEBACK[key]),
                 f"{what}: no system-scope L2 writeback ({SYS_WRITEBACK[key]}) before the flag store")
        if fam == "gfx94":
            need(re.search(r"\bsc0 sc1\b", lines[k]), f"{what}: the flag store lacks the system bits sc0 sc1")

    def acquire_after(lines, load, what):
        """A sleeping spin of coherent loads, then an acquire load and the system invalidates; no writeback."""
        need(spins(lines, load + r".*" + poll_bits),
             f"{what}: no sleeping spin of coherent loads ({poll_bits}; hoisted?)")
        for pat in SYS_INVALIDATE[key]:
            idx = [i for i, l in enumerate(lines) if re.search(pat, l)]
            need(idx, f"{what}: no system-scope invalidate ({pat}) after the poll")
            for i in idx:
                need(any_re(lines[max(0, i - 4):i], load + r".*" + poll_bits),
                     f"{what}: the invalidate ({pat}) does not follow an acquire load of the flag")
        need(not any_re(lines, ANY_WRITEBACK),
             f"{what}: an L2 writeback in an acquire (an acquire fence, not an acquire load?)")

    post = fns.get("uniccl_check_sym_post")
    need(post is not None, "uniccl_check_sym_post missing")
    if post:
        stores = [i for i, l in enumerate(post) if re.search(STORE8, l)]
        need(stores, "symmetric post: no 8-byte epoch store")
        if stores:
            release_before(post, stores[-1], "symmetric post")

    poll = fns.get("uniccl_check_sym_poll")
    need(poll is not None, "uniccl_check_sym_poll missing")
    if poll:
        acquire_after(poll, LOAD8, "symmetric poll")
        inv = max([i for i, l in enumerate(poll) for p in SYS_INVALIDATE[key] if re.search(p, l)], default=-1)
        data = [i for i, l in enumerate(poll) if re.search(WIDE, l) and "_load_" in l]
        need(data and inv >= 0 and data[0] > inv, "symmetric poll: the window load is not after the invalidate")

    arrive = fns.get("uniccl_check_devapi_arrive")
    need(arrive is not None, "uniccl_check_devapi_arrive missing")
    if arrive:
        flags = [j for a, b in loops(arrive) for j in range(a, b + 1) if re.search(STORE4, arrive[j])]
        need(flags, "LSA barrier arrive: no flag store in the loop over peers")
        if flags:
            release_before(arrive, flags[-1], "LSA barrier arrive")

    wait = fns.get("uniccl_check_devapi_wait")
    need(wait is not None, "uniccl_check_devapi_wait missing")
    if wait:
        acquire_after(wait, LOAD4, "LSA barrier wait")

    for name, what in (("uniccl_check_devapi_ll_send", "LL all-to-all send"),
                       ("uniccl_check_devapi_ll_recv", "LL all-to-all receive")):
        lines = fns.get(name)
        need(lines is not None, f"{name} missing")
        if not lines:
            continue
        need(not any_re(lines, r"^buffer_"), f"{what}: cache maintenance (the lines carry their flags)")
        need(not any_re(lines, WIDE), f"{what}: a 16-byte access (a line is two 8-byte halves, each with its flag)")
        if name.endswith("send"):
            st = [l for l in lines if re.search(STORE8, l)]
            need(len(st) >= 2, f"{what}: the line is not stored as two 8-byte halves")
            if fam == "gfx94":
                need(st and all(re.search(r"\bsc0 sc1\b", l) for l in st),
                     f"{what}: a line store lacks the system bits sc0 sc1")
        else:
            sp = spins(lines, LOAD8 + r".*" + poll_bits)
            need(sp and sum(1 for l in sp[-1] if re.search(LOAD8 + r".*" + poll_bits, l)) >= 2,
                 f"{what}: the line's two coherent 8-byte loads ({poll_bits}) are not inside a sleeping spin")

    gin = fns.get("uniccl_check_devapi_gin")
    need(gin is not None, "uniccl_check_devapi_gin missing")
    if gin:
        desc = [i for i, l in enumerate(gin) if re.search(STORE8, l)]
        need(len(desc) >= 8, "GIN put: the descriptor is not eight 8-byte stores")
        if fam == "gfx94":
            need(all(re.search(r"\bsc0 sc1\b", gin[i]) for i in desc), "GIN put: a descriptor store lacks sc0 sc1")
        wb = [i for i, l in enumerate(gin) if re.search(ANY_WRITEBACK, l)]
        if SYS_WRITEBACK[key]:
            need(wb and desc and wb[0] < desc[0], "GIN put: no system-scope L2 writeback before the descriptor")
        need(not (wb and desc and wb[-1] > desc[-1]), "GIN signal wait: an L2 writeback in the acquire")
        need(spins(gin, LOAD8 + r".*" + poll_bits), "GIN signal wait: no sleeping spin of coherent 8-byte loads")
        for pat in SYS_INVALIDATE[key]:
            need(any_re(gin[desc[-1] if desc else 0:], pat), f"GIN signal wait: no system-scope invalidate ({pat})")


def check(arch, fns):
    fam = family(arch)
    errs = []

    def need(cond, what):
        if not cond:
            errs.append(f"{arch}: {what}")

    def any_re(lines, pat):
        return any(re.search(pat, l) for l in lines)

    check_system(arch, fns, need, any_re)
    for name, lines in fns.items():
        if name.startswith(SYSTEM_STEPS):
            continue
        for pat in SYSTEM_L2:
            for l in lines:
                if re.search(pat, l):
                    errs.append(f"{arch}: {name}: system-scope L2 writeback/invalidate '{l}' in a protocol step")

    post = fns.get("uniccl_check_post")
    need(post is not None, "uniccl_check_post missing")
    if post:
        stores = [i for i, l in enumerate(post) if re.match(r"global_store_(dwordx2|b64)\b", l)]
        need(stores, "post: no 8-byte counter store")
        if stores:
            k = stores[-1]
            wait = r"s_waitcnt vmcnt\(0\)" if fam in ("gfx9", "gfx94") else r"s_waitcnt_vscnt null, 0x0"
            need(any_re(post[max(0, k - 3):k], wait),
                 f"post: the counter store is not preceded by a wait for the data stores ({wait})")
            if fam == "gfx94":
                need(re.search(r"\bsc0 sc1\b", post[k]), "post: the counter store lacks the system bits sc0 sc1")

    poll = fns.get("uniccl_check_poll")
    need(poll is not None, "uniccl_check_poll missing")
    if poll:
        body, after = loop_body(poll)
        need(body, "poll: no spin loop (the counter load was hoisted?)")
        need(any_re(body, r"global_load_(dwordx2|b64)\b.*" + POLL_BITS[fam]),
             f"poll: the spin's counter load lacks the coherent bits ({POLL_BITS[fam]})")
        need(any_re(body, r"s_sleep"), "poll: the spin does not sleep")
        need(any_re(after, L1_INV[fam]), f"poll: no L1 invalidate ({L1_INV[fam]}) after the spin")

    ll = fns.get("uniccl_check_ll_recv")
    need(ll is not None, "uniccl_check_ll_recv missing")
    if ll:
        body, after = loop_body(ll)
        loads = [l for l in body if re.match(r"global_load_(dwordx2|b64)\b", l)]
        need(len(loads) >= 2, "LL poll: the line's two loads are not inside the spin (hoisted?)")
        need(all(re.search(POLL_BITS[fam], l) for l in loads) and loads,
             f"LL poll: a line load lacks the coherent bits ({POLL_BITS[fam]})")
        need(any_re(body, r"s_sleep"), "LL poll: the spin does not sleep")
        need(not any_re(ll, r"^buffer_"), "LL receive: a cache writeback/invalidate (LL needs none)")
        bar = max([i for i, l in enumerate(ll) if l.startswith("s_barrier")], default=0)
        head = [l for l in ll[bar:] if re.match(r"global_store_(dwordx2|b64)\b", l)]
        need(head, "LL receive: no head store")
        if head and fam == "gfx94":
            need(re.search(r"\bsc0 sc1\b", head[-1]), "LL receive: the head store lacks sc0 sc1")

    send = fns.get("uniccl_check_ll_send")
    need(send is not None, "uniccl_check_ll_send missing")
    if send:
        st = [l for l in send if re.match(r"global_store_", l)]
        need(st and all(re.search(NT_STORE[fam], l) for l in st),
             f"LL send: the line stores are not nontemporal ({NT_STORE[fam]})")
        need(not any_re(send, r"^buffer_"), "LL send: a cache writeback (the flags publish the data)")

    timer = fns.get("uniccl_check_timer")
    need(timer is not None, "uniccl_check_timer missing")
    if timer:
        pat = r"s_sendmsg_rtn_b64 .*MSG_RTN_GET_REALTIME" if fam == "gfx11" else r"s_memrealtime"
        need(any_re(timer, pat), f"timer: not the steady wall clock ({pat})")
    return errs


# Known-bad code the rules must reject: gfx90a code that breaks every rule
# (system release = full L2 writeback per step, acquire per poll with
# an L2 invalidate, LL loads hoisted out of the spin, no sleep).
BAD_GFX90A = """
uniccl_check_post:
	global_store_dwordx4 v[4:5], v[0:3], off
	s_barrier
	buffer_wbl2
	s_waitcnt vmcnt(0)
	global_store_dwordx2 v2, v[0:1], s[48:49]
	s_endpgm
uniccl_check_poll:
.LBB1_1:                                ; =>This Inner Loop Header: Depth=1
	global_load_dwordx2 v[2:3], v41, s[36:37] glc
	s_waitcnt vmcnt(0)
	buffer_invl2
	buffer_wbinvl1_vol
	s_cbranch_vccnz .LBB1_1
	global_load_dwordx4 v[0:3], v[0:1], off glc slc
	s_endpgm
uniccl_check_ll_recv:
	global_load_dwordx2 v[0:1], v[4:5], off glc slc
	global_load_dwordx2 v[2:3], v[4:5], off offset:8 glc slc
.LBB2_2:                                ; =>This Inner Loop Header: Depth=1
	s_cbranch_scc1 .LBB2_2
	s_barrier
	global_store_dwordx2 v1, v[0:1], s[46:47]
	s_endpgm
uniccl_check_ll_send:
	global_store_dwordx4 v[6:7], v[0:3], off
	s_endpgm
uniccl_check_timer:
	s_memrealtime s[0:1]
	s_endpgm
uniccl_check_sym_post:
	global_store_dwordx4 v[4:5], v[0:3], off
	s_barrier
	s_waitcnt vmcnt(0) lgkmcnt(0)
	global_store_dwordx2 v2, v[0:1], s[48:49]
	s_endpgm
uniccl_check_sym_poll:
.LBB9_1:                                ; =>This Inner Loop Header: Depth=1
	s_sleep 1
	global_load_dwordx2 v[2:3], v41, s[36:37] glc
	s_waitcnt vmcnt(0)
	s_cbranch_vccnz .LBB9_1
	buffer_wbl2
	s_waitcnt vmcnt(0) lgkmcnt(0)
	buffer_invl2
	buffer_wbinvl1_vol
	global_load_dwordx4 v[0:3], v[0:1], off
	s_endpgm
uniccl_check_devapi_ll_send:
	global_store_dwordx4 v[6:7], v[10:13], off
	s_endpgm
"""


def self_test():
    errs = check("gfx90a", functions(BAD_GFX90A))
    wanted = ["in a protocol step", "L1 invalidate", "does not sleep",
              "not inside the spin", "not nontemporal",
              "symmetric post: no system-scope L2 writeback", "symmetric poll: an L2 writeback in an acquire",
              "does not follow an acquire load", "LL all-to-all send: a 16-byte access",
              "uniccl_check_devapi_wait missing"]
    missing = [w for w in wanted if not any(w in e for e in errs)]
    if missing:
        print("port_check.py self-test: the rules missed: " + ", ".join(missing))
        return 1
    print(f"port_check.py self-test: {len(errs)} findings in the known-bad gfx90a code, as expected")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hipcc")
    ap.add_argument("--src", action="append", default=[], help="a source of uniccl_check_* kernels (repeatable)")
    ap.add_argument("-I", dest="inc", action="append", default=[])
    ap.add_argument("--arch", default="gfx90a,gfx940,gfx1030,gfx1100")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    failed = 0
    # One translation unit of every source: one compiler run per target.
    with tempfile.NamedTemporaryFile("w", suffix=".hip", delete=False) as tu:
        tu.write("".join(f'#include "{os.path.abspath(src)}"\n' for src in a.src))
    try:
        for arch in [x.strip() for x in a.arch.split(",") if x.strip()]:
            cmd = [a.hipcc, "-x", "hip", "--offload-arch=" + arch, "-nogpulib", "--cuda-device-only", "-O3", "-S",
                   "-Wno-unused-command-line-argument", "-DUNICCL_GPU_BACKEND_HIP=1", "-o", "-", tu.name]
            for i in a.inc:
                cmd[1:1] = ["-I", i]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{arch}: compile failed:\n{r.stderr[-3000:]}")
                failed += 1
                continue
            fns = functions(r.stdout)
            errs = check(arch, fns)
            if errs:
                failed += 1
                print("\n".join(errs))
            else:
                nsys = sum(1 for f in fns if f.startswith(SYSTEM_STEPS))
                print(f"{arch}: {len(fns) - nsys} protocol steps OK (bits, fences, no system-scope L2 traffic, "
                      f"sleeping spins); {nsys} symmetric / Device API steps OK (system-scope release and acquire, "
                      "no writeback in an acquire, 8-byte LL halves)")
    finally:
        os.unlink(tu.name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
