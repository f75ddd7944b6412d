// Each step of a chain reads the buffer the step before wrote and writes a
// fresh one: AllReduce (sum) and Broadcast (root moving round the ranks)
// alternate over kSteps + 1 distinct buffers. Every buffer but the first is
// poisoned before each run, so a step that read its input before the previous
// kernel's stores landed leaves poison-derived values, and every intermediate
// buffer is checked against a host model. uint32 sums wrap the same way on
// both sides, so the chain stays exact however the values grow.
#include "chain.h"

#include <cstdint>
#include <cstdio>
#include <vector>

#include "../coll/rt.h"
#include "graphs.h"
#include "nccl.h"
#include "test_check.h"

namespace rt = colltest::rt;

namespace {

constexpr int kSteps = 24;

struct ChainRank {
  int dev = 0;
  ncclComm_t comm = nullptr;
  rtStream stream = nullptr;
  std::vector<uint32_t*> bufs;   // kSteps + 1 buffers of `count` elements
};

uint32_t inputValue(int run, int rank, size_t i) { return (uint32_t)((run * 31 + rank * 977 + i * 7) % 1000 + 1); }

int rootOf(int step, int n) { return (step / 2) % n; }

// Enqueues the whole chain (one group per step: this thread drives every GPU).
bool enqueueChain(std::vector<ChainRank>& ranks, size_t count) {
  const int n = (int)ranks.size();
  for (int k = 0; k < kSteps; k++) {
    NCCL_OK(ncclGroupStart());
    for (ChainRank& r : ranks) {
      if (k % 2 == 0)
        NCCL_OK(ncclAllReduce(r.bufs[k], r.bufs[k + 1], count, ncclUint32, ncclSum, r.comm, r.stream));
      else
        NCCL_OK(ncclBroadcast(r.bufs[k], r.bufs[k + 1], count, ncclUint32, rootOf(k, n), r.comm, r.stream));
    }
    NCCL_OK(ncclGroupEnd());
  }
  return true;
}

// Fresh inputs in buffer 0, poison (0xA5A5A5A5) in all the others.
bool prepare(std::vector<ChainRank>& ranks, size_t count, int run) {
  std::vector<uint32_t> host(count);
  for (int me = 0; me < (int)ranks.size(); me++) {
    ChainRank& r = ranks[me];
    for (size_t i = 0; i < count; i++) host[i] = inputValue(run, me, i);
    RT_OK(rt::setDevice(r.dev));
    RT_OK(rt::toDevice(r.bufs[0], host.data(), count * sizeof(uint32_t)));
    for (int k = 1; k <= kSteps; k++) RT_OK(rt::memset(r.bufs[k], 0xA5, count * sizeof(uint32_t)));
  }
  return true;
}

bool check(std::vector<ChainRank>& ranks, size_t count, int run, const char* mode) {
  const int n = (int)ranks.size();
  // model[r][i]: rank r's value of the current step's buffer.
  std::vector<std::vector<uint32_t>> model(n, std::vector<uint32_t>(count));
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++) model[r][i] = inputValue(run, r, i);
  std::vector<uint32_t> got(count);
  for (int k = 0; k < kSteps; k++) {
    std::vector<uint32_t> next(count);
    for (size_t i = 0; i < count; i++) {
      if (k % 2 == 0) {
        uint32_t s = 0;
        for (int r = 0; r < n; r++) s += model[r][i];
        next[i] = s;
      } else {
        next[i] = model[rootOf(k, n)][i];
      }
    }
    for (int r = 0; r < n; r++) {
      model[r] = next;
      RT_OK(rt::setDevice(ranks[r].dev));
      RT_OK(rt::toHost(got.data(), ranks[r].bufs[k + 1], count * sizeof(uint32_t)));
      for (size_t i = 0; i < count; i++)
        REQUIRE(got[i] == next[i], "%s chain, %zu elements, run %d, rank %d, after step %d (%s) [%zu]: %u, want %u",
                    mode, count, run, r, k, k % 2 == 0 ? "AllReduce" : "Broadcast", i, got[i], next[i]);
    }
  }
  return true;
}

constexpr int kReplays = 10, kEagerRuns = 5;

bool runOneSize(std::vector<ChainRank>& ranks, size_t count) {
  for (ChainRank& r : ranks) {
    RT_OK(rt::setDevice(r.dev));
    r.bufs.assign(kSteps + 1, nullptr);
    for (uint32_t*& b : r.bufs) RT_OK(rt::malloc((void**)&b, count * sizeof(uint32_t)));
  }
  // Captured: one graph per rank (per GPU unless ranks share one) holding the
  // whole chain, replayed with fresh inputs.
  {
    GpuGraphs g;
    for (ChainRank& r : ranks) {
      g.devs.push_back(r.dev);
      g.streams.push_back(r.stream);
    }
    if (!g.capture([&] { return enqueueChain(ranks, count); })) return false;
    for (int run = 0; run < kReplays; run++) {
      if (!prepare(ranks, count, run)) return false;
      if (!g.launchAndWait()) return false;
      if (!check(ranks, count, run, "graph")) return false;
    }
  }
  for (int run = kReplays; run < kReplays + kEagerRuns; run++) {
    if (!prepare(ranks, count, run)) return false;
    for (ChainRank& r : ranks) {
      RT_OK(rt::setDevice(r.dev));
      RT_OK(rt::deviceSync());   // the inputs are in place before the first step starts
    }
    if (!enqueueChain(ranks, count)) return false;
    for (ChainRank& r : ranks) RT_OK(rt::streamSync(r.stream));
    if (!check(ranks, count, run, "eager")) return false;
  }
  printf("  %d ranks, %zu elements: %d dependent AllReduce/Broadcast steps, %d graph replays and %d eager runs: "
         "every step exact\n", (int)ranks.size(), count, kSteps, kReplays, kEagerRuns);
  for (ChainRank& r : ranks) {
    RT_OK(rt::setDevice(r.dev));
    for (uint32_t* b : r.bufs) RT_OK(rt::free(b));
  }
  return true;
}

}  // namespace

bool runDependentChains(const std::vector<int>& devs) {
  const int n = (int)devs.size();
  std::vector<ChainRank> ranks(n);
  for (int i = 0; i < n; i++) ranks[i].dev = devs[i];
  std::vector<ncclComm_t> comms(n);
  NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()));
  bool ok = true;
  for (int i = 0; i < n; i++) {
    ranks[i].comm = comms[i];
    RT_OK(rt::setDevice(ranks[i].dev));
    RT_OK(rt::streamCreate(&ranks[i].stream));
  }
  // 1003: one channel, the LL protocol; 1 Mi + 5: many channels, Simple.
  for (size_t count : {(size_t)1003, (size_t)(1 << 20) + 5}) ok = ok && runOneSize(ranks, count);
  for (ChainRank& r : ranks) {
    RT_OK(rt::setDevice(r.dev));
    RT_OK(rt::streamDestroy(r.stream));
    NCCL_OK(ncclCommDestroy(r.comm));
  }
  return ok;
}
