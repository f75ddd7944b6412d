// SendRecv: each rank sends to rank+1 and receives from rank-1 (a ring shift).
#include "common.h"

namespace bench {
namespace {

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  s->sendCount = s->recvCount = s->paramCount = bytes / typeBytes;
  s->totalBytes = s->paramCount * typeBytes;
}

double busbw(int n) { return 1.0; }

ncclResult_t call(const CallArgs& a) {
  const int next = (a.rank + 1) % a.nranks, prev = (a.rank - 1 + a.nranks) % a.nranks;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  ncclResult_t s = ncclSend(a.sendbuff, a.count, a.type, next, a.comm, a.stream);
  ncclResult_t v = s == ncclSuccess ? ncclRecv(a.recvbuff, a.count, a.type, prev, a.comm, a.stream) : s;
  r = ncclGroupEnd();
  return v != ncclSuccess ? v : r;
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  return {{{0, s.recvCount, false, (rank - 1 + nranks) % nranks, 0}}};
}

}  // namespace

// Sending and receiving the same buffer is a race, not an in-place operation.
CollSpec kSendRecv = {"SendRecv", "sendrecv_perf", false, false, false,
                                   sizes, busbw, call, expect};

}  // namespace bench
