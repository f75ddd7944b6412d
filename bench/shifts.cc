// Shifts: every rank exchanges one block with rank+s and rank-s for each
// shift s of BENCH_SHIFTS (comma-separated integers, default "1"; 0 = a
// copy to itself). Block k of the output comes from block k of rank-s_k's input.
// An experiment tool: how a launch's cost grows with its peers.
#include <cstdlib>
#include <string>
#include <vector>

#include "common.h"

namespace bench {
namespace {

// BENCH_SHIFTS, read once.
const std::vector<int>& shifts() {
  static const std::vector<int> v = [] {
    std::vector<int> r;
    const char* e = getenv("BENCH_SHIFTS");
    const std::string s = e ? e : "1";
    size_t p = 0;
    while (p <= s.size()) {
      size_t q = s.find(',', p);
      if (q == std::string::npos) q = s.size();
      if (q > p) r.push_back(atoi(s.substr(p, q - p).c_str()));
      p = q + 1;
    }
    if (r.empty()) r.push_back(1);
    return r;
  }();
  return v;
}

// rank + shift on a ring of n (shifts may be negative or beyond n).
int shifted(int rank, int shift, int n) { return ((rank + shift) % n + n) % n; }

// Bytes of one element of t (the benchmark's datatype table).
size_t elementBytes(ncclDataType_t t) {
  for (const TypeInfo& i : allTypes())
    if (i.type == t) return (size_t)i.bytes;
  return 1;
}

void sizes(size_t bytes, int typeBytes, int nranks, CollSizes* s) {
  const size_t k = shifts().size();
  s->paramCount = bytes / typeBytes / k;
  s->sendCount = s->recvCount = s->paramCount * k;
  s->totalBytes = s->recvCount * typeBytes;
}

double busbw(int n) { return 1.0; }

ncclResult_t call(const CallArgs& a) {
  const std::vector<int>& sh = shifts();
  const size_t tb = elementBytes(a.type);
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  ncclResult_t v = ncclSuccess;
  for (size_t k = 0; k < sh.size() && v == ncclSuccess; k++) {
    const int to = shifted(a.rank, sh[k], a.nranks), from = shifted(a.rank, -sh[k], a.nranks);
    v = ncclSend(static_cast<const char*>(a.sendbuff) + k * a.count * tb, a.count, a.type, to, a.comm, a.stream);
    if (v == ncclSuccess)
      v = ncclRecv(static_cast<char*>(a.recvbuff) + k * a.count * tb, a.count, a.type, from, a.comm, a.stream);
  }
  r = ncclGroupEnd();
  return v != ncclSuccess ? v : r;
}

Expectation expect(int rank, int nranks, int root, const CollSizes& s) {
  const std::vector<int>& sh = shifts();
  Expectation e;
  const size_t c = s.paramCount;
  for (size_t k = 0; k < sh.size(); k++)
    e.segments.push_back({k * c, c, false, shifted(rank, -sh[k], nranks), k * c});
  return e;
}

}  // namespace

CollSpec kShifts = {"Shifts", "shifts_perf", false, false, false, sizes, busbw, call, expect};

}  // namespace bench
