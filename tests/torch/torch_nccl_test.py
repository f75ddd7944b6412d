#!/usr/bin/env python3
"""PyTorch on uniccl: torch.distributed's "nccl" backend, world size 1, one GPU,
with uniccl's libnccl.so.2 preloaded in place of NVIDIA's.

    LD_PRELOAD=/path/to/uniccl/libnccl.so.2 python torch_nccl_test.py /path/to/uniccl/libnccl.so.2

(tests/torch/run.sh does that and skips where PyTorch or a GPU is missing.)

It first makes sure the NCCL torch runs on is uniccl (the only libnccl mapped
into the process is the preloaded one), then checks every collective against
a host reference on fresh random data, a process group made by new_group and
split_group, shrink_group when this torch has it, and an all_reduce captured
in a CUDA graph and replayed with changing inputs.

With one rank most results equal the input, so a library that did nothing
would pass those; the out-of-place collectives (all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single) and PREMUL_SUM all_reduces (the
result is the input scaled) only pass if uniccl's kernels really ran.

Prints one line per check, then "N passed, N failed, N skipped"; exits 1 on
any failure, 77 when nothing could run (no GPU).
"""

import datetime
import ctypes
import os
import socket
import sys
import traceback

RESULTS = {"PASS": 0, "FAIL": 0, "SKIP": 0}


def report(verdict, name, detail=""):
    RESULTS[verdict] += 1
    print(f"{verdict:4} {name}" + (f": {detail}" if detail else ""), flush=True)


def mapped_ncclLibs():
    """Real paths of every libnccl.so* mapped into this process (plugins such
    as libnccl-net.so or libnccl-profiler-*.so are other libraries)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.basename(parts[5]).startswith("libnccl.so"):
                libs.add(os.path.realpath(parts[5]))
    return libs


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def bound_library(name):
    """Real path of the library the process-wide lookup of `name` finds."""
    libc = ctypes.CDLL(None)
    addr = ctypes.cast(getattr(libc, name), ctypes.c_void_p)
    info = _DlInfo()
    libdl = ctypes.CDLL("libc.so.6")
    if not libdl.dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(info.dli_fname.decode())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    ours = os.path.realpath(sys.argv[1])
    import torch
    import torch.distributed as dist

    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    if not torch.cuda.is_available():
        print("skip: torch sees no GPU")
        return 77

    # ---- is torch's NCCL uniccl? ----
    # torch's own libnccl.so.2 (its wheel's RUNPATH) may be mapped too: what
    # counts is where the process's global lookup of the NCCL API lands,
    # which LD_PRELOAD puts first.
    mapped = mapped_ncclLibs()
    bound = {name: bound_library(name) for name in ("ncclCommInitRankConfig", "ncclAllReduce", "ncclDevCommCreate")}
    if ours not in mapped or any(path != ours for path in bound.values()):
        report("FAIL", "torch runs on uniccl",
               f"libnccl mapped: {sorted(mapped) or 'none'}; the API binds to {bound}; expected {ours} "
               "(is it in LD_PRELOAD?)")
        print(f"{RESULTS['PASS']} passed, {RESULTS['FAIL']} failed, {RESULTS['SKIP']} skipped")
        return 1
    report("PASS", "torch runs on uniccl", f"{ours} (also mapped: {sorted(mapped - {ours}) or 'nothing'}), "
           f"torch.cuda.nccl.version() = {torch.cuda.nccl.version()}")

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    init = dict(backend="nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1,
                timeout=datetime.timedelta(seconds=120))
    try:
        dist.init_process_group(**init, device_id=dev)   # binds the GPU: eager init, split_group works
    except TypeError:
        dist.init_process_group(**init)
    world = dist.get_world_size()
    gen = torch.Generator(device="cpu").manual_seed(20)
    R = dist.ReduceOp

    def fresh(n, dtype):
        if dtype == torch.int64:
            return torch.randint(-1000, 1000, (n,), generator=gen, dtype=dtype)
        # Products of several ranks' values stay representable in half types.
        x = torch.empty(n).uniform_(0.5, 1.5, generator=gen) if dtype in (torch.float16, torch.bfloat16) \
            else torch.randn(n, generator=gen)
        return x.to(dtype)

    def close(got, want, dtype):
        got, want = got.cpu(), want.cpu()
        if dtype == torch.int64:
            return torch.equal(got, want)
        tol = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 2e-2}[dtype]
        return torch.allclose(got.float(), want.float(), rtol=tol, atol=tol)

    def host_reduce(op, xs, dtype):
        """Reference over the ranks' inputs (one rank here), computed in float64/int64."""
        acc = torch.stack([x.double() if dtype != torch.int64 else x for x in xs])
        if op == R.SUM:
            out = acc.sum(0)
        elif op == R.PRODUCT:
            out = acc.prod(0)
        elif op == R.MAX:
            out = acc.max(0).values
        elif op == R.MIN:
            out = acc.min(0).values
        elif op == R.AVG:
            out = acc.sum(0) / len(xs) if dtype != torch.int64 else torch.div(acc.sum(0), len(xs), rounding_mode="trunc")
        return out.to(dtype)

    def check(name, fn):
        try:
            verdict, detail = fn()
        except Exception as e:   # noqa: BLE001 - every failure is reported, the run goes on
            verdict, detail = "FAIL", f"{type(e).__name__}: {e}"
            traceback.print_exc()
        report(verdict, name, detail)

    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.int64]
    sizes = [1, 12345, 1 << 20]
    ops = [("sum", R.SUM), ("max", R.MAX), ("min", R.MIN), ("product", R.PRODUCT), ("avg", R.AVG)]

    # ---- all_reduce ----
    for dtype in dtypes:
        for n in sizes:
            for opname, op in ops:
                def run(dtype=dtype, n=n, op=op, opname=opname):
                    x = fresh(n, dtype)
                    t = x.to(dev)
                    try:
                        dist.all_reduce(t, op=op)
                    except (RuntimeError, ValueError) as e:
                        if op == R.AVG and dtype == torch.int64 and "avg" in str(e).lower():
                            return "SKIP", f"torch refuses AVG on int64: {e}"
                        raise
                    torch.cuda.synchronize()
                    ok = close(t, host_reduce(op, [x], dtype), dtype)
                    return ("PASS", "") if ok else ("FAIL", "result differs from the host reference")
                check(f"all_reduce {opname} {str(dtype)[6:]} n={n}", run)

    # PREMUL_SUM: the result is the input scaled, so the kernel must have run.
    premul = getattr(dist, "_make_nccl_premul_sum", None)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n in sizes:
            def run(dtype=dtype, n=n):
                if premul is None:
                    return "SKIP", "this torch has no dist._make_nccl_premul_sum"
                if dtype == torch.bfloat16:
                    # PyTorch 2.11 hands ncclRedOpCreatePreMulSum a float32 scalar for
                    # bfloat16 while NCCL reads a bfloat16 (its first 2 bytes): NVIDIA's
                    # NCCL 2.28.9 fails this check the same way (H100, same script).
                    return "SKIP", "torch passes a float32 scalar for a bfloat16 PreMulSum (NCCL fails it too)"
                x = fresh(n, dtype)
                t = x.to(dev)
                dist.all_reduce(t, op=premul(2.0))
                torch.cuda.synchronize()
                return ("PASS", "") if close(t, (x.double() * 2 * world).to(dtype), dtype) else \
                    ("FAIL", "not 2 x input")
            check(f"all_reduce premul_sum(2.0) {str(dtype)[6:]} n={n}", run)

    # ---- the other collectives (float32 and int64, every size) ----
    for dtype in (torch.float32, torch.int64):
        for n in sizes:
            tag = f"{str(dtype)[6:]} n={n}"

            def bcast(dtype=dtype, n=n):
                x = fresh(n, dtype)
                t = x.to(dev)
                dist.broadcast(t, src=0)
                torch.cuda.synchronize()
                return ("PASS", "") if close(t, x, dtype) else ("FAIL", "differs")
            check(f"broadcast {tag}", bcast)

            def gather(dtype=dtype, n=n):
                x = fresh(n, dtype)
                out = torch.full((world * n,), -7, dtype=dtype, device=dev)   # stale values must go
                dist.all_gather_into_tensor(out, x.to(dev))
                torch.cuda.synchronize()
                return ("PASS", "") if close(out, torch.cat([x] * world), dtype) else ("FAIL", "differs")
            check(f"all_gather_into_tensor {tag}", gather)

            def rscatter(dtype=dtype, n=n):
                x = fresh(world * n, dtype)
                out = torch.full((n,), -7, dtype=dtype, device=dev)
                dist.reduce_scatter_tensor(out, x.to(dev), op=R.SUM)
                torch.cuda.synchronize()
                want = host_reduce(R.SUM, [x], dtype)[:n]   # rank 0's chunk
                return ("PASS", "") if close(out, want, dtype) else ("FAIL", "differs")
            check(f"reduce_scatter_tensor sum {tag}", rscatter)

            def a2a(dtype=dtype, n=n):
                x = fresh(world * n, dtype)
                out = torch.full((world * n,), -7, dtype=dtype, device=dev)
                dist.all_to_all_single(out, x.to(dev))
                torch.cuda.synchronize()
                return ("PASS", "") if close(out, x, dtype) else ("FAIL", "differs")
            check(f"all_to_all_single {tag}", a2a)

            def reduce(dtype=dtype, n=n):
                x = fresh(n, dtype)
                t = x.to(dev)
                dist.reduce(t, dst=0, op=R.MAX)
                torch.cuda.synchronize()
                return ("PASS", "") if close(t, host_reduce(R.MAX, [x], dtype), dtype) else ("FAIL", "differs")
            check(f"reduce max {tag}", reduce)

    report("SKIP", "send/recv", "impossible with world size 1 (a rank cannot pair with itself in torch)")

    # ---- groups: new_group, split_group, shrink_group ----
    def on_group(pg):
        x = fresh(4099, torch.float32)
        out = torch.full((4099 * pg.size(),), -7.0, device=dev)
        dist.all_gather_into_tensor(out, x.to(dev), group=pg)
        t = x.to(dev)
        dist.all_reduce(t, op=R.SUM, group=pg)
        torch.cuda.synchronize()
        ok = close(out, torch.cat([x] * pg.size()), torch.float32) and close(t, x * pg.size(), torch.float32)
        return ("PASS", "") if ok else ("FAIL", "collective on the group differs")

    check("new_group([0])", lambda: on_group(dist.new_group([0])))

    def split():
        if not hasattr(dist, "split_group"):
            return "SKIP", f"torch {torch.__version__} has no torch.distributed.split_group"
        pg = dist.split_group(split_ranks=[[0]])
        if pg is None:
            return "FAIL", "split_group returned None for a member rank"
        return on_group(pg)
    check("split_group([[0]])", split)

    def shrink():
        c10d = dist.distributed_c10d
        if not hasattr(c10d, "shrink_group"):
            return "SKIP", f"torch {torch.__version__} has no distributed_c10d.shrink_group"
        # With one rank nothing can be excluded: an empty exclusion list is
        # the only call, and torch may refuse it before reaching NCCL.
        try:
            pg = c10d.shrink_group([])
        except (ValueError, RuntimeError) as e:
            if "empty" in str(e).lower() or "exclude" in str(e).lower():
                return "SKIP", f"world size 1 leaves no rank to exclude (torch: {e})"
            raise
        return on_group(pg)
    check("shrink_group", shrink)

    # ---- CUDA graph: one captured all_reduce, replayed with new inputs ----
    def graph():
        n = 65536
        op = premul(3.0) if premul is not None else R.SUM
        factor = 3.0 * world if premul is not None else world
        buf = torch.zeros(n, device=dev)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):   # warm-up outside the capture, as PyTorch recommends
            dist.all_reduce(buf, op=op)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            dist.all_reduce(buf, op=op)
        for i in range(5):
            x = fresh(n, torch.float32)
            buf.copy_(x.to(dev))
            g.replay()
            torch.cuda.synchronize()
            if not close(buf, x * factor, torch.float32):
                return "FAIL", f"replay {i}: result differs"
        note = "" if premul is not None else "SUM (no premul_sum in this torch: replays of one rank are identities)"
        return "PASS", note
    check("all_reduce in a CUDA graph, 5 replays", graph)

    dist.destroy_process_group()
    print(f"{RESULTS['PASS']} passed, {RESULTS['FAIL']} failed, {RESULTS['SKIP']} skipped", flush=True)
    return 1 if RESULTS["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
