// The Device API's synchronization steps (include/nccl_device/), one per
// extern "C" kernel, written as a user's kernel calls them. Never linked:
// tools/port_check.py compiles it for AMD targets and reads the cache bits
// and fences of each step (docs/amd.md, "Generated-code checks"), and
// tools/amd_sync_check.py compiles it to PTX with UNICCL_AMD_SYNC and checks
// that the CUDA build runs the HIP path's synchronization.
#include "nccl_device.h"

// LSA barrier arrive with release: the window stores before it reach a
// peer that sees the post (system-scope release, then the flag store).
extern "C" __global__ void uniccl_check_devapi_arrive(ncclDevComm comm, uint32_t* win) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, comm, ncclTeamTagLsa(), blockIdx.x);
  win[threadIdx.x] = 7;
  bar.arrive(cta, cuda::memory_order_release);
}

// LSA barrier wait with acquire, then a read of window data a peer stored.
extern "C" __global__ void uniccl_check_devapi_wait(ncclDevComm comm, const uint32_t* win, uint32_t* out) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, comm, ncclTeamTagLsa(), blockIdx.x);
  bar.wait(cta, cuda::memory_order_acquire);
  out[threadIdx.x] = win[threadIdx.x];
}

// LL all-to-all: one 8-byte value into a peer's slot (one line, two halves).
extern "C" __global__ void uniccl_check_devapi_ll_send(ncclDevComm comm, ncclLLA2AHandle h, int peer, uint64_t v) {
  ncclCoopCta cta;
  ncclLLA2ASession<ncclCoopCta> a2a(cta, comm, ncclTeamLsa(comm), h, blockIdx.x, 64);
  a2a.send(peer, threadIdx.x, v);
}

// LL all-to-all: wait for this epoch's value in this rank's slot.
extern "C" __global__ void uniccl_check_devapi_ll_recv(ncclDevComm comm, ncclLLA2AHandle h, uint64_t* out) {
  ncclCoopCta cta;
  ncclLLA2ASession<ncclCoopCta> a2a(cta, comm, ncclTeamLsa(comm), h, blockIdx.x, 64);
  out[threadIdx.x] = a2a.recv<uint64_t>(threadIdx.x);
}

// GIN: a put with a signal (a descriptor into host-mapped memory), then a
// wait for a signal with acquire and a read of the window it guards.
extern "C" __global__ void uniccl_check_devapi_gin(ncclDevComm comm, ncclWindow_t win, const uint32_t* data,
                                                   uint32_t* out) {
  ncclCoopCta cta;
  ncclGin gin(comm, 0);
  gin.put(ncclTeamWorld(comm), 1, win, 0, win, 64, 64, ncclGin_SignalInc{0}, ncclGin_None{}, cta);
  gin.waitSignal(cta, 0, 1);
  out[threadIdx.x] = data[threadIdx.x];
}
