// device_api_gpu_test --gin: every rank puts `bytes` (odd) from its window to
// every rank's window (itself included), SignalInc on a signal per source
// and CounterInc, flushes, waits for every source's signal and checks every
// byte, then meets the world at a barrier (LSA barrier + rail GIN barrier),
// for `rounds` rounds, alternating between two destination areas. Written
// against uniccl's public Device API (nccl_device.h) only.
#include "gin_kernel.h"

#include "nccl_device.h"

namespace {

__device__ unsigned char pattern(int src, int round, size_t i) { return (unsigned char)(src * 31 + round * 7 + i * 13 + 1); }

__global__ void ginExchange(ncclDevComm comm, ncclWindow_t win, size_t bytes, int rounds, unsigned long long* errors) {
  ncclCoopCta cta;
  ncclGin gin(comm, 0);
  ncclTeam world = ncclTeamWorld(comm);
  const int n = comm.nRanks, me = comm.rank;
  unsigned char* local = (unsigned char*)ncclGetLocalPointer(win, 0);
  for (int k = 0; k < rounds; k++) {
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) local[i] = pattern(me, k, i);
    cta.sync();
    const size_t dst = bytes * (1 + (size_t)(k % 2) * n + me);
    for (int i = 0; i < n; i++)
      gin.put(world, (me + i) % n, win, dst, win, 0, bytes, ncclGin_SignalInc{(ncclGinSignal_t)me},
              ncclGin_CounterInc{0}, cta);
    gin.flush(cta);   // the source may be rewritten next round
    if (threadIdx.x == 0 && gin.readCounter(0) != (uint64_t)(k + 1) * n) atomicAdd(errors, 1ull);
    for (int s = 0; s < n; s++) {
      gin.waitSignal(cta, (ncclGinSignal_t)s, (uint64_t)(k + 1));
      const volatile unsigned char* got = local + bytes * (1 + (size_t)(k % 2) * n + s);
      for (size_t i = threadIdx.x; i < bytes; i += blockDim.x)
        if (got[i] != pattern(s, k, i)) atomicAdd(errors, 1ull);
    }
    ncclBarrierSession<ncclCoopCta> bar(cta, ncclTeamTagWorld(), gin, 0);
    bar.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
  }
}

}  // namespace

const char* launchGinExchange(const ncclDevComm& comm, ncclWindow_t win, size_t bytes, int rounds,
                              unsigned long long* errors, rtStream stream) {
  ginExchange<<<1, 256, 0, stream>>>(comm, win, bytes, rounds, errors);
  return colltest::rt::err(COLLTEST_RT(GetLastError)());
}
