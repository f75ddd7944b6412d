// GIN all-to-all against ncclAlltoAll over the same communicators and
// transport: nccl-tests' `alltoall -D 3` pattern (gin_a2a_kernel.cu) timed
// beside the collective, per size, with the data of both checked. On one GPU
// the ranks share it (--ranks-per-gpu=K, UNICCL_RANKS_PER_GPU); run it with
// NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 so that every rank is an LSA team of
// one and both move everything over the network transport (the proxy
// thread). Times are printed, not asserted; wrong data fails. Exits 77
// without a GPU.
//
//   gin_a2a_bench [--ranks-per-gpu=K] [--min-bytes=N] [--max-bytes=N] [--iters=N]
//
// Sizes are nccl-tests' (bytes each rank sends in all, n blocks); busbw is
// size * (n - 1) / n / time, as nccl-tests reports AlltoAll.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../coll/rt.h"
#include "gin_a2a_kernel.h"
#include "nccl.h"
#include "nccl_device.h"
#include "test_check.h"

namespace {

namespace rt = colltest::rt;
using Clock = std::chrono::steady_clock;


long long longArg(int argc, char** argv, const char* name, long long dflt) {
  const size_t n = strlen(name);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return atoll(argv[i] + n + 1);
  return dflt;
}

unsigned char pattern(int src, int dst, size_t i) { return (unsigned char)(src * 7 + dst * 11 + i * 3 + 5); }

struct World {
  int n = 0;
  std::vector<int> devs;
  std::vector<ncclComm_t> comms;
  std::vector<void*> buf;
  std::vector<ncclWindow_t> win;
  std::vector<ncclDevComm> dc;
  std::vector<rtStream> stream;
};

// Fills every rank's send blocks and clears its receive blocks.
bool fill(World& w, size_t block) {
  const int n = w.n;
  std::vector<unsigned char> h((size_t)n * block);
  for (int r = 0; r < n; r++) {
    for (int d = 0; d < n; d++)
      for (size_t j = 0; j < block; j++) h[(size_t)d * block + j] = pattern(r, d, j);
    RT_OK(rt::setDevice(w.devs[r]));
    RT_OK(rt::toDevice(w.buf[r], h.data(), h.size()));
    RT_OK(rt::memset(static_cast<char*>(w.buf[r]) + (size_t)n * block, 0, (size_t)n * block));
  }
  return true;
}

// Wrong bytes in every rank's receive blocks, or -1 when they cannot be read.
long long wrongBytes(World& w, size_t block) {
  const int n = w.n;
  long long bad = 0;
  std::vector<unsigned char> h((size_t)n * block);
  for (int r = 0; r < n; r++) {
    if (rt::setDevice(w.devs[r]) != nullptr ||
        rt::toHost(h.data(), static_cast<char*>(w.buf[r]) + (size_t)n * block, h.size()) != nullptr)
      return -1;
    for (int s = 0; s < n; s++)
      for (size_t j = 0; j < block; j++) bad += h[(size_t)s * block + j] != pattern(s, r, j);
  }
  return bad;
}

bool syncAll(World& w) {
  for (int r = 0; r < w.n; r++) {
    RT_OK(rt::setDevice(w.devs[r]));
    RT_OK(rt::streamSync(w.stream[r]));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  rt::raiseWorkQueues();
  const int ngpus = rt::deviceCount();
  if (ngpus == 0) {
    printf("SKIP: no GPU\n");
    return 77;
  }
  const int perGpu = (int)longArg(argc, argv, "--ranks-per-gpu", ngpus == 1 ? 4 : 1);
  const size_t minBytes = (size_t)longArg(argc, argv, "--min-bytes", 4 << 10);
  const size_t maxBytes = (size_t)longArg(argc, argv, "--max-bytes", 64 << 20);
  const int iters = (int)longArg(argc, argv, "--iters", 20);
  World w;
  w.n = ngpus * perGpu;
  const int n = w.n;
  if (perGpu > 1) setenv("UNICCL_RANKS_PER_GPU", std::to_string(perGpu).c_str(), 0);
  w.devs.resize(n);
  for (int r = 0; r < n; r++) w.devs[r] = r / perGpu;
  w.comms.resize(n);
  NCCL_OK_OR_EXIT(ncclCommInitAll(w.comms.data(), n, w.devs.data()));

  const size_t maxBlock = (maxBytes + n - 1) / n;
  const size_t winBytes = 2 * (size_t)n * maxBlock;
  w.buf.resize(n);
  w.win.resize(n);
  w.dc.resize(n);
  w.stream.resize(n);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.barrierCount = 1;     // the world barrier between iterations
  reqs.ginSignalCount = 1;   // counts every put that landed
  for (int r = 0; r < n; r++) {
    RT_OK_OR_EXIT(rt::setDevice(w.devs[r]));
    NCCL_OK_OR_EXIT(ncclMemAlloc(&w.buf[r], winBytes));
    RT_OK_OR_EXIT(rt::streamCreate(&w.stream[r]));
  }
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int r = 0; r < n; r++)
    NCCL_OK_OR_EXIT(ncclCommWindowRegister(w.comms[r], w.buf[r], winBytes, &w.win[r], NCCL_WIN_COLL_SYMMETRIC));
  for (int r = 0; r < n; r++) NCCL_OK_OR_EXIT(ncclDevCommCreate(w.comms[r], &reqs, &w.dc[r]));
  NCCL_OK_OR_EXIT(ncclGroupEnd());

  uint64_t signalBase = 0;   // puts each rank's signal 0 has counted
  auto ginRun = [&](size_t block, int times) -> bool {
    for (int r = 0; r < n; r++) {
      RT_OK(rt::setDevice(w.devs[r]));
      RT_OK(launchGinAllToAll(w.dc[r], w.win[r], block, times, signalBase, w.stream[r]));
    }
    if (!syncAll(w)) return false;
    signalBase += (uint64_t)times * n;
    return true;
  };
  auto a2aRun = [&](size_t block, int times) -> bool {
    for (int k = 0; k < times; k++) {
      NCCL_OK(ncclGroupStart());
      for (int r = 0; r < n; r++)
        NCCL_OK(ncclAlltoAll(w.buf[r], static_cast<char*>(w.buf[r]) + (size_t)n * block, block, ncclUint8, w.comms[r],
                             w.stream[r]));
      NCCL_OK(ncclGroupEnd());
    }
    return syncAll(w);
  };

  printf("GIN all-to-all vs ncclAlltoAll, %d ranks (%d per GPU), %d iterations\n", n, perGpu, iters);
  printf("%12s %12s %12s %12s %12s %10s %8s\n", "size(B)", "GIN us", "A2A us", "GIN GB/s", "A2A GB/s", "GIN/A2A", "wrong");
  long long totalWrong = 0;
  for (size_t size = minBytes; size <= maxBytes; size *= 4) {
    const size_t block = size / n;
    if (block == 0) continue;
    const size_t bytes = block * n;
    if (!fill(w, block) || !ginRun(block, 1)) return 1;
    auto t0 = Clock::now();
    if (!ginRun(block, iters)) return 1;
    const double ginUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
    long long wrong = wrongBytes(w, block);
    if (!fill(w, block) || !a2aRun(block, 1)) return 1;
    t0 = Clock::now();
    if (!a2aRun(block, iters)) return 1;
    const double a2aUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
    const long long a2aWrong = wrongBytes(w, block);
    wrong = (wrong < 0 || a2aWrong < 0) ? -1 : wrong + a2aWrong;
    const double factor = double(n - 1) / n;
    const double ginBw = bytes * factor / ginUs / 1e3, a2aBw = bytes * factor / a2aUs / 1e3;
    printf("%12zu %12.1f %12.1f %12.2f %12.2f %10.2f %8lld\n", bytes, ginUs, a2aUs, ginBw, a2aBw, ginBw / a2aBw, wrong);
    totalWrong += wrong < 0 ? 1 : wrong;
  }

  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int r = 0; r < n; r++) NCCL_OK_OR_EXIT(ncclDevCommDestroy(w.comms[r], &w.dc[r]));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  for (int r = 0; r < n; r++) {
    NCCL_OK_OR_EXIT(ncclCommWindowDeregister(w.comms[r], w.win[r]));
    RT_OK_OR_EXIT(rt::setDevice(w.devs[r]));
    NCCL_OK_OR_EXIT(ncclMemFree(w.buf[r]));
    RT_OK_OR_EXIT(rt::streamDestroy(w.stream[r]));
  }
  for (ncclComm_t c : w.comms) NCCL_OK_OR_EXIT(ncclCommDestroy(c));
  printf("%s\n", totalWrong == 0 ? "PASS" : "FAILED: wrong bytes");
  return totalWrong == 0 ? 0 : 1;
}
