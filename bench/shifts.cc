// Shifts: every rank exchanges one block with rank+s and rank-s for each
// shift s of BENCH_SHIFTS (comma-separated, default "1"; 0 = a copy to
// itself). Block k of the output comes from block k of rank-s_k's input.
// An experiment tool: how a launch's cost grows with its peers.
#include <cstdlib>
#include <string>
#include <vector>

#include "common.h"

namespace bench {
namespace {

std::vector<int> shifts() {
  std::vector<int> v;
  const char* e = getenv("BENCH_SHIFTS");
  std::string s = e ? e : "1";
  size_t p = 0;
  while (p <= s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    if (q > p) v.push_back(atoi(s.substr(p, q - p).c_str()));
    p = q + 1;
  }
  return v;
}

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  const size_t k = shifts().size();
  s->paramCount = bytes / typeBytes / k;
  s->sendCount = s->recvCount = s->paramCount * k;
  s->totalBytes = s->recvCount * typeBytes;
}

double busbw(int n) { return 1.0; }

ncclResult_t call(const CallArgs& a) {
  static const std::vector<int> sh = shifts();
  size_t tb = 4;
  switch (a.type) {
    case ncclInt8: case ncclUint8: tb = 1; break;
    case ncclFloat16: case ncclBfloat16: tb = 2; break;
    case ncclInt64: case ncclUint64: case ncclFloat64: tb = 8; break;
    default: tb = a.type == ncclInt32 || a.type == ncclUint32 || a.type == ncclFloat32 ? 4 : 1; break;
  }
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  ncclResult_t v = ncclSuccess;
  for (size_t k = 0; k < sh.size() && v == ncclSuccess; k++) {
    const int to = (a.rank + sh[k]) % a.nranks, from = (a.rank - sh[k] % a.nranks + a.nranks) % a.nranks;
    v = ncclSend(static_cast<const char*>(a.sendbuff) + k * a.count * tb, a.count, a.type, to, a.comm, a.stream);
    if (v == ncclSuccess)
      v = ncclRecv(static_cast<char*>(a.recvbuff) + k * a.count * tb, a.count, a.type, from, a.comm, a.stream);
  }
  r = ncclGroupEnd();
  return v != ncclSuccess ? v : r;
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  static const std::vector<int> sh = shifts();
  Expectation e;
  const size_t c = s.paramCount;
  for (size_t k = 0; k < sh.size(); k++)
    e.segments.push_back({k * c, c, false, (rank - sh[k] % nranks + nranks) % nranks, k * c});
  return e;
}

}  // namespace

CollSpec kShifts = {"Shifts", "shifts_perf", false, false, false, sizes, busbw, call, expect};

}  // namespace bench
