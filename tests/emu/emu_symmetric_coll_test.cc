// Symmetric collectives (docs/device_api.md, "Symmetric collectives") on
// real communicators over emulated GPUs: AllReduce (AllGather, ReduceScatter) whose send and receive
// buffers lie in NCCL_WIN_COLL_SYMMETRIC windows runs the symmetric kernel
// (kAlgoSymmetric, counted by the tuning counters) and gives every rank
// the host reference's bits; a buffer outside a window, a message above
// UNICCL_SYMMETRIC_MAX_BYTES, or UNICCL_SYMMETRIC=0 runs the ring.
//
// For 2, 3 and 8 ranks: sum, max, prod and min of random small integers
// (float, exact in any order) at counts 0, 1, 7, 1000 and 4099, out of
// place (one-shot) and in place (two-shot); sum and prod at 20000 out of
// place (above UNICCL_SYMMETRIC_TWO_SHOT_BYTES: two-shot); two AllReduces in one group (one launch, two items);
// one receive buffer not in a window; one count above the threshold; then
// AllGather the same way (counts 0 to 4000 per rank, in and out of place,
// an output in no window); ReduceScatter (every op, counts 0 to 1000 per
// rank, in and out of place, an output or an input in no window);
// ncclCommAbort ends a symmetric AllReduce that waits for a peer which
// never comes.
//
//   emu_symmetric_coll_test [--ranks=N] [--expect-off]
//     --expect-off: UNICCL_SYMMETRIC is 0 (the default): no collective may take the symmetric path
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/core/tasks.h"
#include "common/core/tuning.h"
#include "common/gpu.h"
#include "device/dev_types.h"
#include "emu_gpu.h"
#include "emu_runtime.h"
#include "nccl.h"
#include "test_check.h"

namespace gpu = uniccl::gpu;
namespace dev = uniccl::dev;
using uniccl::TaskKind;

namespace {

bool gExpectOff = false;

// f(rank) on every rank at once, one thread each, with the rank's device current.
std::vector<ncclResult_t> onEveryRank(int n, const std::function<ncclResult_t(int)>& f) {
  std::vector<ncclResult_t> res(n, ncclInternalError);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    threads.emplace_back([&, r] {
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      res[r] = f(r);
    });
  for (auto& t : threads) t.join();
  return res;
}

bool allOk(const std::vector<ncclResult_t>& res, const char* what) {
  for (size_t r = 0; r < res.size(); r++)
    REQUIRE(res[r] == ncclSuccess, "%s: rank %zu: %s (%s)", what, r, ncclGetErrorString(res[r]),
            testcheck::ncclLastError());
  return true;
}

uint64_t symDecisions() { return uniccl::tuningDecisions(TaskKind::AllReduce, dev::kAlgoSymmetric); }
// The ring and tree kernels (8 ranks pick the tree for small messages).
uint64_t ringDecisions() {
  return uniccl::tuningDecisions(TaskKind::AllReduce, dev::kAlgoRing) +
         uniccl::tuningDecisions(TaskKind::AllReduce, dev::kAlgoTree);
}

constexpr size_t kMaxCount = 40000;   // above UNICCL_SYMMETRIC_MAX_BYTES (128 KiB of float) for the ring case

struct Rank {
  ncclComm_t comm = nullptr;
  gpu::Stream stream = nullptr;
  float* send = nullptr;      // in a symmetric window
  float* recv = nullptr;      // in a symmetric window
  float* plain = nullptr;     // ncclMemAlloc'd, in no window
  ncclWindow_t sendWin = nullptr, recvWin = nullptr;
};

float opOf(ncclRedOp_t op, float a, float b) {
  switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return a + b;
  }
}
const char* opName(ncclRedOp_t op) {
  return op == ncclSum ? "sum" : op == ncclProd ? "prod" : op == ncclMax ? "max" : "min";
}

class Fixture {
 public:
  explicit Fixture(int n) : n_(n), ranks_(n), rng_(1234 + n) {}
  ~Fixture() {
    for (int r = 0; r < n_; r++) {
      Rank& R = ranks_[r];
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      if (R.comm != nullptr) {
        if (R.sendWin) ncclCommWindowDeregister(R.comm, R.sendWin);
        if (R.recvWin) ncclCommWindowDeregister(R.comm, R.recvWin);
        ncclCommDestroy(R.comm);
      }
      if (R.stream) (void)gpu::streamDestroy(R.stream);
      ncclMemFree(R.send);
      ncclMemFree(R.recv);
      ncclMemFree(R.plain);
    }
  }

  bool init() {
    std::vector<ncclComm_t> c(n_);
    std::vector<int> devs(n_);
    for (int i = 0; i < n_; i++) devs[i] = i;
    NCCL_OK(ncclCommInitAll(c.data(), n_, devs.data()));
    for (int r = 0; r < n_; r++) {
      Rank& R = ranks_[r];
      R.comm = c[r];
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      NCCL_OK(gpu::streamCreate(&R.stream));
      NCCL_OK(ncclMemAlloc((void**)&R.send, kMaxCount * sizeof(float)));
      NCCL_OK(ncclMemAlloc((void**)&R.recv, kMaxCount * sizeof(float)));
      NCCL_OK(ncclMemAlloc((void**)&R.plain, kMaxCount * sizeof(float)));
    }
    // Windows registered from one thread per rank (each call is collective).
    return allOk(onEveryRank(n_,
                             [&](int r) {
                               Rank& R = ranks_[r];
                               ncclResult_t res = ncclCommWindowRegister(R.comm, R.send, kMaxCount * sizeof(float),
                                                                         &R.sendWin, NCCL_WIN_COLL_SYMMETRIC);
                               if (res != ncclSuccess) return res;
                               return ncclCommWindowRegister(R.comm, R.recv, kMaxCount * sizeof(float), &R.recvWin,
                                                             NCCL_WIN_COLL_SYMMETRIC);
                             }),
                 "window registration");
  }

  // Fills every rank's input, runs the AllReduces (one group per rank when
  // several), checks every rank's output against the rank-order reference.
  // Each call: {count, op, inPlace, plainRecv}.
  struct Call {
    size_t count;
    ncclRedOp_t op;
    bool inPlace;
    bool plainRecv;     // receive into the buffer that is in no window
    size_t offset;      // elements into the buffers (the same on every rank)
  };
  bool run(const std::vector<Call>& calls, const std::string& what) {
    // Inputs: each call its own region of send (the calls of one group must not overlap).
    std::vector<std::vector<std::vector<float>>> in(calls.size(), std::vector<std::vector<float>>(n_));
    for (size_t k = 0; k < calls.size(); k++) {
      const Call& c = calls[k];
      std::uniform_int_distribution<int> d(c.op == ncclProd ? 1 : -8, c.op == ncclProd ? 3 : 8);
      for (int r = 0; r < n_; r++) {
        in[k][r].resize(c.count);
        for (float& x : in[k][r]) x = (float)d(rng_);
        CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
        float* dst = (c.inPlace ? (c.plainRecv ? ranks_[r].plain : ranks_[r].send) : ranks_[r].send) + c.offset;
        NCCL_OK(gpu::memcpy(dst, in[k][r].data(), c.count * sizeof(float)));
        float* out = (c.inPlace ? dst : c.plainRecv ? ranks_[r].plain + c.offset : ranks_[r].recv + c.offset);
        if (!c.inPlace) {
          std::vector<float> junk(c.count, -12345.0f);
          NCCL_OK(gpu::memcpy(out, junk.data(), c.count * sizeof(float)));
        }
      }
    }
    auto res = onEveryRank(n_, [&](int r) -> ncclResult_t {
      Rank& R = ranks_[r];
      if (calls.size() > 1) ncclGroupStart();
      ncclResult_t st = ncclSuccess;
      for (const Call& c : calls) {
        float* s = (c.inPlace && c.plainRecv ? R.plain : R.send) + c.offset;
        float* d = c.inPlace ? s : (c.plainRecv ? R.plain : R.recv) + c.offset;
        st = ncclAllReduce(s, d, c.count, ncclFloat, c.op, R.comm, (uniccl_stream_t)R.stream);
        if (st != ncclSuccess) break;
      }
      if (calls.size() > 1) {
        ncclResult_t e = ncclGroupEnd();
        if (st == ncclSuccess) st = e;
      }
      if (st != ncclSuccess) return st;
      return gpu::streamSynchronize(R.stream);
    });
    if (!allOk(res, what.c_str())) return false;
    for (size_t k = 0; k < calls.size(); k++) {
      const Call& c = calls[k];
      std::vector<float> want(c.count);
      for (size_t i = 0; i < c.count; i++) {
        float a = in[k][0][i];
        for (int r = 1; r < n_; r++) a = opOf(c.op, a, in[k][r][i]);
        want[i] = a;
      }
      for (int r = 0; r < n_; r++) {
        CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
        std::vector<float> got(c.count);
        const float* out = c.inPlace ? (c.plainRecv ? ranks_[r].plain : ranks_[r].send) + c.offset
                                     : (c.plainRecv ? ranks_[r].plain : ranks_[r].recv) + c.offset;
        NCCL_OK(gpu::memcpy(got.data(), out, c.count * sizeof(float)));
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < c.count; i++)
          if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ == 0) first = i;
        CHECK(bad == 0, "%s: %d ranks, %s count %zu%s, rank %d: %zu wrong, first [%zu] = %g, want %g", what.c_str(), n_,
              opName(c.op), c.count, c.inPlace ? " in place" : "", r, bad, first, bad ? got[first] : 0.0,
              bad ? want[first] : 0.0);
      }
    }
    return true;
  }

  // AllGather of `count` elements per rank: out of place from send into
  // recv (or the plain buffer), or in place (each rank's input at its share
  // of recv). Checks every rank's whole output.
  bool allGather(size_t count, bool inPlace, bool plainRecv, const std::string& what) {
    std::uniform_int_distribution<int> d(-100, 100);
    std::vector<std::vector<float>> in(n_, std::vector<float>(count));
    for (int r = 0; r < n_; r++) {
      Rank& R = ranks_[r];
      for (float& x : in[r]) x = (float)d(rng_);
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      float* out = plainRecv ? R.plain : R.recv;
      std::vector<float> junk(count * n_, -12345.0f);
      NCCL_OK(gpu::memcpy(out, junk.data(), junk.size() * sizeof(float)));
      float* src = inPlace ? out + (size_t)r * count : R.send;
      NCCL_OK(gpu::memcpy(src, in[r].data(), count * sizeof(float)));
    }
    auto res = onEveryRank(n_, [&](int r) -> ncclResult_t {
      Rank& R = ranks_[r];
      float* out = plainRecv ? R.plain : R.recv;
      const float* src = inPlace ? out + (size_t)r * count : R.send;
      ncclResult_t st = ncclAllGather(src, out, count, ncclFloat, R.comm, (uniccl_stream_t)R.stream);
      return st != ncclSuccess ? st : gpu::streamSynchronize(R.stream);
    });
    if (!allOk(res, what.c_str())) return false;
    for (int r = 0; r < n_; r++) {
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      std::vector<float> got(count * n_);
      NCCL_OK(gpu::memcpy(got.data(), plainRecv ? ranks_[r].plain : ranks_[r].recv, got.size() * sizeof(float)));
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < got.size(); i++)
        if (got[i] != in[i / count][i % count] && bad++ == 0) first = i;
      CHECK(bad == 0, "%s: %d ranks, AllGather count %zu%s, rank %d: %zu wrong, first [%zu] = %g, want %g",
            what.c_str(), n_, count, inPlace ? " in place" : "", r, bad, first, bad ? got[first] : 0.0,
            bad ? in[first / count][first % count] : 0.0);
    }
    return true;
  }

  // ReduceScatter of `count` elements per rank with `op`: from send (or the
  // plain buffer, plainSend) into recv (or the plain buffer, plainRecv), or
  // in place (the output is share `rank` of the input in send). Checks
  // every rank's output against the rank-order reference.
  bool reduceScatter(size_t count, ncclRedOp_t op, bool inPlace, bool plainSend, bool plainRecv,
                     const std::string& what) {
    std::uniform_int_distribution<int> d(op == ncclProd ? 1 : -8, op == ncclProd ? 3 : 8);
    std::vector<std::vector<float>> in(n_, std::vector<float>(count * n_));
    auto bufs = [&](int r, float** src, float** out) {
      Rank& R = ranks_[r];
      *src = plainSend ? R.plain : R.send;
      *out = inPlace ? *src + (size_t)r * count : plainRecv ? R.plain : R.recv;
    };
    for (int r = 0; r < n_; r++) {
      for (float& x : in[r]) x = (float)d(rng_);
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      float *src, *out;
      bufs(r, &src, &out);
      NCCL_OK(gpu::memcpy(src, in[r].data(), in[r].size() * sizeof(float)));
      if (!inPlace) {
        std::vector<float> junk(count, -12345.0f);
        NCCL_OK(gpu::memcpy(out, junk.data(), count * sizeof(float)));
      }
    }
    auto res = onEveryRank(n_, [&](int r) -> ncclResult_t {
      Rank& R = ranks_[r];
      float *src, *out;
      bufs(r, &src, &out);
      ncclResult_t st = ncclReduceScatter(src, out, count, ncclFloat, op, R.comm, (uniccl_stream_t)R.stream);
      return st != ncclSuccess ? st : gpu::streamSynchronize(R.stream);
    });
    if (!allOk(res, what.c_str())) return false;
    for (int r = 0; r < n_; r++) {
      std::vector<float> want(count);
      for (size_t i = 0; i < count; i++) {
        float a = in[0][(size_t)r * count + i];
        for (int p = 1; p < n_; p++) a = opOf(op, a, in[p][(size_t)r * count + i]);
        want[i] = a;
      }
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      float *src, *out;
      bufs(r, &src, &out);
      std::vector<float> got(count);
      NCCL_OK(gpu::memcpy(got.data(), out, count * sizeof(float)));
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < count; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ == 0) first = i;
      CHECK(bad == 0, "%s: %d ranks, ReduceScatter %s count %zu%s, rank %d: %zu wrong, first [%zu] = %g, want %g",
            what.c_str(), n_, opName(op), count, inPlace ? " in place" : "", r, bad, first, bad ? got[first] : 0.0,
            bad ? want[first] : 0.0);
    }
    return true;
  }

  // Rank 0 alone starts a symmetric AllReduce (rank 1 never joins): its
  // kernel waits in the first barrier. ncclCommAbort on every rank must end
  // it (the barrier's spin reads the abort flag) and return promptly.
  bool abortWhileWaiting() {
    Rank& R0 = ranks_[0];
    CHECK(gpu::setDevice(0) == ncclSuccess, "the rank's device");
    const uint64_t sym0 = symDecisions();
    NCCL_OK(ncclAllReduce(R0.send, R0.recv, 1000, ncclFloat, ncclSum, R0.comm, (uniccl_stream_t)R0.stream));
    CHECK(symDecisions() == sym0 + 1, "the lone AllReduce did not take the symmetric path");
    std::atomic<bool> done{false};
    std::thread waiter([&] {
      CHECK(gpu::setDevice(0) == ncclSuccess, "the rank's device");
      (void)gpu::streamSynchronize(R0.stream);   // its error, if any, does not matter here
      done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(!done, "rank 0's AllReduce finished without its peers");
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < n_; r++) {
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      ncclResult_t res = ncclCommAbort(ranks_[r].comm);
      CHECK(res == ncclSuccess, "rank %d: ncclCommAbort: %s", r, ncclGetErrorString(res));
      ranks_[r].comm = nullptr;   // the abort released its windows
      ranks_[r].sendWin = ranks_[r].recvWin = nullptr;
    }
    for (int i = 0; i < 500 && !done; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(done, "rank 0's stream still busy %.1f s after ncclCommAbort", s);
    if (!done) {
      waiter.detach();   // stuck: the failure is reported, do not hang the test
      return false;
    }
    waiter.join();
    return true;
  }

 private:
  int n_;
  std::vector<Rank> ranks_;
  std::mt19937 rng_;
};

bool testRanks(int n) {
  Fixture f(n);
  if (!f.init()) return false;
  const uint64_t sym0 = symDecisions(), ring0 = ringDecisions();
  // Every op, count and placement: each on every rank, on the symmetric path.
  uint64_t expectSym = 0;
  const ncclRedOp_t ops[] = {ncclSum, ncclMax, ncclProd, ncclMin};
  const size_t counts[] = {0, 1, 7, 1000, 4099};
  for (ncclRedOp_t op : ops)
    for (size_t count : counts)
      for (bool inPlace : {false, true}) {
        if (!f.run({{count, op, inPlace, false, 0}}, "symmetric")) return false;
        if (count > 0) expectSym += (uint64_t)n;
      }
  // Out of place from UNICCL_SYMMETRIC_TWO_SHOT_BYTES (64 KiB): two-shot
  // (in place is two-shot at every count above; out of place one-shot).
  for (ncclRedOp_t op : {ncclSum, ncclProd}) {
    if (!f.run({{20000, op, false, false, 0}}, "symmetric-two-shot")) return false;
    expectSym += (uint64_t)n;
  }
  // Buffers 4 and 12 bytes past a 16-byte boundary: the scalar head before
  // the kernels' 16-byte vectors, one-shot and two-shot (in place).
  for (size_t offset : {1, 3})
    for (bool inPlace : {false, true}) {
      if (!f.run({{4099, ncclSum, inPlace, false, offset}}, "symmetric-unaligned")) return false;
      expectSym += (uint64_t)n;
    }
  // Two in one group: one launch, two items, the barrier's epochs advance per item.
  if (!f.run({{1000, ncclSum, false, false, 0}, {4099, ncclMax, true, false, 1024}}, "symmetric-group")) return false;
  expectSym += 2 * (uint64_t)n;
  const uint64_t sym1 = symDecisions(), ring1 = ringDecisions();
  if (gExpectOff) {
    CHECK(sym1 == sym0, "%d ranks: UNICCL_SYMMETRIC=0, yet %llu AllReduces took the symmetric path", n,
          (unsigned long long)(sym1 - sym0));
  } else {
    CHECK(sym1 - sym0 == expectSym, "%d ranks: %llu AllReduces on the symmetric path, want %llu", n,
          (unsigned long long)(sym1 - sym0), (unsigned long long)expectSym);
    CHECK(ring1 == ring0, "%d ranks: %llu AllReduces on the ring or tree, want none", n, (unsigned long long)(ring1 - ring0));
  }
  // The receive buffer in no window; then a message above UNICCL_SYMMETRIC_MAX_BYTES: the ring.
  if (!f.run({{1000, ncclSum, false, true, 0}}, "plain-recv")) return false;
  if (!f.run({{4099, ncclMin, true, true, 0}}, "plain-inplace")) return false;
  if (!f.run({{kMaxCount, ncclSum, false, false, 0}}, "above-threshold")) return false;
  const uint64_t sym2 = symDecisions(), ring2 = ringDecisions();
  CHECK(sym2 == sym1, "%d ranks: %llu AllReduces off windows or above the threshold took the symmetric path", n,
        (unsigned long long)(sym2 - sym1));
  CHECK(ring2 - ring1 == 3 * (uint64_t)n, "%d ranks: %llu AllReduces on the ring or tree, want %d", n,
        (unsigned long long)(ring2 - ring1), 3 * n);
  return true;
}

uint64_t agSym() { return uniccl::tuningDecisions(TaskKind::AllGather, dev::kAlgoSymmetric); }
uint64_t agRing() { return uniccl::tuningDecisions(TaskKind::AllGather, dev::kAlgoRing); }

bool testAllGather(int n) {
  Fixture f(n);
  if (!f.init()) return false;
  const uint64_t sym0 = agSym(), ring0 = agRing();
  // 4000 per rank: 8 ranks stay under the 128 KiB threshold (4099 would not).
  const size_t counts[] = {0, 1, 7, 1000, 4000};
  uint64_t expectSym = 0;
  for (size_t count : counts)
    for (bool inPlace : {false, true}) {
      if (!f.allGather(count, inPlace, false, "allgather")) return false;
      if (count > 0) expectSym += (uint64_t)n;
    }
  const uint64_t sym1 = agSym(), ring1 = agRing();
  if (gExpectOff) {
    CHECK(sym1 == sym0, "%d ranks: UNICCL_SYMMETRIC=0, yet %llu AllGathers took the symmetric path", n,
          (unsigned long long)(sym1 - sym0));
  } else {
    CHECK(sym1 - sym0 == expectSym, "%d ranks: %llu AllGathers on the symmetric path, want %llu", n,
          (unsigned long long)(sym1 - sym0), (unsigned long long)expectSym);
    CHECK(ring1 == ring0, "%d ranks: %llu AllGathers on the ring, want none", n, (unsigned long long)(ring1 - ring0));
  }
  // Output in no window: the ring.
  if (!f.allGather(1000, false, true, "allgather-plain-recv")) return false;
  CHECK(agSym() == sym1, "%d ranks: an AllGather into a buffer in no window took the symmetric path", n);
  CHECK(agRing() - ring1 == (uint64_t)n, "%d ranks: %llu AllGathers on the ring, want %d", n,
        (unsigned long long)(agRing() - ring1), n);
  return true;
}

uint64_t rsSym() { return uniccl::tuningDecisions(TaskKind::ReduceScatter, dev::kAlgoSymmetric); }
uint64_t rsRing() { return uniccl::tuningDecisions(TaskKind::ReduceScatter, dev::kAlgoRing); }

bool testReduceScatter(int n) {
  Fixture f(n);
  if (!f.init()) return false;
  const uint64_t sym0 = rsSym(), ring0 = rsRing();
  const ncclRedOp_t ops[] = {ncclSum, ncclMax, ncclProd, ncclMin};
  // Per rank: 8 ranks x 1000 floats stay under the 128 KiB threshold.
  const size_t counts[] = {0, 1, 7, 1000};
  uint64_t expectSym = 0;
  for (ncclRedOp_t op : ops)
    for (size_t count : counts)
      for (bool inPlace : {false, true}) {
        if (!f.reduceScatter(count, op, inPlace, false, false, "reducescatter")) return false;
        if (count > 0) expectSym += (uint64_t)n;
      }
  const uint64_t sym1 = rsSym(), ring1 = rsRing();
  if (gExpectOff) {
    CHECK(sym1 == sym0, "%d ranks: UNICCL_SYMMETRIC=0, yet %llu ReduceScatters took the symmetric path", n,
          (unsigned long long)(sym1 - sym0));
  } else {
    CHECK(sym1 - sym0 == expectSym, "%d ranks: %llu ReduceScatters on the symmetric path, want %llu", n,
          (unsigned long long)(sym1 - sym0), (unsigned long long)expectSym);
    CHECK(ring1 == ring0, "%d ranks: %llu ReduceScatters on the ring, want none", n,
          (unsigned long long)(ring1 - ring0));
  }
  // Output in no window, then input in no window: the ring.
  if (!f.reduceScatter(1000, ncclSum, false, false, true, "reducescatter-plain-recv")) return false;
  if (!f.reduceScatter(1000, ncclMax, false, true, false, "reducescatter-plain-send")) return false;
  CHECK(rsSym() == sym1, "%d ranks: a ReduceScatter with a buffer in no window took the symmetric path", n);
  CHECK(rsRing() - ring1 == 2 * (uint64_t)n, "%d ranks: %llu ReduceScatters on the ring, want %d", n,
        (unsigned long long)(rsRing() - ring1), 2 * n);
  return true;
}

bool testAbort(int n) {
  Fixture f(n);
  if (!f.init()) return false;
  // The barrier works first (epochs advanced), then a rank waits alone.
  if (!f.run({{1000, ncclSum, false, false, 0}}, "before-abort")) return false;
  return f.abortWhileWaiting();
}

}  // namespace

int main(int argc, char** argv) {
  uniccl::countTuningDecisions();
  uniccl::emu::installCpuKernelRunner();
  std::vector<int> rankCounts = {2, 3, 8};
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--ranks=", 8)) rankCounts = {atoi(argv[i] + 8)};
    else if (!strcmp(argv[i], "--expect-off")) gExpectOff = true;
    else {
      fprintf(stderr, "usage: %s [--ranks=N] [--expect-off]\n", argv[0]);
      return 2;
    }
  }
  for (int n : rankCounts) {
    fprintf(stderr, "-- %d ranks\n", n);
    testRanks(n);
    testAllGather(n);
    testReduceScatter(n);
  }
  if (!gExpectOff) {
    fprintf(stderr, "-- abort while rank 0 waits in the barrier\n");
    testAbort(rankCounts[0] >= 2 ? rankCounts[0] : 2);
  }
  if (testcheck::failures()) {
    fprintf(stderr, "%d failure(s)\n", testcheck::failures());
    return 1;
  }
  printf("OK\n");
  return 0;
}
