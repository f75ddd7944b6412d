// The kernel of device_api_gpu_test: every block of every rank, for
// `rounds` rounds, stores a word to each LSA peer's window, meets the peers
// at its LSA barrier, then checks the words every peer stored into its own
// window, and meets them again before the next round overwrites them.
// Written against uniccl's public Device API (nccl_device.h) only, as a
// user's kernel would be.
#include "lsa_kernel.h"

#include "nccl_device.h"

namespace {

__device__ uint32_t expected(int round, int writer, int block, int thread) {
  return 0x40000000u | (uint32_t)round << 20 | (uint32_t)writer << 14 | (uint32_t)block << 8 | (uint32_t)thread;
}

__global__ void lsaExchange(ncclDevComm comm, ncclWindow_t win, int rounds, unsigned long long* errors) {
  const int block = blockIdx.x, tid = threadIdx.x, lsa = comm.lsaSize;
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, comm, ncclTeamTagLsa(), block);
  // Layout of each rank's window: [block][writer][thread] words.
  for (int round = 0; round < rounds; round++) {
    for (int peer = 0; peer < lsa; peer++) {
      uint32_t* w = (uint32_t*)ncclGetLsaPointer(win, 0, peer);
      w[((size_t)block * lsa + comm.lsaRank) * blockDim.x + tid] = expected(round, comm.lsaRank, block, tid);
    }
    bar.sync(cta, cuda::memory_order_acq_rel);
    const uint32_t* mine = (const uint32_t*)ncclGetLocalPointer(win, 0);
    for (int writer = 0; writer < lsa; writer++) {
      uint32_t got = ((volatile const uint32_t*)mine)[((size_t)block * lsa + writer) * blockDim.x + tid];
      if (got != expected(round, writer, block, tid)) atomicAdd(errors, 1ull);
    }
    bar.sync(cta, cuda::memory_order_acq_rel);
  }
}

}  // namespace

const char* launchLsaExchange(const ncclDevComm& comm, ncclWindow_t win, int blocks, int threads, int rounds,
                              unsigned long long* errors, rtStream stream) {
  lsaExchange<<<blocks, threads, 0, stream>>>(comm, win, rounds, errors);
  return colltest::rt::err(COLLTEST_RT(GetLastError)());
}
