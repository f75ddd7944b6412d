// Graph capture of every collective and grouped point-to-point operation:
// one graph per GPU holding a group of 9 operations (more than the 4 that fit
// in kernel arguments, so the graph-owned work buffer is used), replayed many
// times with fresh inputs copied in before each replay, every output checked
// exactly. Also: a group mixing captured and uncaptured streams is refused,
// chains of dependent collectives (chain.cc) stay exact, and in-place
// AlltoAll and one-rank communicators work captured and eager (inplace.cc).
// All visible GPUs (up to 4) in one process; exit 77 without a GPU.
//
//   capture_test [--ranks-per-gpu=K]
//
// With K > 1 every GPU holds K ranks (rank r on GPU r / K, through
// UNICCL_RANKS_PER_GPU and a device list that repeats each GPU), so the
// multi-rank graphs also run on one GPU; "one graph per GPU" then reads
// "one graph per rank" (each rank captures its own stream).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "../coll/rt.h"
#include "chain.h"
#include "graphs.h"
#include "inplace.h"
#include "nccl.h"
#include "test_check.h"

namespace rt = colltest::rt;

namespace {

constexpr size_t kCount = 1000 + 3;  // per-rank elements; odd on purpose
enum Buf { kAllReduce, kBcast, kReduce, kAllGather, kReduceScatter, kSendRecv, kAlltoAll, kGather, kScatter, kNumBufs };

struct Rank {
  int dev;
  ncclComm_t comm = nullptr;
  rtStream stream = nullptr;
  float* in = nullptr;            // n * kCount inputs, rewritten before each replay
  float* out[kNumBufs] = {};      // n * kCount outputs each
};

// Small integers: every reduction order gives the exact same float.
float value(int replay, int rank, size_t i) { return (float)((replay * 7 + rank * 13 + (int)(i % 97)) % 41 - 20); }

bool record(std::vector<Rank>& ranks, int n) {
  NCCL_OK(ncclGroupStart());
  for (Rank& r : ranks) {
    int me = (int)(&r - ranks.data());
    NCCL_OK(ncclAllReduce(r.in, r.out[kAllReduce], kCount, ncclFloat32, ncclSum, r.comm, r.stream));
    NCCL_OK(ncclBroadcast(r.in, r.out[kBcast], kCount, ncclFloat32, n - 1, r.comm, r.stream));
    NCCL_OK(ncclReduce(r.in, r.out[kReduce], kCount, ncclFloat32, ncclMax, 0, r.comm, r.stream));
    NCCL_OK(ncclAllGather(r.in, r.out[kAllGather], kCount, ncclFloat32, r.comm, r.stream));
    NCCL_OK(ncclReduceScatter(r.in, r.out[kReduceScatter], kCount, ncclFloat32, ncclSum, r.comm, r.stream));
    NCCL_OK(ncclSend(r.in, kCount, ncclFloat32, (me + 1) % n, r.comm, r.stream));
    NCCL_OK(ncclRecv(r.out[kSendRecv], kCount, ncclFloat32, (me - 1 + n) % n, r.comm, r.stream));
    NCCL_OK(ncclAlltoAll(r.in, r.out[kAlltoAll], kCount, ncclFloat32, r.comm, r.stream));
    NCCL_OK(ncclGather(r.in, r.out[kGather], kCount, ncclFloat32, 0, r.comm, r.stream));
    NCCL_OK(ncclScatter(r.in, r.out[kScatter], kCount, ncclFloat32, n - 1, r.comm, r.stream));
  }
  NCCL_OK(ncclGroupEnd());
  return true;
}

bool check(std::vector<Rank>& ranks, int n, int replay) {
  std::vector<float> host((size_t)n * kCount);
  for (int me = 0; me < n; me++) {
    Rank& r = ranks[me];
    RT_OK(rt::setDevice(r.dev));
    auto in = [&](int q, size_t i) { return value(replay, q, i); };
    for (int b = 0; b < kNumBufs; b++) {
      RT_OK(rt::toHost(host.data(), r.out[b], host.size() * sizeof(float)));
      for (size_t i = 0; i < kCount; i++) {
        float want;
        bool skip = false;
        switch (b) {
          case kAllReduce: want = 0; for (int q = 0; q < n; q++) want += in(q, i); break;
          case kBcast: want = in(n - 1, i); break;
          case kReduce: skip = me != 0; want = in(0, i); for (int q = 1; q < n; q++) want = std::max(want, in(q, i)); break;
          case kReduceScatter: want = 0; for (int q = 0; q < n; q++) want += in(q, me * kCount + i); break;
          case kSendRecv: want = in((me - 1 + n) % n, i); break;
          case kScatter: want = in(n - 1, me * kCount + i); break;
          default: skip = true; want = 0;   // n-chunk outputs, below
        }
        if (!skip) REQUIRE(host[i] == want, "replay %d rank %d buffer %d [%zu]: %g, want %g", replay, me, b, i, host[i], want);
      }
      if (b == kAllGather || b == kAlltoAll || (b == kGather && me == 0)) {
        for (int q = 0; q < n; q++)
          for (size_t i = 0; i < kCount; i++) {
            float want = b == kAlltoAll ? in(q, me * kCount + i) : in(q, i);
            float got = host[q * kCount + i];
            REQUIRE(got == want, "replay %d rank %d buffer %d [%d][%zu]: %g, want %g", replay, me, b, q, i, got, want);
          }
      }
    }
  }
  return true;
}

bool run(const std::vector<int>& devs) {
  const int n = (int)devs.size();
  std::vector<Rank> ranks(n);
  for (int i = 0; i < n; i++) ranks[i].dev = devs[i];
  std::vector<ncclComm_t> comms(n);
  NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()));
  for (int i = 0; i < n; i++) {
    Rank& r = ranks[i];
    r.comm = comms[i];
    RT_OK(rt::setDevice(r.dev));
    RT_OK(rt::streamCreate(&r.stream));
    RT_OK(rt::malloc((void**)&r.in, (size_t)n * kCount * sizeof(float)));
    for (float*& o : r.out) RT_OK(rt::malloc((void**)&o, (size_t)n * kCount * sizeof(float)));
  }
  // One graph per rank (per GPU unless ranks share one) holding the group of nine operations.
  GpuGraphs g;
  for (Rank& r : ranks) {
    g.devs.push_back(r.dev);
    g.streams.push_back(r.stream);
  }
  if (!g.capture([&] { return record(ranks, n); })) return false;
  const int kReplays = 50;
  std::vector<float> host((size_t)n * kCount);
  for (int rep = 0; rep < kReplays; rep++) {
    for (int i = 0; i < n; i++) {
      for (size_t k = 0; k < host.size(); k++) host[k] = value(rep, i, k);
      RT_OK(rt::setDevice(ranks[i].dev));
      for (float* o : ranks[i].out) RT_OK(rt::memset(o, 0xA5, host.size() * sizeof(float)));
      RT_OK(rt::toDevice(ranks[i].in, host.data(), host.size() * sizeof(float)));
    }
    if (!g.launchAndWait()) return false;
    if (!check(ranks, n, rep)) return false;
  }
  printf("  %d ranks: 9 operations per graph, %d replays with fresh inputs: all exact\n", n, kReplays);

  // A group whose streams are partly captured is refused, and nothing runs.
  if (n >= 1) {
    Rank& r = ranks[0];
    rtStream other;
    RT_OK(rt::setDevice(r.dev));
    RT_OK(rt::streamCreate(&other));
    RT_OK(rt::err(COLLTEST_RT(StreamBeginCapture)(r.stream, COLLTEST_RT_CAPTURE_GLOBAL)));
    ncclGroupStart();
    ncclResult_t a = ncclAllReduce(r.in, r.out[0], kCount, ncclFloat32, ncclSum, r.comm, r.stream);
    ncclResult_t b = ncclAllReduce(r.in, r.out[1], kCount, ncclFloat32, ncclSum, r.comm, other);
    ncclResult_t e = ncclGroupEnd();
    rtGraph dropped = nullptr;
    RT_OK(rt::err(COLLTEST_RT(StreamEndCapture)(r.stream, &dropped)));
    if (dropped) (void)COLLTEST_RT(GraphDestroy)(dropped);   // the test fails below either way
    REQUIRE(a == ncclSuccess && b == ncclSuccess && e == ncclInvalidUsage,
            "mixed captured/uncaptured group: calls %s/%s, group end %s (want ncclInvalidUsage)",
            ncclGetErrorString(a), ncclGetErrorString(b), ncclGetErrorString(e));
    REQUIRE(strstr(ncclGetLastError(nullptr), "captured") != nullptr, "last error '%s'", ncclGetLastError(nullptr));
    RT_OK(rt::streamDestroy(other));
    printf("  a group mixing captured and uncaptured streams: ncclInvalidUsage, \"%s\"\n", ncclGetLastError(nullptr));
  }
  g.destroy();
  for (Rank& r : ranks) {
    RT_OK(rt::setDevice(r.dev));
    RT_OK(rt::free(r.in));
    for (float* o : r.out) RT_OK(rt::free(o));
    RT_OK(rt::streamDestroy(r.stream));
    NCCL_OK(ncclCommDestroy(r.comm));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int k = 1;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a.rfind("--ranks-per-gpu=", 0) == 0 && (k = atoi(a.c_str() + 16)) >= 1 && k <= 32) continue;
    fprintf(stderr, "usage: capture_test [--ranks-per-gpu=K]\n");
    return 2;
  }
  if (k > 1) {
    // Before the first runtime call: one work queue per rank of a GPU, and
    // the library's opt-in for ranks sharing a GPU.
    rt::raiseWorkQueues();
    setenv("UNICCL_RANKS_PER_GPU", std::to_string(k).c_str(), 1);
  }
  int ngpus = rt::deviceCount();
  if (ngpus < 1) {
    printf("capture_test: no GPU; skipped\n");
    return 77;
  }
  if (ngpus > 4) ngpus = 4;
  std::vector<int> devs;
  for (int r = 0; r < ngpus * k; r++) devs.push_back(r / k);
  printf("capture_test: %d ranks on %d GPU(s), %d per GPU\n", ngpus * k, ngpus, k);
  bool ok = run(devs);
  ok = runDependentChains(devs) && ok;
  ok = runInPlaceAndOneRank(ngpus) && ok;
  printf("capture_test: %s\n", ok && testcheck::failures() == 0 ? "PASS" : "FAIL");
  return ok && testcheck::failures() == 0 ? 0 : 1;
}
