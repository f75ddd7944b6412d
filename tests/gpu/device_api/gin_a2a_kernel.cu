// gin_a2a_bench's kernel: nccl-tests' `alltoall -D 3` pattern through GIN.
// Each iteration every rank puts its block for every rank (itself included)
// with SignalInc on signal 0, flushes, waits until every source's put of
// this iteration has landed, and meets the world at a barrier before the
// next iteration overwrites the same places. Public Device API only.
#include "gin_a2a_kernel.h"

#include "nccl_device.h"

namespace {

__global__ void ginAllToAll(ncclDevComm comm, ncclWindow_t win, size_t block, int iters, uint64_t signalBase) {
  ncclCoopCta cta;
  ncclGin gin(comm, 0);
  ncclTeam world = ncclTeamWorld(comm);
  const int n = comm.nRanks, me = comm.rank;
  const size_t recvBase = (size_t)n * block;
  for (int it = 0; it < iters; it++) {
    for (int k = 0; k < n; k++) {
      const int d = (me + k) % n;
      gin.put(world, d, win, recvBase + (size_t)me * block, win, (size_t)d * block, block, ncclGin_SignalInc{0},
              ncclGin_None{}, cta);
    }
    gin.flush(cta);
    gin.waitSignal(cta, 0, signalBase + (uint64_t)(it + 1) * n);
    ncclBarrierSession<ncclCoopCta> bar(cta, ncclTeamTagWorld(), gin, 0);
    bar.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
  }
}

}  // namespace

const char* launchGinAllToAll(const ncclDevComm& comm, ncclWindow_t win, size_t block, int iters, uint64_t signalBase,
                              rtStream stream) {
  ginAllToAll<<<1, 256, 0, stream>>>(comm, win, block, iters, signalBase);
  return colltest::rt::err(COLLTEST_RT(GetLastError)());
}
