// AllGather: rank i's block lands at offset i * sendcount on every rank.
#include "common.h"

namespace bench {
namespace {

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  s->paramCount = s->sendCount = bytes / typeBytes / nranks;
  s->recvCount = s->sendCount * nranks;
  s->sendInplaceStride = s->sendCount;  // in place: sendbuff == recvbuff + rank * sendcount
  s->totalBytes = s->recvCount * typeBytes;
}

double busbw(int n) { return double(n - 1) / n; }

ncclResult_t call(const CallArgs& a) {
  return ncclAllGather(a.sendbuff, a.recvbuff, a.count, a.type, a.comm, a.stream);
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  Expectation e;
  for (int i = 0; i < nranks; i++) e.segments.push_back({i * s.sendCount, s.sendCount, false, i, 0});
  return e;
}

}  // namespace

CollSpec kAllGather = {"AllGather", "all_gather_perf", false, false, true,
                                    sizes, busbw, call, expect};

}  // namespace bench
