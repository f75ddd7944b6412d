#!/usr/bin/env python3
"""Reads the AMD GPU code of the port layer's protocol steps (the extern "C"
kernels of src/device/port_check.in) and checks the cache bits and fences
each step must have, per target (docs/amd.md has the table).

  port_check.py --hipcc hipcc --src port_check.cpp -I include -I src \
                --arch gfx90a,gfx940,gfx1030,gfx1100
  port_check.py --self-test     # the rules reject known-bad code

No GPU is needed: hipcc -S for each target (-nogpulib: nothing is linked).
"""
import argparse
import re
import subprocess
import sys


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


def check(arch, fns):
    fam = family(arch)
    errs = []

    def need(cond, what):
        if not cond:
            errs.append(f"{arch}: {what}")

    def any_re(lines, pat):
        return any(re.search(pat, l) for l in lines)

    for name, lines in fns.items():
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
"""


def self_test():
    errs = check("gfx90a", functions(BAD_GFX90A))
    wanted = ["system-scope L2", "L1 invalidate", "does not sleep",
              "not inside the spin", "not nontemporal"]
    missing = [w for w in wanted if not any(w in e for e in errs)]
    if missing:
        print("port_check.py self-test: the rules missed: " + ", ".join(missing))
        return 1
    print(f"port_check.py self-test: {len(errs)} findings in the known-bad gfx90a code, as expected")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hipcc")
    ap.add_argument("--src")
    ap.add_argument("-I", dest="inc", action="append", default=[])
    ap.add_argument("--arch", default="gfx90a,gfx940,gfx1030,gfx1100")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    failed = 0
    for arch in [x.strip() for x in a.arch.split(",") if x.strip()]:
        cmd = [a.hipcc, "-x", "hip", "--offload-arch=" + arch, "-nogpulib", "--cuda-device-only", "-O3", "-S",
               "-Wno-unused-command-line-argument", "-DUNICCL_GPU_BACKEND_HIP=1", "-o", "-", a.src]
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
            print(f"{arch}: {len(fns)} protocol steps OK (bits, fences, no system-scope L2 traffic, sleeping spins)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
