// Gather: root receives rank i's block at offset i * count; other ranks'
// recvbuff is not used and must stay untouched.
#include "common.h"

namespace bench {
namespace {

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  s->paramCount = s->sendCount = bytes / typeBytes / nranks;
  s->recvCount = s->sendCount * nranks;
  s->sendInplaceStride = s->sendCount;  // in place: sendbuff == recvbuff + rank * count
  s->totalBytes = s->recvCount * typeBytes;
}

double busbw(int n) { return double(n - 1) / n; }

ncclResult_t call(const CallArgs& a) {
  return ncclGather(a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.comm, a.stream);
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  Expectation e;
  if (rank != root) { e.outputUnused = true; return e; }
  for (int i = 0; i < nranks; i++) e.segments.push_back({i * s.sendCount, s.sendCount, false, i, 0});
  return e;
}

}  // namespace

CollSpec kGather = {"Gather", "gather_perf", false, true, true,
                                 sizes, busbw, call, expect};

}  // namespace bench
