// The in-process stress cases: init/destroy and init/abort cycles with leak
// accounting, a million small AllReduces (and 100k groups of 8), 16
// communicators used concurrently, one communicator clique per thread from
// 8 threads. Every result is checked exactly (integer-valued floats).
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "stress.h"

namespace stress {

namespace {

// Communicators of one clique; leftovers (after a failure) are aborted.
struct Comms : std::vector<ncclComm_t> {
  explicit Comms(int n) : std::vector<ncclComm_t>(n, nullptr) {}
  Comms(const Comms&) = delete;
  ~Comms() {
    for (ncclComm_t c : *this)
      if (c) ncclCommAbort(c);
  }
  bool release(bool abort) {
    for (ncclComm_t& c : *this) {
      NCCL_OK(abort ? ncclCommAbort(c) : ncclCommDestroy(c));
      c = nullptr;
    }
    return true;
  }
};

bool noAsyncError(const std::vector<ncclComm_t>& comms) {
  for (size_t r = 0; r < comms.size(); r++) {
    ncclResult_t e = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comms[r], &e));
    REQUIRE(e == ncclSuccess, "rank %zu has async error %s: %s", r, ncclGetErrorString(e),
            testcheck::ncclLastError());
  }
  return true;
}

float reduce(ncclRedOp_t op, float a, float b) {
  return op == ncclMax ? std::max(a, b) : op == ncclMin ? std::min(a, b) : a + b;
}

// A clique of n comms (one ncclCommInitAll over GPUs 0..n-1), a stream and a
// send/recv pair per rank. Round k reduces counts[k] floats of slice k; the
// rest of the slice must keep its prior (random) contents.
struct Clique {
  int n = 0, rounds = 0, slice = 0;
  ncclRedOp_t op = ncclSum;
  std::vector<std::unique_ptr<GpuSide>> side;
  Comms comms{0};   // declared after `side`: aborted (kernels stopped) before the streams are synced and freed
  std::vector<std::vector<float>> send, prior;
  std::vector<int> counts;

  bool setup(int nranks, int nrounds, int sliceFloats, ncclRedOp_t redop, unsigned seed) {
    n = nranks, rounds = nrounds, slice = sliceFloats, op = redop;
    std::mt19937 rng(seed);
    comms.assign(n, nullptr);
    NCCL_OK(ncclCommInitAll(comms.data(), n, nullptr));
    size_t total = (size_t)rounds * slice;
    send.assign(n, std::vector<float>(total));
    prior.assign(n, std::vector<float>(total));
    for (int r = 0; r < n; r++) {
      side.push_back(std::make_unique<GpuSide>());
      if (!side[r]->init(r, {total, total})) return false;
      for (size_t i = 0; i < total; i++) send[r][i] = randInt(rng), prior[r][i] = randInt(rng);
      RT_OK(copyIn(side[r]->bufs[0], send[r].data(), total * sizeof(float), side[r]->stream));
      RT_OK(copyIn(side[r]->bufs[1], prior[r].data(), total * sizeof(float), side[r]->stream));
    }
    counts.resize(rounds);
    for (int& c : counts) c = 1 + (int)(rng() % slice);
    return true;
  }

  bool issue(int k) {
    size_t off = (size_t)k * slice;
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; r++)
      GROUPED_OK(ncclAllReduce(side[r]->bufs[0] + off, side[r]->bufs[1] + off, counts[k], ncclFloat32, op, comms[r],
                               side[r]->stream));
    NCCL_OK(ncclGroupEnd());
    return true;
  }

  // Waits for rounds [k0, k1) and checks every element of their slices.
  bool verify(int k0, int k1) {
    size_t off = (size_t)k0 * slice, len = (size_t)(k1 - k0) * slice;
    std::vector<float> out(len);
    for (int r = 0; r < n; r++) {
      RT_OK(rt::setDevice(r));
      RT_OK(copyOut(out.data(), side[r]->bufs[1] + off, len * sizeof(float), side[r]->stream));
      for (int k = k0; k < k1; k++)
        for (int i = 0; i < slice; i++) {
          size_t at = (size_t)k * slice + i;
          float expect = prior[r][at];
          if (i < counts[k]) {
            expect = send[0][at];
            for (int q = 1; q < n; q++) expect = reduce(op, expect, send[q][at]);
          }
          REQUIRE(out[at - off] == expect, "rank %d round %d (count %d): out[%d] = %g, expected %g", r, k, counts[k], i,
                  out[at - off], expect);
        }
    }
    return noAsyncError(comms);
  }
};

// ---- init/destroy and init/abort cycles ----

bool cycles(int n, bool abort, int target) {
  constexpr size_t kCount = 4096 + 7;
  constexpr double kBudgetSec = 60;
  std::mt19937 rng(std::random_device{}());
  std::vector<std::unique_ptr<GpuSide>> side;
  for (int r = 0; r < n; r++) {
    side.push_back(std::make_unique<GpuSide>());
    if (!side[r]->init(r, {kCount, kCount})) return false;
  }
  std::vector<std::vector<float>> in(n, std::vector<float>(kCount));
  std::vector<float> prior(kCount), out(kCount);
  Usage base;
  Clock::time_point t0 = Clock::now();
  int done = 0, inflightAborts = 0;
  double first10 = 0;
  for (int cycle = 1; cycle <= target; cycle++) {
    Comms comms(n);
    NCCL_OK(ncclCommInitAll(comms.data(), n, nullptr));
    for (int r = 0; r < n; r++) {
      for (size_t i = 0; i < kCount; i++) in[r][i] = randInt(rng), prior[i] = randInt(rng);
      RT_OK(rt::setDevice(r));
      RT_OK(copyIn(side[r]->bufs[0], in[r].data(), kCount * sizeof(float), side[r]->stream));
      RT_OK(copyIn(side[r]->bufs[1], prior.data(), kCount * sizeof(float), side[r]->stream));
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; r++)
      GROUPED_OK(ncclAllReduce(side[r]->bufs[0], side[r]->bufs[1], kCount, ncclFloat32, ncclSum, comms[r],
                               side[r]->stream));
    NCCL_OK(ncclGroupEnd());
    // Every other abort cycle aborts right after issuing, without waiting.
    bool inflight = abort && cycle % 2 == 0;
    if (!inflight) {
      for (int r = 0; r < n; r++) {
        RT_OK(rt::setDevice(r));
        RT_OK(copyOut(out.data(), side[r]->bufs[1], kCount * sizeof(float), side[r]->stream));
        for (size_t i = 0; i < kCount; i++) {
          float expect = 0;
          for (int q = 0; q < n; q++) expect += in[q][i];
          REQUIRE(out[i] == expect, "cycle %d rank %d: out[%zu] = %g, expected %g", cycle, r, i, out[i], expect);
        }
      }
    }
    if (!comms.release(abort)) return false;
    if (inflight) {
      inflightAborts++;
      for (int r = 0; r < n; r++) {
        RT_OK(rt::setDevice(r));
        RT_OK(rt::streamSync(side[r]->stream));   // aborted kernels must end
      }
    }
    done = cycle;
    if (cycle == 10) {
      first10 = secondsSince(t0);
      if (!measure(n, &base)) return false;
    }
    if (secondsSince(t0) > kBudgetSec) break;
  }
  double total = secondsSince(t0);
  note("%d of %d cycles in %.1f s (first 10: %.0f ms each)%s", done, target, total, first10 * 100,
       done < target ? "; STOPPED at the 60 s budget, not all cycles ran" : "");
  if (abort) note("%d aborted with the AllReduce in flight", inflightAborts);
  REQUIRE(done >= 20, "only %d cycles fit in %.0f s", done, kBudgetSec);
  std::string now = "after cycle " + std::to_string(done);
  return checkGrowth(n, base, "after cycle 10", now.c_str());
}

// ---- a million small AllReduces ----

// The exact running value of one 8-float accumulator. Every AllReduce on it
// multiplies its first `count` elements by f ("up") or 1/f ("down"), so
// element j is X_j * f^e[j] (X_j: the mean over ranks of the initial values);
// a lost or doubled operation is off by a power of f. The walk steers toward
// e = 3, so the value at a check is rarely the initial one.
struct Walker {
  std::vector<std::vector<float>> x0;   // [rank][8]
  int e[8] = {};
  bool touched[8] = {};
  bool step(int count, std::mt19937& rng) {
    int s = 0;
    for (int j = 0; j < count; j++) s += e[j];
    bool up = s < 3 * count || (s == 3 * count && (rng() & 1));
    for (int j = 0; j < count; j++) e[j] += up ? 1 : -1, touched[j] = true;
    return up;
  }
  float expect(int rank, int j, double f) const {
    if (!touched[j]) return x0[rank][j];
    double mean = 0;
    for (const auto& v : x0) mean += v[j];
    return (float)(mean / x0.size() * std::pow(f, e[j]));
  }
};

struct Load {
  int n;
  Comms& comms;
  std::vector<std::unique_ptr<GpuSide>>& side;
  std::vector<ncclRedOp_t> upOp, downOp;
  double f;
  std::mt19937 rng{std::random_device{}()};

  // `iters` groups of `width` AllReduces per comm, each on its own accumulator.
  bool run(long iters, int width, long checkEvery, double budgetSec, double* secs) {
    std::vector<Walker> w(width);
    for (int k = 0; k < width; k++) {
      w[k].x0.assign(n, std::vector<float>(8));
      for (auto& v : w[k].x0)
        for (float& x : v) x = (float)(1 + rng() % 100) * ((rng() & 1) ? 1 : -1);
    }
    for (int r = 0; r < n; r++) {
      std::vector<float> init;
      for (int k = 0; k < width; k++) init.insert(init.end(), w[k].x0[r].begin(), w[k].x0[r].end());
      RT_OK(rt::setDevice(r));
      RT_OK(copyIn(side[r]->bufs[0], init.data(), init.size() * sizeof(float), side[r]->stream));
      RT_OK(rt::streamSync(side[r]->stream));
    }
    Clock::time_point t0 = Clock::now();
    for (long it = 0; it < iters; it++) {
      NCCL_OK(ncclGroupStart());
      for (int k = 0; k < width; k++) {
        int count = 1 + (int)(rng() % 8);
        bool up = w[k].step(count, rng);
        for (int r = 0; r < n; r++)
          GROUPED_OK(ncclAllReduce(side[r]->bufs[0] + 8 * k, side[r]->bufs[0] + 8 * k, count, ncclFloat32,
                                   up ? upOp[r] : downOp[r], comms[r], side[r]->stream));
      }
      NCCL_OK(ncclGroupEnd());
      if ((it + 1) % checkEvery != 0 && it + 1 != iters) continue;
      std::vector<float> out(8 * width);
      for (int r = 0; r < n; r++) {
        RT_OK(rt::setDevice(r));
        RT_OK(copyOut(out.data(), side[r]->bufs[0], out.size() * sizeof(float), side[r]->stream));
        for (int k = 0; k < width; k++)
          for (int j = 0; j < 8; j++) {
            REQUIRE(std::abs(w[k].e[j]) < 40, "walk left the exact range (e = %d)", w[k].e[j]);
            float expect = w[k].expect(r, j, f);
            REQUIRE(out[8 * k + j] == expect, "after %ld groups: rank %d accumulator %d[%d] = %g, expected %g", it + 1,
                    r, k, j, out[8 * k + j], expect);
          }
      }
      if (!noAsyncError(comms)) return false;
      REQUIRE(secondsSince(t0) < budgetSec, "only %ld of %ld groups in %.0f s", it + 1, iters, budgetSec);
    }
    *secs = secondsSince(t0);
    return true;
  }
};

}  // namespace

bool cyclesInit(int n) { return cycles(n, false, 1000); }
bool cyclesAbort(int n) { return cycles(n, true, 100); }

bool loadMillion(int n) {
  // The walk is exact only when 1/n is a power of two.
  int m = 1;
  while (m * 2 <= n) m *= 2;
  std::vector<std::unique_ptr<GpuSide>> side;
  Comms comms(m);   // after `side`: aborted first on a failure
  NCCL_OK(ncclCommInitAll(comms.data(), m, nullptr));
  Load load{m, comms, side, std::vector<ncclRedOp_t>(m, ncclSum), std::vector<ncclRedOp_t>(m), m > 1 ? (double)m : 2.0};
  for (int r = 0; r < m; r++) {
    side.push_back(std::make_unique<GpuSide>());
    if (!side[r]->init(r, {64})) return false;
    // down: sum of n copies of x/n^2 = x/n; up: plain sum (n > 1) or x*2.
    float down = m > 1 ? 1.0f / (float)(m * m) : 0.5f, up = 2.0f;
    NCCL_OK(ncclRedOpCreatePreMulSum(&load.downOp[r], &down, ncclFloat32, ncclScalarHostImmediate, comms[r]));
    if (m == 1) NCCL_OK(ncclRedOpCreatePreMulSum(&load.upOp[r], &up, ncclFloat32, ncclScalarHostImmediate, comms[r]));
  }
  double s1 = 0, s8 = 0;
  bool ok = load.run(1000000, 1, 100000, 75, &s1);
  if (ok) {
    note("1M single AllReduces (x%d GPUs) in %.2f s: %.0f ops/s, %.1f us each", m, s1, 1e6 / s1, s1);
    REQUIRE(s1 < 60, "1M AllReduces took %.1f s (limit 60 s)", s1);
    ok = load.run(100000, 8, 10000, 60, &s8);
    if (ok) note("100k groups of 8 in %.2f s: %.0f AllReduces/s per comm", s8, 8e5 / s8);
  }
  for (int r = 0; r < m && ok; r++) {
    NCCL_OK(ncclRedOpDestroy(load.downOp[r], comms[r]));
    if (m == 1) NCCL_OK(ncclRedOpDestroy(load.upOp[r], comms[r]));
  }
  return ok && comms.release(false);
}

bool manyComms(int n) {
  constexpr int kComms = 16, kRounds = 1000, kSlice = 64;
  const ncclRedOp_t ops[3] = {ncclSum, ncclMax, ncclMin};
  unsigned seed = std::random_device{}();
  std::vector<Clique> cl(kComms);
  Clock::time_point t0 = Clock::now();
  for (int c = 0; c < kComms; c++)
    if (!cl[c].setup(n, kRounds, kSlice, ops[c % 3], seed + c)) return false;
  double initSec = secondsSince(t0);
  t0 = Clock::now();
  for (int k = 0; k < kRounds; k++)
    for (int c = 0; c < kComms; c++)
      if (!cl[c].issue(k)) return false;
  for (int c = 0; c < kComms; c++)
    if (!cl[c].verify(0, kRounds)) return false;
  double runSec = secondsSince(t0);
  note("%d comms x %d GPUs: init %.2f s; %d rounds (%d AllReduces per GPU, all checked) in %.2f s", kComms, n, initSec,
       kRounds, kComms * kRounds, runSec);
  for (Clique& c : cl)
    if (!c.comms.release(false)) return false;
  return true;
}

// A reusable barrier for the threads of one case (C++17 has no std::barrier).
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      gen_++;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen != gen_; });
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
};

// Eight threads, each with its own clique, used concurrently. Creating and
// destroying communicators allocates and frees GPU memory, which may wait for
// the device and so for other cliques' collectives in flight (NCCL documents
// the same hazard): every thread initializes, then all run, then all release.
bool threadPerComm(int n) {
  constexpr int kThreads = 8, kRounds = 2000, kSlice = 32, kCheckEvery = 500;
  unsigned seed = std::random_device{}();
  std::vector<char> ok(kThreads, 0);
  std::vector<double> secs(kThreads, 0);
  std::vector<std::thread> threads;
  ThreadBarrier barrier(kThreads);
  Clock::time_point t0 = Clock::now();
  for (int t = 0; t < kThreads; t++)
    threads.emplace_back([&, t] {
      Clique cl;
      bool good = cl.setup(n, kRounds, kSlice, t % 2 ? ncclMax : ncclSum, seed + 100 * t);
      barrier.wait();
      Clock::time_point start = Clock::now();
      for (int k = 0; good && k < kRounds; k++) {
        good = cl.issue(k);
        if (good && (k + 1) % kCheckEvery == 0) good = cl.verify(k + 1 - kCheckEvery, k + 1);
      }
      secs[t] = secondsSince(start);
      barrier.wait();
      good = cl.comms.release(false) && good;
      ok[t] = good;
    });
  for (std::thread& t : threads) t.join();
  double slowest = *std::max_element(secs.begin(), secs.end());
  note("%d threads x %d checked AllReduces on %d GPUs: %.2f s total, slowest thread %.2f s", kThreads, kRounds, n,
       secondsSince(t0), slowest);
  for (int t = 0; t < kThreads; t++) REQUIRE(ok[t], "thread %d failed (see above)", t);
  return true;
}

}  // namespace stress
