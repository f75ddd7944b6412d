// Broadcast: every rank ends with root's input.
#include "common.h"

namespace bench {
namespace {

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  s->sendCount = s->recvCount = s->paramCount = bytes / typeBytes;
  s->totalBytes = s->paramCount * typeBytes;
}

double busbw(int n) { return 1.0; }

ncclResult_t call(const CallArgs& a) {
  return ncclBroadcast(a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.comm, a.stream);
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  return {{{0, s.recvCount, false, root, 0}}};
}

}  // namespace

CollSpec kBroadcast = {"Broadcast", "broadcast_perf", false, true, true,
                                    sizes, busbw, call, expect};

}  // namespace bench
