// ReduceScatter: rank i ends with block i of the reduction of all inputs.
#include "common.h"

namespace bench {
namespace {

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  s->paramCount = s->recvCount = bytes / typeBytes / nranks;
  s->sendCount = s->recvCount * nranks;
  s->recvInplaceStride = s->recvCount;  // in place: recvbuff == sendbuff + rank * recvcount
  s->totalBytes = s->sendCount * typeBytes;
}

double busbw(int n) { return double(n - 1) / n; }

ncclResult_t call(const CallArgs& a) {
  return ncclReduceScatter(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.comm, a.stream);
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  return {{{0, s.recvCount, true, 0, rank * s.recvCount}}};
}

}  // namespace

CollSpec kReduceScatter = {"ReduceScatter", "reduce_scatter_perf", true, false, true,
                                        sizes, busbw, call, expect};

}  // namespace bench
