// AllReduce: every rank ends with the reduction of all inputs.
#include "common.h"

namespace bench {
namespace {

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  s->sendCount = s->recvCount = s->paramCount = bytes / typeBytes;
  s->totalBytes = s->paramCount * typeBytes;
}

// Ring all-reduce moves 2(n-1)/n of the data over each rank's busiest link.
double busbw(int n) { return 2.0 * (n - 1) / n; }

ncclResult_t call(const CallArgs& a) {
  return ncclAllReduce(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.comm, a.stream);
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  return {{{0, s.recvCount, true, 0, 0}}};
}

}  // namespace

CollSpec kAllReduce = {"AllReduce", "all_reduce_perf", true, false, true,
                                    sizes, busbw, call, expect};

}  // namespace bench
