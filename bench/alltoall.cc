// AlltoAll: block j of rank i's input lands at block i of rank j's output.
#include "common.h"

namespace bench {
namespace {

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  s->paramCount = bytes / typeBytes / nranks;
  s->sendCount = s->recvCount = s->paramCount * nranks;
  s->totalBytes = s->recvCount * typeBytes;
}

double busbw(int n) { return double(n - 1) / n; }

ncclResult_t call(const CallArgs& a) {
#if defined(BENCH_RCCL_HEADER)
  return ncclAllToAll(a.sendbuff, a.recvbuff, a.count, a.type, a.comm, a.stream);
#else
  return ncclAlltoAll(a.sendbuff, a.recvbuff, a.count, a.type, a.comm, a.stream);
#endif
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  Expectation e;
  const size_t c = s.paramCount;
  for (int i = 0; i < nranks; i++) e.segments.push_back({i * c, c, false, i, rank * c});
  return e;
}

}  // namespace

// In place (sendbuff == recvbuff, strides 0), as nccl-tests runs it: NCCL
// 2.28 and uniccl accept it.
CollSpec kAlltoAll = {"AlltoAll", "alltoall_perf", false, false, true,
                                   sizes, busbw, call, expect};

}  // namespace bench
