// Reduce: root ends with the reduction of all inputs; other ranks' recvbuff
// is not used (nccl.h allows NULL there), so it must stay untouched.
#include "common.h"

namespace bench {
namespace {

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  s->sendCount = s->recvCount = s->paramCount = bytes / typeBytes;
  s->totalBytes = s->paramCount * typeBytes;
}

double busbw(int n) { return 1.0; }

ncclResult_t call(const CallArgs& a) {
  return ncclReduce(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.root, a.comm, a.stream);
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  Expectation e;
  if (rank == root) e.segments.push_back({0, s.recvCount, true, 0, 0});
  else e.outputUnused = true;
  return e;
}

}  // namespace

CollSpec kReduce = {"Reduce", "reduce_perf", true, true, true,
                                 sizes, busbw, call, expect};

}  // namespace bench
