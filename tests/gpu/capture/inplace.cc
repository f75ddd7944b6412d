#include "inplace.h"

#include <cstdio>
#include <vector>

#include "../coll/rt.h"
#include "graphs.h"
#include "nccl.h"
#include "test_check.h"

namespace rt = colltest::rt;

namespace {

constexpr size_t kGraphCount = 4097;   // per block, odd
constexpr size_t kEagerCount = 70001;  // larger: the eager scratch grows past the graph's size

float value(int round, int rank, size_t i) { return (float)((round * 11 + rank * 29 + (int)(i % 89)) % 53 - 26); }

struct Rank {
  int dev;
  ncclComm_t comm = nullptr;
  rtStream stream = nullptr;
  float* buf = nullptr;     // n * kEagerCount elements, AlltoAll in place
};

bool fill(Rank& r, int n, int me, int round, size_t count) {
  std::vector<float> h((size_t)n * count);
  for (size_t i = 0; i < h.size(); i++) h[i] = value(round, me, i);
  RT_OK(rt::setDevice(r.dev));
  RT_OK(rt::toDevice(r.buf, h.data(), h.size() * sizeof(float)));
  return true;
}

bool checkAlltoAll(std::vector<Rank>& ranks, int round, size_t count, const char* what) {
  const int n = (int)ranks.size();
  std::vector<float> h((size_t)n * count);
  for (int me = 0; me < n; me++) {
    RT_OK(rt::setDevice(ranks[me].dev));
    RT_OK(rt::toHost(h.data(), ranks[me].buf, h.size() * sizeof(float)));
    for (int q = 0; q < n; q++)
      for (size_t i = 0; i < count; i++) {
        const float want = value(round, q, me * count + i), got = h[q * count + i];
        REQUIRE(got == want, "%s round %d rank %d block %d [%zu]: %g, want %g", what, round, me, q, i, got, want);
      }
  }
  return true;
}

bool eagerAlltoAll(std::vector<Rank>& ranks, int round) {
  const int n = (int)ranks.size();
  for (int me = 0; me < n; me++)
    if (!fill(ranks[me], n, me, round, kEagerCount)) return false;
  NCCL_OK(ncclGroupStart());
  for (Rank& r : ranks) NCCL_OK(ncclAlltoAll(r.buf, r.buf, kEagerCount, ncclFloat32, r.comm, r.stream));
  NCCL_OK(ncclGroupEnd());
  for (Rank& r : ranks) {
    RT_OK(rt::setDevice(r.dev));
    RT_OK(rt::streamSync(r.stream));
  }
  return checkAlltoAll(ranks, round, kEagerCount, "eager in-place AlltoAll");
}

bool runInPlaceAlltoAll(int n) {
  std::vector<Rank> ranks(n);
  std::vector<int> devs(n);
  std::vector<ncclComm_t> comms(n);
  for (int i = 0; i < n; i++) devs[i] = ranks[i].dev = i;
  NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()));
  GpuGraphs g;
  for (int i = 0; i < n; i++) {
    Rank& r = ranks[i];
    r.comm = comms[i];
    RT_OK(rt::setDevice(r.dev));
    RT_OK(rt::streamCreate(&r.stream));
    RT_OK(rt::malloc((void**)&r.buf, (size_t)n * kEagerCount * sizeof(float)));
    g.devs.push_back(r.dev);
    g.streams.push_back(r.stream);
  }
  bool ok = g.capture([&] {
    NCCL_OK(ncclGroupStart());
    for (Rank& r : ranks) NCCL_OK(ncclAlltoAll(r.buf, r.buf, kGraphCount, ncclFloat32, r.comm, r.stream));
    NCCL_OK(ncclGroupEnd());
    return true;
  });
  const int kReplays = 20;
  for (int rep = 0; ok && rep < kReplays; rep++) {
    for (int me = 0; ok && me < n; me++) ok = fill(ranks[me], n, me, rep, kGraphCount);
    ok = ok && g.launchAndWait() && checkAlltoAll(ranks, rep, kGraphCount, "captured in-place AlltoAll");
    if (ok && rep % 5 == 0) ok = eagerAlltoAll(ranks, 1000 + rep);
  }
  if (ok) printf("  %d ranks: in-place AlltoAll, %d graph replays and eager calls between them: all exact\n", n, kReplays);
  g.destroy();
  for (Rank& r : ranks) {
    rt::setDevice(r.dev);
    rt::free(r.buf);
    rt::streamDestroy(r.stream);
    ncclCommDestroy(r.comm);
  }
  return ok;
}

// One rank: AllReduce out of place and in place, AlltoAll in place and out
// of place, captured into one graph; the outputs must equal the inputs.
bool runOneRank() {
  constexpr size_t kCount = 1 << 20;
  int dev = 0;
  ncclComm_t comm = nullptr;
  NCCL_OK(ncclCommInitAll(&comm, 1, &dev));
  rtStream stream = nullptr;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  RT_OK(rt::setDevice(dev));
  RT_OK(rt::streamCreate(&stream));
  RT_OK(rt::malloc((void**)&a, kCount * sizeof(float)));
  RT_OK(rt::malloc((void**)&b, kCount * sizeof(float)));
  RT_OK(rt::malloc((void**)&c, kCount * sizeof(float)));
  GpuGraphs g;
  g.devs.push_back(dev);
  g.streams.push_back(stream);
  bool ok = g.capture([&] {
    NCCL_OK(ncclAllReduce(a, b, kCount, ncclFloat32, ncclSum, comm, stream));
    NCCL_OK(ncclAllReduce(b, b, kCount, ncclFloat32, ncclMax, comm, stream));
    NCCL_OK(ncclAlltoAll(b, b, kCount, ncclFloat32, comm, stream));
    NCCL_OK(ncclAlltoAll(b, c, kCount, ncclFloat32, comm, stream));
    return true;
  });
  std::vector<float> in(kCount), got(kCount);
  for (int rep = 0; ok && rep < 5; rep++) {
    for (size_t i = 0; i < kCount; i++) in[i] = value(rep, 0, i);
    ok = rt::toDevice(a, in.data(), kCount * sizeof(float)) == nullptr && rt::memset(b, 0x5a, kCount * sizeof(float)) == nullptr &&
         rt::memset(c, 0x5a, kCount * sizeof(float)) == nullptr && g.launchAndWait() &&
         rt::toHost(got.data(), c, kCount * sizeof(float)) == nullptr;
    for (size_t i = 0; ok && i < kCount; i++)
      if (got[i] != in[i]) {
        ADD_FAILURE("one-rank graph replay %d [%zu]: %g, want %g", rep, i, got[i], in[i]);
        ok = false;
      }
  }
  if (ok) printf("  1 rank: AllReduce and AlltoAll in and out of place captured, 5 replays: exact\n");
  g.destroy();
  rt::free(a);
  rt::free(b);
  rt::free(c);
  rt::streamDestroy(stream);
  ncclCommDestroy(comm);
  return ok;
}

}  // namespace

bool runInPlaceAndOneRank(int n) {
  bool ok = n >= 2 ? runInPlaceAlltoAll(n) : true;
  return runOneRank() && ok;
}
