#!/usr/bin/env python3
"""PyTorch on uniccl: torch.distributed's "nccl" backend, one process and one
GPU per rank (world size: every visible GPU, or TORCH_WORLD), with uniccl's
libnccl.so.2 preloaded in place of NVIDIA's.

    LD_PRELOAD=/path/to/uniccl/libnccl.so.2 python torch_nccl_test.py /path/to/uniccl/libnccl.so.2

(tests/torch/run.sh does that and skips where PyTorch or a GPU is missing.)

The launcher starts one process per rank. Each first makes sure the NCCL torch
runs on is uniccl (the only libnccl mapped into the process is the preloaded
one), then checks every collective against a host reference on fresh random
data (every rank draws every rank's inputs from one seed), send/recv in a
ring (2+ ranks), process groups made by new_group and split_group, an
all_reduce captured in a CUDA graph and replayed with changing inputs,
symmetric memory with the NCCL backend (torch.distributed._symmetric_memory:
ncclMemAlloc, ncclCommWindowRegister, ncclDevCommCreate, and torch's own
kernels, built against NVIDIA's nccl_device.h, reading uniccl's windows),
and last shrink_group (excluding the last rank) when this torch has it.

With one rank most results equal the input, so a library that did nothing
would pass those; the out-of-place collectives (all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single), PREMUL_SUM all_reduces (the
result is the input scaled) and the symmetric-memory reads (through the
window's second mapping) only pass if uniccl really ran.

Prints rank 0's line per check and other ranks' failures, then "world size W:
N passed, N failed, N skipped"; exits 1 on any failure, 77 when nothing could
run (no GPU).
"""

import datetime
import ctypes
import os
import re
import socket
import subprocess
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


def launch(ours, world):
    """Starts `world` ranks of this script (one process and one GPU each), shows
    rank 0's report and every other rank's failures, and sums the verdicts."""
    port = free_port()
    procs = []
    for r in range(world):
        env = dict(os.environ, UNICCL_TORCH_RANK=str(r), UNICCL_TORCH_WORLD=str(world),
                   UNICCL_TORCH_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), ours], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    totals = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    failed_ranks = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out = (p.communicate()[0] or "") + "\n(killed after 900 s)"
        counts = None
        for line in out.splitlines():
            m = re.match(r"(\d+) passed, (\d+) failed, (\d+) skipped$", line)
            if m:
                counts = [int(v) for v in m.groups()]
            elif r == 0 or not line.startswith(("PASS", "SKIP")):
                print(line if r == 0 else f"[rank {r}] {line}", flush=True)
        if counts is None or p.returncode not in (0, 1):
            failed_ranks.append(f"rank {r} ended with exit code {p.returncode} before its summary")
            continue
        if r == 0:    # a check is one line per rank: count rank 0's, and every rank's failures
            totals["PASS"], totals["SKIP"] = counts[0], counts[2]
        totals["FAIL"] += counts[1]
    for msg in failed_ranks:
        report("FAIL", "rank process", msg)
    totals["FAIL"] += RESULTS["FAIL"]
    print(f"world size {world}: {totals['PASS']} passed, {totals['FAIL']} failed, {totals['SKIP']} skipped",
          flush=True)
    return 1 if totals["FAIL"] else 0


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    ours = os.path.realpath(sys.argv[1])
    import torch
    if "UNICCL_TORCH_RANK" not in os.environ:   # the launcher
        if not torch.cuda.is_available():
            print("skip: torch sees no GPU")
            return 77
        world = int(os.environ.get("TORCH_WORLD", torch.cuda.device_count()))
        return launch(ours, world)
    return rank_main(ours, int(os.environ["UNICCL_TORCH_RANK"]), int(os.environ["UNICCL_TORCH_WORLD"]),
                     int(os.environ["UNICCL_TORCH_PORT"]))


def rank_main(ours, rank, world, port):
    import torch
    import torch.distributed as dist

    if rank == 0:
        print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, world size {world}", flush=True)

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

    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    init = dict(backend="nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                timeout=datetime.timedelta(seconds=120))
    try:
        dist.init_process_group(**init, device_id=dev)   # binds the GPU: eager init, split_group works
    except TypeError:
        dist.init_process_group(**init)
    # Every rank draws every rank's inputs from one seed, so each knows the
    # whole reference and uses its own share.
    gen = torch.Generator(device="cpu").manual_seed(20)
    R = dist.ReduceOp

    def fresh_one(n, dtype):
        if dtype == torch.int64:
            return torch.randint(-1000, 1000, (n,), generator=gen, dtype=dtype)
        # Products of several ranks' values stay representable in half types.
        x = torch.empty(n).uniform_(0.5, 1.5, generator=gen) if dtype in (torch.float16, torch.bfloat16) \
            else torch.randn(n, generator=gen)
        return x.to(dtype)

    def fresh(n, dtype):
        """Every rank's input: the list, rank r's at [r]."""
        return [fresh_one(n, dtype) for _ in range(world)]

    def close(got, want, dtype):
        got, want = got.cpu(), want.cpu()
        if dtype == torch.int64:
            return torch.equal(got, want)
        tol = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 2e-2}[dtype]
        return torch.allclose(got.float(), want.float(), rtol=tol, atol=tol * world)

    def host_reduce(op, xs, dtype):
        """Reference over the ranks' inputs, computed in float64/int64."""
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

    def verdict(ok, what="result differs from the host reference"):
        return ("PASS", "") if ok else ("FAIL", what)

    def check(name, fn):
        try:
            v, detail = fn()
        except Exception as e:   # noqa: BLE001 - every failure is reported, the run goes on
            v, detail = "FAIL", f"{type(e).__name__}: {e}"
            traceback.print_exc()
        report(v, name, detail)

    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.int64]
    sizes = [1, 12345, 1 << 20]
    ops = [("sum", R.SUM), ("max", R.MAX), ("min", R.MIN), ("product", R.PRODUCT), ("avg", R.AVG)]

    # ---- all_reduce ----
    for dtype in dtypes:
        for n in sizes:
            for opname, op in ops:
                def run(dtype=dtype, n=n, op=op):
                    xs = fresh(n, dtype)
                    t = xs[rank].to(dev)
                    try:
                        dist.all_reduce(t, op=op)
                    except (RuntimeError, ValueError) as e:
                        if op == R.AVG and dtype == torch.int64 and "avg" in str(e).lower():
                            return "SKIP", f"torch refuses AVG on int64: {e}"
                        raise
                    torch.cuda.synchronize()
                    return verdict(close(t, host_reduce(op, xs, dtype), dtype))
                check(f"all_reduce {opname} {str(dtype)[6:]} n={n}", run)

    # PREMUL_SUM: the result is the inputs scaled and summed, so the kernel must have run.
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
                xs = fresh(n, dtype)
                t = xs[rank].to(dev)
                dist.all_reduce(t, op=premul(2.0))
                torch.cuda.synchronize()
                want = (2 * torch.stack([x.double() for x in xs]).sum(0)).to(dtype)
                return verdict(close(t, want, dtype), "not the sum of 2 x the inputs")
            check(f"all_reduce premul_sum(2.0) {str(dtype)[6:]} n={n}", run)

    # ---- the other collectives (float32 and int64, every size) ----
    for dtype in (torch.float32, torch.int64):
        for n in sizes:
            tag = f"{str(dtype)[6:]} n={n}"

            def bcast(dtype=dtype, n=n):
                xs = fresh(n, dtype)
                root = world - 1
                t = xs[rank].to(dev)
                dist.broadcast(t, src=root)
                torch.cuda.synchronize()
                return verdict(close(t, xs[root], dtype))
            check(f"broadcast {tag}", bcast)

            def gather(dtype=dtype, n=n):
                xs = fresh(n, dtype)
                out = torch.full((world * n,), -7, dtype=dtype, device=dev)   # stale values must go
                dist.all_gather_into_tensor(out, xs[rank].to(dev))
                torch.cuda.synchronize()
                return verdict(close(out, torch.cat(xs), dtype))
            check(f"all_gather_into_tensor {tag}", gather)

            def rscatter(dtype=dtype, n=n):
                xs = fresh(world * n, dtype)
                out = torch.full((n,), -7, dtype=dtype, device=dev)
                dist.reduce_scatter_tensor(out, xs[rank].to(dev), op=R.SUM)
                torch.cuda.synchronize()
                want = host_reduce(R.SUM, xs, dtype)[rank * n:(rank + 1) * n]
                return verdict(close(out, want, dtype))
            check(f"reduce_scatter_tensor sum {tag}", rscatter)

            def a2a(dtype=dtype, n=n):
                xs = fresh(world * n, dtype)
                out = torch.full((world * n,), -7, dtype=dtype, device=dev)
                dist.all_to_all_single(out, xs[rank].to(dev))
                torch.cuda.synchronize()
                want = torch.cat([xs[q][rank * n:(rank + 1) * n] for q in range(world)])
                return verdict(close(out, want, dtype))
            check(f"all_to_all_single {tag}", a2a)

            def reduce(dtype=dtype, n=n):
                xs = fresh(n, dtype)
                t = xs[rank].to(dev)
                dist.reduce(t, dst=0, op=R.MAX)
                torch.cuda.synchronize()
                if rank != 0:
                    return "PASS", ""    # only the root's buffer is defined
                return verdict(close(t, host_reduce(R.MAX, xs, dtype), dtype))
            check(f"reduce max {tag}", reduce)

            def sendrecv(dtype=dtype, n=n):
                # A ring: every rank sends to the next and receives from the previous.
                xs = fresh(n, dtype)
                out = torch.full((n,), -7, dtype=dtype, device=dev)
                ops_ = [dist.P2POp(dist.isend, xs[rank].to(dev), (rank + 1) % world),
                        dist.P2POp(dist.irecv, out, (rank - 1) % world)]
                for w in dist.batch_isend_irecv(ops_):
                    w.wait()
                torch.cuda.synchronize()
                return verdict(close(out, xs[(rank - 1) % world], dtype))
            if world > 1:
                check(f"batch_isend_irecv ring {tag}", sendrecv)
    if world == 1:
        report("SKIP", "send/recv", "impossible with world size 1 (a rank cannot pair with itself in torch)")

    # ---- groups: new_group, split_group ----
    def on_group(pg, members):
        xs = fresh(4099, torch.float32)
        mine = xs[rank]
        want = [xs[m] for m in members]
        out = torch.full((4099 * pg.size(),), -7.0, device=dev)
        dist.all_gather_into_tensor(out, mine.to(dev), group=pg)
        t = mine.to(dev)
        dist.all_reduce(t, op=R.SUM, group=pg)
        torch.cuda.synchronize()
        ok = pg.size() == len(members) and close(out, torch.cat(want), torch.float32) and \
            close(t, torch.stack(want).sum(0), torch.float32)
        return verdict(ok, "collective on the group differs")

    everyone = list(range(world))
    check(f"new_group({everyone})", lambda: on_group(dist.new_group(everyone), everyone))

    halves = [everyone[:(world + 1) // 2], everyone[(world + 1) // 2:]] if world > 1 else [everyone]

    def split():
        if not hasattr(dist, "split_group"):
            return "SKIP", f"torch {torch.__version__} has no torch.distributed.split_group"
        pg = dist.split_group(split_ranks=halves)
        if pg is None:
            return "FAIL", "split_group returned None for a member rank"
        return on_group(pg, next(h for h in halves if rank in h))
    check(f"split_group({halves})", split)

    # ---- CUDA graph: one captured all_reduce, replayed with new inputs ----
    def graph():
        n = 65536
        op = premul(3.0) if premul is not None else R.SUM
        scale = 3.0 if premul is not None else 1.0
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
            xs = fresh(n, torch.float32)
            buf.copy_(xs[rank].to(dev))
            g.replay()
            torch.cuda.synchronize()
            if not close(buf, scale * torch.stack(xs).sum(0), torch.float32):
                return "FAIL", f"replay {i}: result differs"
        return "PASS", "" if premul is not None else "SUM (no premul_sum in this torch)"
    check("all_reduce in a CUDA graph, 5 replays", graph)

    symmetric_memory_checks(torch, dist, rank, world, dev, check, verdict, close)

    # ---- shrink_group: last, it may leave this rank outside the new group ----
    def shrink():
        c10d = dist.distributed_c10d
        if not hasattr(c10d, "shrink_group"):
            return "SKIP", f"torch {torch.__version__} has no distributed_c10d.shrink_group"
        if world == 1:
            # With one rank nothing can be excluded: an empty exclusion list is
            # the only call, and torch may refuse it before reaching NCCL.
            try:
                pg = c10d.shrink_group([])
            except (ValueError, RuntimeError) as e:
                if "empty" in str(e).lower() or "exclude" in str(e).lower():
                    return "SKIP", f"world size 1 leaves no rank to exclude (torch: {e})"
                raise
            return on_group(pg, everyone)
        if rank == world - 1:
            return "PASS", "excluded rank: takes no part"
        pg = c10d.shrink_group([world - 1])
        return on_group(pg, everyone[:-1])
    check(f"shrink_group excluding rank {world - 1}", shrink)

    dist.destroy_process_group()
    print(f"{RESULTS['PASS']} passed, {RESULTS['FAIL']} failed, {RESULTS['SKIP']} skipped", flush=True)
    return 1 if RESULTS["FAIL"] else 0


def symmetric_memory_checks(torch, dist, rank, world, dev, check, verdict, close):
    """torch.distributed._symmetric_memory with the NCCL backend: ncclMemAlloc,
    ncclCommWindowRegister (NCCL_WIN_COLL_SYMMETRIC), ncclDevCommCreate and
    torch's own kernels, compiled against NVIDIA's nccl_device.h, that read
    uniccl's windows (ncclGetLsaPointer) to find every peer's buffer."""
    try:
        import torch.distributed._symmetric_memory as symm_mem
    except ImportError as e:
        report("SKIP", "symmetric memory", f"this torch has no torch.distributed._symmetric_memory ({e})")
        return
    group = dist.group.WORLD.group_name
    n = 4096
    state = {}

    def sync():
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()

    def alloc():
        symm_mem.set_backend("NCCL")
        t = symm_mem.empty(n, dtype=torch.float32, device=dev)
        t.fill_(rank + 1)
        h = symm_mem.rendezvous(t, group=group)
        state.update(t=t, h=h)
        if (h.rank, h.world_size) != (rank, world):
            return "FAIL", f"handle says rank {h.rank} of {h.world_size}"
        return "PASS", f"backend {symm_mem.get_backend(dev)}"
    check("symm_mem.empty + rendezvous (NCCL backend)", alloc)
    if "h" not in state:
        return
    t, h = state["t"], state["h"]

    def peer_reads():
        # Every peer's buffer through the pointers torch's kernel computed
        # with ncclGetLsaPointer (one rank: the window's second mapping of
        # this rank's own memory).
        sync()
        for p in range(world):
            buf = h.get_buffer(p, (n,), torch.float32)
            if not torch.equal(buf.cpu(), torch.full((n,), float(p + 1))):
                return "FAIL", f"rank {p}'s buffer read through the window differs"
        return "PASS", ""
    check("symmetric buffers of every rank readable", peer_reads)

    def peer_writes():
        # Rank r stores into element r of every rank's buffer.
        for p in range(world):
            h.get_buffer(p, (n,), torch.float32)[rank] = 100.0 * (rank + 1) + p
        sync()
        want = torch.full((n,), float(rank + 1))
        want[:world] = torch.tensor([100.0 * (q + 1) + rank for q in range(world)])
        return verdict(torch.equal(t.cpu(), want), "stores through peers' windows did not land")
    check("stores into every rank's symmetric buffer", peer_writes)

    def coll_on_window():
        gen = torch.Generator(device="cpu").manual_seed(7)
        xs = [torch.randn(n, generator=gen) for _ in range(world)]
        t.copy_(xs[rank].to(dev))
        dist.all_reduce(t)
        torch.cuda.synchronize()
        return verdict(close(t, torch.stack(xs).sum(0), torch.float32))
    check("all_reduce on a symmetric tensor", coll_on_window)

    def one_shot():
        op = getattr(getattr(torch.ops, "symm_mem", None), "one_shot_all_reduce", None)
        if op is None:
            return "SKIP", "this torch has no torch.ops.symm_mem.one_shot_all_reduce"
        t.fill_(rank + 1)
        sync()
        out = op(t, "sum", group)
        torch.cuda.synchronize()
        return verdict(torch.equal(out.cpu(), torch.full((n,), world * (world + 1) / 2)))
    check("torch.ops.symm_mem.one_shot_all_reduce", one_shot)

    def pool():
        if not hasattr(symm_mem, "get_mem_pool") or not hasattr(torch.cuda, "use_mem_pool"):
            return "SKIP", "this torch has no symm_mem.get_mem_pool"
        mp = symm_mem.get_mem_pool(dev)
        with torch.cuda.use_mem_pool(mp):
            x = torch.arange(n, dtype=torch.float32, device=dev) * (rank + 1)
        symm_mem.rendezvous(x, group=group)
        op = getattr(getattr(torch.ops, "symm_mem", None), "one_shot_all_reduce", None)
        if op is None:
            dist.all_reduce(x)
            out = x
        else:
            out = op(x, "sum", group)
        torch.cuda.synchronize()
        want = torch.arange(n, dtype=torch.float32) * (world * (world + 1) / 2)
        return verdict(torch.equal(out.cpu(), want))
    check("symm_mem.get_mem_pool tensor + rendezvous + all-reduce", pool)
    sync()


if __name__ == "__main__":
    sys.exit(main())
