// One communicator clique per thread, used concurrently (load): the
// GPU stress case thread-per-comm on the CPU emulator. 8 threads each create
// their own ncclCommInitAll clique over the same emulated devices (every
// clique initialized before any runs, as the GPU case does: creating a
// communicator allocates device memory, which can wait for another clique's
// kernels), then run checked AllReduces concurrently, then destroy.
//
// With --scalable=K the cliques come from ncclCommInitRankScalable with K
// unique ids (a root per id, each serving a block of the ranks) instead.
//
//   emu_threads_test [--threads=N] [--rounds=N] [--scalable=K]
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/gpu.h"
#include "emu_runtime.h"
#include "nccl.h"
#include "test_check.h"

using namespace uniccl;

namespace {

constexpr int kRanks = 2;
constexpr int kCount = 257;   // odd: a tail on every channel share
int gScalableIds = 0;         // --scalable=K: ncclCommInitRankScalable with K ids

class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    const int gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      gen_++;
      cv_.notify_all();
    } else {
      cv_.wait(lk, [&] { return gen_ != gen; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, arrived_ = 0, gen_ = 0;
};

struct Clique {
  ncclComm_t comms[kRanks] = {};
  gpu::Stream streams[kRanks] = {};
  float* buf[kRanks] = {};
  std::vector<float> value[kRanks];   // what each rank's buffer holds now

  bool setup(unsigned seed) {
    int devs[kRanks];
    for (int r = 0; r < kRanks; r++) devs[r] = r;
    if (gScalableIds > 0) {
      std::vector<ncclUniqueId> ids(gScalableIds);
      for (ncclUniqueId& id : ids) NCCL_OK(ncclGetUniqueId(&id));
      NCCL_OK(ncclGroupStart());
      for (int r = 0; r < kRanks; r++) {
        NCCL_OK(gpu::setDevice(devs[r]));
        NCCL_OK(ncclCommInitRankScalable(&comms[r], kRanks, r, gScalableIds, ids.data(), nullptr));
      }
      NCCL_OK(ncclGroupEnd());
    } else {
      NCCL_OK(ncclCommInitAll(comms, kRanks, devs));
    }
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(-4, 4);
    for (int r = 0; r < kRanks; r++) {
      NCCL_OK(gpu::setDevice(r));
      NCCL_OK(gpu::streamCreate(&streams[r]));
      void* p = nullptr;
      NCCL_OK(gpu::deviceAlloc(&p, kCount * sizeof(float)));
      buf[r] = static_cast<float*>(p);
      value[r].resize(kCount);
      for (float& x : value[r]) x = (float)d(rng);
      NCCL_OK(gpu::memcpy(buf[r], value[r].data(), kCount * sizeof(float)));
    }
    return true;
  }

  // In-place AllReduce with `op` on every rank; the host model follows.
  bool issue(ncclRedOp_t op) {
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < kRanks; r++)
      NCCL_OK(ncclAllReduce(buf[r], buf[r], kCount, ncclFloat, op, comms[r], static_cast<uniccl_stream_t>(streams[r])));
    NCCL_OK(ncclGroupEnd());
    for (int i = 0; i < kCount; i++) {
      float v = value[0][i];
      for (int r = 1; r < kRanks; r++) v = op == ncclMax ? std::max(v, value[r][i]) : op == ncclMin ? std::min(v, value[r][i]) : v + value[r][i];
      for (int r = 0; r < kRanks; r++) value[r][i] = v;
    }
    return true;
  }

  bool verify(int thread, int round) {
    for (int r = 0; r < kRanks; r++) {
      NCCL_OK(gpu::setDevice(r));
      NCCL_OK(gpu::streamSynchronize(streams[r]));
      std::vector<float> got(kCount);
      NCCL_OK(gpu::memcpy(got.data(), buf[r], kCount * sizeof(float)));
      for (int i = 0; i < kCount; i++)
        REQUIRE(got[i] == value[r][i], "thread %d round %d rank %d: element %d is %g, expected %g", thread, round, r,
                i, got[i], value[r][i]);
    }
    return true;
  }

  bool release() {
    for (int r = 0; r < kRanks; r++) {
      if (comms[r] != nullptr) NCCL_OK(ncclCommDestroy(comms[r]));
      comms[r] = nullptr;
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      if (buf[r] != nullptr) (void)gpu::deviceFree(buf[r]);
      if (streams[r] != nullptr) (void)gpu::streamDestroy(streams[r]);
    }
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int nthreads = 8, rounds = 120;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--threads=", 10)) nthreads = atoi(argv[i] + 10);
    if (!strncmp(argv[i], "--rounds=", 9)) rounds = atoi(argv[i] + 9);
    if (!strncmp(argv[i], "--scalable=", 11)) gScalableIds = atoi(argv[i] + 11);
  }
  emu::installCpuKernelRunner();
  Barrier barrier(nthreads);
  std::vector<char> ok(nthreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; t++) {
    threads.emplace_back([&, t] {
      Clique cl;
      bool good = cl.setup(1000u + t);
      barrier.wait();   // every clique exists before any collective runs
      // Sum doubles values; alternate with max and min so they stay small.
      const ncclRedOp_t ops[] = {ncclSum, ncclMax, ncclMin};
      for (int k = 0; good && k < rounds; k++) {
        good = cl.issue(ops[(k + t) % 3]);
        if (good && (k + 1) % 40 == 0) good = cl.verify(t, k + 1);
      }
      if (good) good = cl.verify(t, rounds);
      barrier.wait();   // nobody destroys while others still run
      good = cl.release() && good;
      ok[t] = good;
    });
  }
  for (std::thread& th : threads) th.join();
  int failed = (int)std::count(ok.begin(), ok.end(), 0);
  printf("emu_threads_test: %d threads x %d checked in-place AllReduces (%d ranks each): %d failed\n", nthreads, rounds,
         kRanks, failed);
  return failed == 0 ? 0 : 1;
}
