// Scatter: rank i receives block i of root's input; other ranks' sendbuff is unused.
#include "common.h"

namespace bench {
namespace {

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  s->paramCount = s->recvCount = bytes / typeBytes / nranks;
  s->sendCount = s->recvCount * nranks;
  s->recvInplaceStride = s->recvCount;  // in place: recvbuff == sendbuff + rank * count
  s->totalBytes = s->sendCount * typeBytes;
}

double busbw(int n) { return double(n - 1) / n; }

ncclResult_t call(const CallArgs& a) {
  return ncclScatter(a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.comm, a.stream);
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  return {{{0, s.recvCount, false, root, rank * s.recvCount}}};
}

}  // namespace

CollSpec kScatter = {"Scatter", "scatter_perf", false, true, true,
                                  sizes, busbw, call, expect};

}  // namespace bench
