#!/usr/bin/env python3
"""Compiles kernels that include "nccl_device.h" with a GPU compiler (nvcc
or hipcc) and checks that every nccl*.h it opened is uniccl's own. The
kernels use the host-visible team arithmetic and every device-side function
uniccl declares (pointers, ncclSymPtr, cooperative groups, barrier and LL
all-to-all sessions with each kind of group); hipcc builds them for a
64-lane (gfx90a) and a 32-lane (gfx1030) target.

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

// The device-side functions: window and resource pointers, ncclSymPtr,
// cooperative groups, LSA barrier sessions (alone and through
// ncclBarrierSession) and the LL all-to-all, as NCCL code calls them.
struct Elt12 { unsigned a, b, c; };
template <typename Coop>
__device__ void sessions(Coop coop, ncclDevComm const& comm, ncclLLA2AHandle ll, int* out) {
  {
    ncclLsaBarrierSession<Coop> bar(coop, comm, ncclTeamTagLsa(), blockIdx.x);
    bar.arrive(coop, cuda::memory_order_release);
    bar.wait(coop, cuda::memory_order_acquire);
    bar.sync(coop, cuda::memory_order_acq_rel);
  }
  {
    ncclLsaBarrierSession<Coop> bar(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, 0, /*multimem=*/true);
    bar.sync(coop, cuda::memory_order_relaxed);
  }
  {
    ncclLsaBarrierSession<Coop> bar{coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, blockIdx.x};
    bar.sync(coop, cuda::memory_order_relaxed);
  }
  {
    ncclBarrierSession<Coop> bar(coop, ncclTeamTagLsa(), comm, 1);
    bar.sync(coop, cuda::memory_order_seq_cst, ncclGinFenceLevel::Relaxed);
    bar.lsaBarrier().sync(coop, cuda::memory_order_acq_rel);
  }
  ncclLLA2ASession<Coop> a2a(coop, comm, ncclTeamLsa(comm), ll, blockIdx.x, 64);
  a2a.send(1, coop.thread_rank(), Elt12{1, 2, 3});
  a2a.bcast(2, 1.5);
  Elt12 e = a2a.template recv<Elt12>(coop.thread_rank());
  double d[4];
  a2a.template recvUnrolled<1, 4>(0, 3, 2, d);
  float sum = a2a.template recvReduce<4, float>(0, 5, 1, [](float x) { return x; },
                                                [](float x, float y) { return x + y; });
  a2a.endEpoch(coop);
  out[threadIdx.x] = (int)(e.a + d[0] + sum) + coop.size() + coop.num_threads();
}

__global__ void deviceApi(ncclDevComm comm, ncclWindow_t win, ncclLLA2AHandle ll, int* out) {
  char* p = (char*)ncclGetLocalPointer(win, 16);
  p += (size_t)ncclGetLsaPointer(win, 0, 1) & 1;
  p += (size_t)ncclGetPeerPointer(win, 0, comm.rank) & 1;
  p += (size_t)ncclGetPeerPointer(win, 0, ncclTeamLsa(comm), 0) & 1;
  p += (size_t)ncclGetResourceBufferLocalPointer(comm, comm.lsaBarrier.bufHandle) & 1;
  p += (size_t)ncclGetResourceBufferLsaPointer(comm, 0, 1) & 1;
  p += (size_t)ncclGetResourceBufferPeerPointer(comm, 0, ncclTeamLsa(comm), 1) & 1;
  p += (size_t)ncclGetLsaMultimemPointer(win, 0, comm) & 1;
  p += (size_t)ncclGetMultimemPointer(win, 0, comm.lsaMultimem) & 1;
  p += (size_t)ncclGetResourceBufferLsaMultimemPointer(comm, 0) & 1;
  ncclSymPtr<float> sym = ncclGetResourceBuffer(comm, 2);
  *(sym + 3).peerPtr(ncclTeamLsa(comm), 1) = 1.0f;
  *sym.lsaPtr(0) += *sym.localPtr() + *sym.peerPtr(comm.rank);
  if (ncclFindWindow(ncclCoopCta(), comm, p) == win) out[0] = 1;
  ncclCoopThread thread;
  ncclCoopWarp warp;
  ncclCoopTile<16> tile;
  ncclCoopCta cta;
  out[1] = thread.thread_rank() + warp.thread_rank() + tile.thread_rank() + cta.thread_rank() + warp.size();
  thread.sync();
  warp.sync();
  tile.sync();
  cta.sync();
  sessions(cta, comm, ll, out);
  sessions(warp, comm, ll, out);
  sessions(thread, comm, ll, out);
#if defined(__HIP__)
#if defined(UNICCL_DEVICE_API_NAMED_BARRIERS)
#error "ncclCoopWarpSpan must not be declared for AMD GPUs (no named barriers)"
#endif
#else
  ncclCoopWarpSpan span(1, 2, 3);
  span.sync();
  sessions(span, comm, ll, out);
#endif
}

// GIN (gin.h): every function, with each completion action and group.
template <typename Coop>
__device__ void ginCalls(Coop coop, ncclDevComm const& comm, ncclWindow_t win, int* out) {
  ncclGin gin(comm, 1);
  ncclGin_BackendOne<NCCL_NET_DEVICE_GIN_PROXY> one(comm, 0);
  ncclTeam world = ncclTeamWorld(comm);
  __shared__ ncclGinDescriptorSmem desc;
  gin.put(world, 1, win, 0, win, 64, 100);
  gin.put(world, 1, win, 0, win, 64, 100, ncclGin_SignalInc{0}, ncclGin_CounterInc{1}, coop);
  gin.put(world, 1, win, 0, win, 64, 100, ncclGin_SignalAdd{2, 5}, ncclGin_None{}, coop,
          ncclGin_DescriptorSmem{&desc});
  ncclSymPtr<float> sym(win, 128);
  one.put(world, 0, sym, sym + 4, 3, ncclGin_SignalAdd{1, 2}, ncclGin_CounterInc{0}, coop);
  gin.putValue(world, 1, win, 8, (uint64_t)7, ncclGin_SignalInc{0}, coop);
  gin.putValue(world, 1, sym, 2.5f);
  gin.signal(world, 1, ncclGin_SignalInc{3}, coop);
  gin.signal(world, 1, ncclGin_SignalAdd{3, 9});
  gin.flush(coop);
  gin.flush(coop, cuda::memory_order_relaxed);
  uint64_t v = gin.readCounter(0) + gin.readCounter(1, 32, cuda::memory_order_relaxed);
  gin.waitCounter(coop, 1, 2);
  v += gin.readSignal(0) + gin.readSignal(1, 16, cuda::memory_order_relaxed);
  gin.waitSignal(coop, 0, 4);
  gin.waitSignal(coop, 0, 4, 32, cuda::memory_order_relaxed);
  gin.increaseSignalShadow(2, 1);
  gin.waitSignalMeetShadow(coop, 2);
  uint32_t before, delta;
  gin.waitSignalFollowShadow(coop, 2, 1u, &before, &delta);
  uint64_t b64, d64;
  gin.waitSignalFollowShadow(coop, 2, (uint64_t)1, &b64, &d64, 48);
  v += *gin.getSignalShadowPtr(2) + before + delta + b64 + d64;
  gin.resetSignal(0);
  gin.resetCounter(1);
  out[2] = (int)v;
  {
    ncclGinBarrierSession<Coop> bar(coop, gin, world, comm.railGinBarrier, 1);
    bar.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
  }
  {
    ncclGinBarrierSession<Coop> bar(coop, gin, ncclTeamTagRail(), 0);
    bar.sync(coop, cuda::memory_order_relaxed, ncclGinFenceLevel::Relaxed);
    out[3] = (int)bar.epoch;
  }
  {
    ncclBarrierSession<Coop> world(coop, ncclTeamTagWorld(), gin, 0);
    world.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
    world.lsaBarrier().sync(coop, cuda::memory_order_relaxed);
    world.ginBarrier().sync(coop, cuda::memory_order_relaxed, ncclGinFenceLevel::Relaxed);
  }
  {
    ncclBarrierSession<Coop> rail(coop, ncclTeamTagRail(), gin, 1);
    rail.sync(coop, cuda::memory_order_seq_cst, ncclGinFenceLevel::Relaxed);
  }
  {
    ncclBarrierSession<Coop> both(coop, ncclTeamLsa(comm), ncclTeamRail(comm), gin, comm.lsaBarrier,
                                  comm.railGinBarrier, 2);
    both.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
  }
}

__global__ void ginApi(ncclDevComm comm, ncclWindow_t win, int* out) {
  ginCalls(ncclCoopCta(), comm, win, out);
  ginCalls(ncclCoopWarp(), comm, win, out);
  ginCalls(ncclCoopThread(), comm, win, out);
  ginCalls(ncclCoopTile<8>(), comm, win, out);
}

// Host code calls the host API (declarations only: nothing is linked).
int hostSide(ncclComm_t comm) {
  ncclLsaBarrierHandle_t h;
  ncclDevResourceRequirements_t req;
  if (ncclLsaBarrierCreateRequirement(ncclTeamLsa(comm), 1, &h, &req) != ncclSuccess) return -1;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.ginSignalCount = 4;
  reqs.ginCounterCount = 2;
  reqs.railGinBarrierCount = 3;
  ncclGinBarrierHandle_t gh;
  if (ncclGinBarrierCreateRequirement(comm, ncclTeamWorld(comm), 2, &gh, &req) != ncclSuccess) return -1;
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
            # CDNA (64-lane wavefronts) and RDNA (32): the coop "warp" is each one's.
            args += ["-x", "hip", "--offload-arch=gfx90a", "--offload-arch=gfx1030", "-D__HIP_PLATFORM_AMD__"]
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
