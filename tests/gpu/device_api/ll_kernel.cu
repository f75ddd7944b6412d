// device_api_gpu_test --ll: every block of every rank, for `rounds` epochs of
// the LL all-to-all, sends kLLCount 12-byte values (two lines each, so a
// value is whole only when both lines' halves carry the epoch) to every LSA
// rank, itself included, receives the kLLCount values from each and checks
// them, then ends the epoch. Every third epoch sends with bcast. Written
// against uniccl's public Device API (nccl_device.h) only.
#include "ll_kernel.h"

namespace {

struct Value {
  uint32_t a, b, c;
};

__device__ Value expected(int epoch, int from, int to, int block, int i) {
  const uint32_t tag = (uint32_t)epoch << 16 | (uint32_t)block << 8 | (uint32_t)i;
  return Value{0x10000000u ^ tag ^ (uint32_t)from << 24, 0x20000000u + (uint32_t)to * 977 + tag, tag * 2654435761u};
}

__global__ void llExchange(ncclDevComm comm, ncclLLA2AHandle handle, int rounds, unsigned long long* errors) {
  ncclCoopCta cta;
  const ncclTeam lsa = ncclTeamLsa(comm);
  const int n = lsa.nRanks, me = lsa.rank, block = blockIdx.x;
  ncclLLA2ASession<ncclCoopCta> ll(cta, comm, lsa, handle, block, n * kLLCount);
  for (int e = 0; e < rounds; e++) {
    const bool bcast = e % 3 == 2;
    if (bcast) {
      for (int i = cta.thread_rank(); i < kLLCount; i += cta.size())
        ll.bcast(me * kLLCount + i, expected(e, me, -1, block, i));
    } else {
      for (int j = cta.thread_rank(); j < n * kLLCount; j += cta.size())
        ll.send(j / kLLCount, me * kLLCount + j % kLLCount, expected(e, me, j / kLLCount, block, j % kLLCount));
    }
    for (int j = cta.thread_rank(); j < n * kLLCount; j += cta.size()) {
      const Value got = ll.recv<Value>(j), want = expected(e, j / kLLCount, bcast ? -1 : me, block, j % kLLCount);
      if (got.a != want.a || got.b != want.b || got.c != want.c) atomicAdd(errors, 1ull);
    }
    ll.endEpoch(cta);
  }
}

}  // namespace

int llSlots(int nRanks) { return ncclLLA2ACalcSlots(nRanks * kLLCount, (int)sizeof(Value)); }

const char* launchLLExchange(const ncclDevComm& comm, ncclLLA2AHandle handle, int blocks, int rounds,
                             unsigned long long* errors, rtStream stream) {
  llExchange<<<blocks, 128, 0, stream>>>(comm, handle, rounds, errors);
  return colltest::rt::err(COLLTEST_RT(GetLastError)());
}
