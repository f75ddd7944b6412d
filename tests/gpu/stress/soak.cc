// soak: checked AllReduces for STRESS_SOAK_S seconds (default 60) over the
// transport the environment leaves. Run with NCCL_P2P_DISABLE=1
// NCCL_SHM_DISABLE=1 and small buffers (NCCL_BUFFSIZE=65536,
// UNICCL_LL_BUFFSIZE=16384), it sends every operation through many steps of
// the socket transport's staging slots and the proxy: the path on which the
// CPU emulator once showed one wrong element under load (docs/reliability.md).
// Ranks: every GPU times --ranks-per-gpu (at least 2). Each round has fresh
// random integer-valued floats, a size from a list that crosses step and
// slot boundaries, in place or out of place, sum/max/min, and every element
// of every rank is checked against a host reduction.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "stress.h"

namespace stress {

namespace {

float reduceOne(ncclRedOp_t op, float a, float b) {
  return op == ncclMax ? std::max(a, b) : op == ncclMin ? std::min(a, b) : a + b;
}

const char* opName(ncclRedOp_t op) { return op == ncclMax ? "max" : op == ncclMin ? "min" : "sum"; }

}  // namespace

bool soak(int ngpus, int ranksPerGpu) {
  const size_t kCounts[] = {1, 7, 2047, 2048, 2049, 16384 + 3, 70001, 262144 + 5, (1u << 20) + 11};
  const ncclRedOp_t kOps[] = {ncclSum, ncclMax, ncclMin};
  const size_t maxCount = *std::max_element(std::begin(kCounts), std::end(kCounts));
  const char* env = getenv("STRESS_SOAK_S");
  const double seconds = env ? atof(env) : 60.0;
  const int n = ngpus * ranksPerGpu;
  REQUIRE(n >= 2, "needs at least 2 ranks: %d GPU(s) x %d per GPU (--ranks-per-gpu=2 on one GPU)", ngpus, ranksPerGpu);
  if (ranksPerGpu > 1) setenv("UNICCL_RANKS_PER_GPU", std::to_string(ranksPerGpu).c_str(), 1);
  std::vector<int> devs(n);
  for (int r = 0; r < n; r++) devs[r] = r / ranksPerGpu;
  std::vector<ncclComm_t> comms(n, nullptr);
  NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()));
  struct Release {
    std::vector<ncclComm_t>& c;
    ~Release() {
      for (ncclComm_t x : c)
        if (x) ncclCommDestroy(x);
    }
  } release{comms};
  std::vector<std::unique_ptr<GpuSide>> side;
  for (int r = 0; r < n; r++) {
    side.push_back(std::make_unique<GpuSide>());
    if (!side[r]->init(devs[r], {maxCount, maxCount})) return false;
  }
  std::mt19937 rng(std::random_device{}());
  std::vector<std::vector<float>> in(n, std::vector<float>(maxCount));
  std::vector<float> expect(maxCount), out(maxCount);
  long long rounds = 0, elements = 0;
  Clock::time_point t0 = Clock::now();
  while (secondsSince(t0) < seconds) {
    const size_t count = kCounts[rng() % std::size(kCounts)];
    const ncclRedOp_t op = kOps[rng() % std::size(kOps)];
    const bool inPlace = rng() % 2 == 0;
    for (int r = 0; r < n; r++) {
      for (size_t i = 0; i < count; i++) in[r][i] = randInt(rng);
      RT_OK(rt::setDevice(devs[r]));
      RT_OK(copyIn(side[r]->bufs[inPlace ? 1 : 0], in[r].data(), count * sizeof(float), side[r]->stream));
    }
    for (size_t i = 0; i < count; i++) {
      float v = in[0][i];
      for (int r = 1; r < n; r++) v = reduceOne(op, v, in[r][i]);
      expect[i] = v;
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; r++)
      GROUPED_OK(ncclAllReduce(side[r]->bufs[inPlace ? 1 : 0], side[r]->bufs[1], count, ncclFloat32, op, comms[r],
                               side[r]->stream));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < n; r++) {
      RT_OK(rt::setDevice(devs[r]));
      RT_OK(copyOut(out.data(), side[r]->bufs[1], count * sizeof(float), side[r]->stream));
      for (size_t i = 0; i < count; i++)
        REQUIRE(out[i] == expect[i], "round %lld, rank %d, %zu floats %s %s: out[%zu] = %g, expected %g", rounds, r,
                count, opName(op), inPlace ? "in place" : "out of place", i, out[i], expect[i]);
    }
    rounds++;
    elements += (long long)count * n;
  }
  for (int r = 0; r < n; r++) {
    ncclResult_t e = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comms[r], &e));
    REQUIRE(e == ncclSuccess, "rank %d has async error %s: %s", r, ncclGetErrorString(e),
            testcheck::ncclLastError());
  }
  const char* p2p = getenv("NCCL_P2P_DISABLE");
  const char* shm = getenv("NCCL_SHM_DISABLE");
  note("%lld checked AllReduces (%lld elements, 0 wrong) on %d ranks (%d per GPU) in %.0f s; P2P %s, SHM %s", rounds,
       elements, n, ranksPerGpu, secondsSince(t0), p2p && atoi(p2p) ? "off" : "on", shm && atoi(shm) ? "off" : "on");
  return true;
}

}  // namespace stress
