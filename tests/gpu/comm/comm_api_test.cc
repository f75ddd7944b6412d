// The communicator-management API end to end, all visible GPUs (up to 4, or
// argv[1]) in one process driven by one thread: the init flavours, split,
// finalize/destroy/abort, registration, PreMulSum, the documented unsupported
// calls, and a leak check over repeated init. Data is random integer-valued
// floats, so every correct reduction order gives the exact host reference.
// Ranks sharing one GPU (docs/gpu-sharing.md), always on GPU 0 alone: refused without
// the opt-in, working with UNICCL_RANKS_PER_GPU and ncclCommInitRankMulti,
// and refused with a message (not hung) when the ranks' blocks cannot all be
// resident.
// Prints one line per test and "N passed, M failed"; exits 0, 1, or 77 (no GPU).
#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "nccl_device.h"  // ncclWindow_vidmem (what a window handle points to)
#include "rccl/rccl.h"  // ncclCommInitRankMulti
#include "../coll/rt.h"
#include "test_check.h"

namespace {

namespace rt = colltest::rt;
using Clock = std::chrono::steady_clock;

// ---- watchdog: a hang in the library must fail the run, not stall CI ----
std::mutex gStepMutex;
std::string gStep = "startup";
Clock::time_point gStepDeadline = Clock::time_point::max();
constexpr int kStepSeconds = 60;

void step(const std::string& name) {
  std::lock_guard<std::mutex> lock(gStepMutex);
  gStep = name;
  gStepDeadline = Clock::now() + std::chrono::seconds(kStepSeconds);
}

void watchdog() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::lock_guard<std::mutex> lock(gStepMutex);
    if (Clock::now() > gStepDeadline) {
      fprintf(stderr, "comm_api_test: WATCHDOG: step '%s' took more than %d s; the library hangs. Aborting.\n",
              gStep.c_str(), kStepSeconds);
      fflush(stdout);
      std::_Exit(1);
    }
  }
}

std::mt19937 gRng;
float randInt() { return (float)(int)(gRng() % 201) - 100.0f; }   // [-100, 100]

// Communicators owned by a test; leftovers (after a failure) are aborted.
struct Comms : std::vector<ncclComm_t> {
  explicit Comms(int n) : std::vector<ncclComm_t>(n, nullptr) {}
  ~Comms() {
    for (ncclComm_t c : *this)
      if (c) ncclCommAbort(c);
  }
  bool destroyAll() {
    for (ncclComm_t& c : *this) {
      NCCL_OK(ncclCommDestroy(c));
      c = nullptr;
    }
    return true;
  }
};

// One rank's buffers and stream.
struct RankIo {
  int dev = -1;
  float* send = nullptr;
  float* recv = nullptr;
  rtStream stream = nullptr;
  ~RankIo() {
    if (dev < 0) return;
    rt::setDevice(dev);
    if (stream) rt::streamDestroy(stream);
    rt::free(send);
    rt::free(recv);
  }
};

// Polls ncclCommGetAsyncError until every comm reports ncclSuccess.
bool waitReady(const std::vector<ncclComm_t>& comms) {
  auto deadline = Clock::now() + std::chrono::seconds(kStepSeconds - 5);
  for (ncclComm_t c : comms) {
    ncclResult_t async = ncclInProgress;
    while (true) {
      NCCL_OK(ncclCommGetAsyncError(c, &async));
      if (async != ncclInProgress) break;
      REQUIRE(Clock::now() < deadline, "comm %p still ncclInProgress after %d s", (void*)c, kStepSeconds - 5);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(async == ncclSuccess, "async error of comm %p: %s", (void*)c, ncclGetErrorString(async));
  }
  return true;
}

bool checkIdentity(ncclComm_t c, int rank, int nranks, int dev) {
  REQUIRE(c != nullptr, "no communicator where rank %d of %d was expected", rank, nranks);
  int count = -1, got = -1, d = -1;
  NCCL_OK(ncclCommCount(c, &count));
  NCCL_OK(ncclCommUserRank(c, &got));
  NCCL_OK(ncclCommCuDevice(c, &d));
  REQUIRE(count == nranks && got == rank && d == dev, "comm %p: count/rank/device %d/%d/%d, expected %d/%d/%d",
          (void*)c, count, got, d, nranks, rank, dev);
  return true;
}

// One grouped AllReduce over `comms` (float, op ops[r] or ncclSum, each rank
// on its comm's device), checked element by element against scale * sum.
// With `simulate`, the group ends in ncclGroupSimulateEnd (an estimate, no
// launch) and the outputs must keep their prior (random) contents.
bool allReduceCheck(const std::vector<ncclComm_t>& comms, const std::vector<ncclRedOp_t>* ops = nullptr,
                    float scale = 1.0f, bool simulate = false) {
  const size_t count = (1u << 18) + 37, bytes = count * sizeof(float);
  const int n = (int)comms.size();
  std::vector<std::unique_ptr<RankIo>> io;
  std::vector<float> in(count), expect(count, 0.0f), prior(count), out(count);
  for (float& v : prior) v = randInt();
  for (int r = 0; r < n; r++) {
    io.push_back(std::make_unique<RankIo>());
    RankIo& x = *io.back();
    NCCL_OK(ncclCommCuDevice(comms[r], &x.dev));
    RT_OK(rt::setDevice(x.dev));
    RT_OK(rt::malloc((void**)&x.send, bytes));
    RT_OK(rt::malloc((void**)&x.recv, bytes));
    RT_OK(rt::streamCreate(&x.stream));
    for (size_t i = 0; i < count; i++) expect[i] += scale * (in[i] = randInt());
    RT_OK(rt::toDevice(x.send, in.data(), bytes));
    RT_OK(rt::toDevice(x.recv, prior.data(), bytes));
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    ncclRedOp_t op = ops ? (*ops)[r] : ncclSum;
    GROUPED_OK(ncclAllReduce(io[r]->send, io[r]->recv, count, ncclFloat32, op, comms[r], io[r]->stream));
  }
  if (simulate) {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    sim.estimatedTime = 12345.0f;   // must be overwritten
    NCCL_OK(ncclGroupSimulateEnd(&sim));
    // The tuning model's estimate (microseconds), as NCCL 2.28 gives it.
    CHECK(sim.estimatedTime > 0.0f && sim.estimatedTime < 1e6f && sim.estimatedTime != 12345.0f,
          "estimatedTime %g, expected the model's estimate (0 < t < 1e6 us, overwritten)", sim.estimatedTime);
    expect = prior;
  } else {
    ncclResult_t res = ncclGroupEnd();
    REQUIRE(res == ncclSuccess || res == ncclInProgress, "ncclGroupEnd -> %s: %s", ncclGetErrorString(res), testcheck::ncclLastError());
    if (res == ncclInProgress && !waitReady(comms)) return false;
  }
  for (int r = 0; r < n; r++) {
    RT_OK(rt::setDevice(io[r]->dev));
    RT_OK(rt::streamSync(io[r]->stream));
    RT_OK(rt::toHost(out.data(), io[r]->recv, bytes));
    for (size_t i = 0; i < count; i++)
      REQUIRE(out[i] == expect[i], "%s rank %d of %d: out[%zu] = %g, expected %g", simulate ? "simulated" : "AllReduce",
              r, n, i, out[i], expect[i]);
  }
  return true;
}

// ---- the tests ----
int gN = 1;   // ranks (GPUs) per test

bool testInitAll() {
  Comms c(gN);
  std::vector<int> devs(gN);
  for (int i = 0; i < gN; i++) devs[i] = gN - 1 - i;   // reversed: rank i on GPU n-1-i
  int bad = 99999;
  CHECK_ERR(ncclCommInitAll(c.data(), 1, &bad), ncclInvalidArgument, "ncclCommInitAll");
  NCCL_OK(ncclCommInitAll(c.data(), gN, devs.data()));
  for (int i = 0; i < gN; i++)
    if (!checkIdentity(c[i], i, gN, devs[i])) return false;
  return allReduceCheck(c) && c.destroyAll();
}

bool testGroupInit(bool scalable) {
  Comms c(gN);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  NCCL_OK(ncclGroupStart());
  for (int i = 0; i < gN; i++) {
    RT_OK(rt::setDevice(i));
    GROUPED_OK(scalable ? ncclCommInitRankScalable(&c[i], gN, i, 1, &id, nullptr) : ncclCommInitRank(&c[i], gN, id, i));
  }
  NCCL_OK(ncclGroupEnd());
  for (int i = 0; i < gN; i++)
    if (!checkIdentity(c[i], i, gN, i)) return false;
  return allReduceCheck(c) && c.destroyAll();
}

bool testNonBlockingInit() {
  Comms c(gN);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  // No group: a non-blocking init must return before its peers exist.
  for (int i = 0; i < gN; i++) {
    RT_OK(rt::setDevice(i));
    ncclResult_t r = ncclCommInitRankConfig(&c[i], gN, id, i, &cfg);
    REQUIRE(r == ncclSuccess || r == ncclInProgress, "non-blocking init rank %d -> %s", i, ncclGetErrorString(r));
    REQUIRE(c[i] != nullptr, "non-blocking init rank %d returned no comm", i);
  }
  if (!waitReady(c)) return false;
  for (int i = 0; i < gN; i++)
    if (!checkIdentity(c[i], i, gN, i)) return false;
  return allReduceCheck(c) && c.destroyAll();
}

bool testSplit() {
  Comms parent(gN), kids(gN), rest(gN);
  NCCL_OK(ncclCommInitAll(parent.data(), gN, nullptr));
  // color = rank % 2, key = -rank: each child orders its members in reverse.
  NCCL_OK(ncclGroupStart());
  for (int i = 0; i < gN; i++) GROUPED_OK(ncclCommSplit(parent[i], i % 2, -i, &kids[i], nullptr));
  NCCL_OK(ncclGroupEnd());
  std::vector<ncclComm_t> byColor[2];
  for (int i = 0; i < gN; i++) {
    int size = 0, newRank = 0;
    for (int j = 0; j < gN; j++) size += j % 2 == i % 2, newRank += j % 2 == i % 2 && j > i;
    if (!checkIdentity(kids[i], newRank, size, i)) return false;
    byColor[i % 2].push_back(kids[i]);
  }
  for (auto& group : byColor)
    if (!group.empty() && !allReduceCheck(group)) return false;

  // Rank 0 opts out; the others form one comm ordered by key = rank.
  int notAComm = 0;
  ncclComm_t optedOut = reinterpret_cast<ncclComm_t>(&notAComm);   // must be overwritten with NULL
  NCCL_OK(ncclGroupStart());
  for (int i = 0; i < gN; i++)
    GROUPED_OK(ncclCommSplit(parent[i], i == 0 ? NCCL_SPLIT_NOCOLOR : 7, i, i == 0 ? &optedOut : &rest[i], nullptr));
  NCCL_OK(ncclGroupEnd());
  REQUIRE(optedOut == nullptr, "NCCL_SPLIT_NOCOLOR did not set *newcomm to NULL");
  std::vector<ncclComm_t> others(rest.begin() + 1, rest.end());
  for (int i = 1; i < gN; i++)
    if (!checkIdentity(rest[i], i - 1, gN - 1, i)) return false;
  if (!others.empty() && !allReduceCheck(others)) return false;
  return kids.destroyAll() && rest.destroyAll() && parent.destroyAll();
}

bool testFinalizeAbort() {
  Comms c(gN);
  NCCL_OK(ncclCommInitAll(c.data(), gN, nullptr));
  if (!allReduceCheck(c)) return false;
  for (ncclComm_t comm : c) NCCL_OK(ncclCommFinalize(comm));
  RT_OK(rt::setDevice(0));
  CHECK_ERR(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, c[0], nullptr), ncclInvalidUsage,
            "finalized");
  if (!c.destroyAll()) return false;

  NCCL_OK(ncclCommInitAll(c.data(), gN, nullptr));
  if (!allReduceCheck(c)) return false;
  auto t0 = Clock::now();
  for (ncclComm_t& comm : c) {
    NCCL_OK(ncclCommAbort(comm));
    comm = nullptr;
  }
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(s < 5.0, "aborting %d healthy comms took %.1f s", gN, s);
  return true;
}

bool testMemory() {
  Comms c(1);
  int dev = 0;
  NCCL_OK(ncclCommInitAll(c.data(), 1, &dev));
  RT_OK(rt::setDevice(0));
  const size_t bytes = 1 << 20;
  void* buf = nullptr;
  void* handle = nullptr;
  NCCL_OK(ncclMemAlloc(&buf, bytes));
  REQUIRE(buf != nullptr, "ncclMemAlloc gave NULL");
  NCCL_OK(ncclCommRegister(c[0], buf, bytes, &handle));
  CHECK(handle != nullptr, "ncclCommRegister gave a NULL handle");
  NCCL_OK(ncclCommDeregister(c[0], handle));
  CHECK_ERR(ncclCommDeregister(c[0], handle), ncclInvalidArgument, "ncclCommDeregister");   // twice
  // ncclMemAlloc rounds up to the allocation granularity (2 MiB on Hopper), and
  // a range inside that mapping is registrable: 64x runs past it.
  CHECK_ERR(ncclCommRegister(c[0], buf, 64 * bytes, &handle), ncclInvalidArgument, "ncclCommRegister");
  std::vector<char> host(4096);
  CHECK_ERR(ncclCommRegister(c[0], host.data(), host.size(), &handle), ncclInvalidArgument, "ncclCommRegister");
  int bogus = 0;
  CHECK_ERR(ncclCommDeregister(c[0], &bogus), ncclInvalidArgument, "ncclCommDeregister");
  CHECK_ERR(ncclMemFree(host.data()), ncclInvalidArgument, "ncclMemFree");
  NCCL_OK(ncclMemFree(buf));
  return c.destroyAll();
}

bool testPreMulSum() {
  Comms c(gN);
  NCCL_OK(ncclCommInitAll(c.data(), gN, nullptr));
  const float scales[] = {0.25f, 0.5f, -0.5f, 2.0f, 4.0f};   // exact in float, never 1
  const float scale = scales[gRng() % 5];
  std::vector<ncclRedOp_t> ops(gN);
  for (int i = 0; i < gN; i++) {
    float s = scale;
    NCCL_OK(ncclRedOpCreatePreMulSum(&ops[i], &s, ncclFloat32, ncclScalarHostImmediate, c[i]));
    s = 1000.0f;   // a host-immediate scalar is read during the create call only
  }
  if (!allReduceCheck(c, &ops, scale)) return false;
  for (int i = 0; i < gN; i++) NCCL_OK(ncclRedOpDestroy(ops[i], c[i]));
  CHECK_ERR(ncclRedOpDestroy(ops[0], c[0]), ncclInvalidArgument, "ncclRedOpDestroy");
  CHECK_ERR(ncclRedOpDestroy(ncclSum, c[0]), ncclInvalidArgument, "ncclRedOpDestroy");
  RT_OK(rt::setDevice(0));
  void* buf = nullptr;
  NCCL_OK(ncclMemAlloc(&buf, 4096));
  ncclResult_t r = ncclAllReduce(buf, buf, 16, ncclFloat32, ops[0], c[0], nullptr);
  CHECK(r == ncclInvalidArgument, "AllReduce with a destroyed op -> %s", ncclGetErrorString(r));
  if (r == ncclSuccess) return false;   // a lone rank's kernel is in flight: let ~Comms abort it
  NCCL_OK(ncclMemFree(buf));
  return c.destroyAll();
}

// Symmetric windows on the GPU (VMM memory from ncclMemAlloc), registered
// in a group over every rank: each rank reads every peer's buffer through
// its own flat range. A buffer from the plain allocator fails every rank.
bool checkWindows(Comms& c) {
  const size_t bytes = 1 << 20;
  std::vector<void*> buf(gN, nullptr);
  std::vector<ncclWindow_t> win(gN, nullptr);
  bool ok = true;
  for (int r = 0; r < gN; r++) {
    RT_OK(rt::setDevice(r));
    NCCL_OK(ncclMemAlloc(&buf[r], bytes));
    RT_OK(rt::memset(buf[r], r + 1, bytes));
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < gN; r++) GROUPED_OK(ncclCommWindowRegister(c[r], buf[r], bytes, &win[r], NCCL_WIN_COLL_SYMMETRIC));
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < gN && ok; r++) {
    RT_OK(rt::setDevice(r));
    ncclWindow_vidmem v;
    RT_OK(rt::toHost(&v, win[r], sizeof(v)));
    CHECK(v.worldRank == r && v.stride4G >= 1, "rank %d: window says rank %d, stride4G %u", r, v.worldRank, v.stride4G);
    for (int p = 0; p < gN; p++) {
      unsigned char got[2] = {0, 0};
      const char* slot = v.lsaFlatBase + (size_t)(p - r + v.lsaRank) * ((size_t)v.stride4G << 32);
      RT_OK(rt::toHost(got, slot + bytes - 2, 2));
      CHECK(got[0] == p + 1 && got[1] == p + 1, "rank %d reads peer %d's window: %d %d", r, p, got[0], got[1]);
      ok = ok && got[0] == p + 1;
    }
  }
  for (int r = 0; r < gN; r++) NCCL_OK(ncclCommWindowDeregister(c[r], win[r]));
  // Plain device memory, aligned as windows must be (a misaligned buffer is
  // refused at the call, before the group's end): refused at the group's end
  // because peers cannot map it.
  std::vector<void*> plain(gN, nullptr), aligned(gN, nullptr);
  for (int r = 0; r < gN; r++) {
    RT_OK(rt::setDevice(r));
    RT_OK(rt::malloc(&plain[r], bytes + NCCL_WIN_REQUIRED_ALIGNMENT));
    const uintptr_t a = reinterpret_cast<uintptr_t>(plain[r]);
    aligned[r] = reinterpret_cast<void*>((a + NCCL_WIN_REQUIRED_ALIGNMENT - 1) / NCCL_WIN_REQUIRED_ALIGNMENT *
                                         NCCL_WIN_REQUIRED_ALIGNMENT);
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < gN; r++) GROUPED_OK(ncclCommWindowRegister(c[r], aligned[r], bytes, &win[r], NCCL_WIN_DEFAULT));
  CHECK_ERR(ncclGroupEnd(), ncclInvalidArgument, "ncclCommWindowRegister");
  for (int r = 0; r < gN; r++) {
    RT_OK(rt::setDevice(r));
    RT_OK(rt::free(plain[r]));
    NCCL_OK(ncclMemFree(buf[r]));
  }
  return ok;
}

bool testWindowsAndSimulate() {
  Comms c(gN);
  NCCL_OK(ncclCommInitAll(c.data(), gN, nullptr));
  if (!checkWindows(c)) return false;
  RT_OK(rt::setDevice(0));
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  CHECK_ERR(ncclGroupSimulateEnd(&sim), ncclInvalidUsage, "ncclGroupSimulateEnd");   // no group open
  // The simulated group must not run; the comms must still work after it.
  return allReduceCheck(c, nullptr, 1.0f, /*simulate=*/true) && allReduceCheck(c) && c.destroyAll();
}

int countFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) n++;
    closedir(d);
  }
  return n;
}

int countThreads() {
  int n = -1;
  if (FILE* f = fopen("/proc/self/status", "r")) {
    char line[256];
    while (fgets(line, sizeof(line), f))
      if (sscanf(line, "Threads: %d", &n) == 1) break;
    fclose(f);
  }
  return n;
}

bool testRepeatedInit() {
  const int kCycles = 20, kFdSlack = 4, kThreadSlack = 2;
  int fds0 = 0, threads0 = 0;
  for (int cycle = 0; cycle < kCycles; cycle++) {
    step("repeated-init cycle " + std::to_string(cycle));
    Comms c(gN);
    NCCL_OK(ncclCommInitAll(c.data(), gN, nullptr));
    if (!allReduceCheck(c) || !c.destroyAll()) return false;
    if (cycle == 0) fds0 = countFds(), threads0 = countThreads();
  }
  // Threads of destroyed comms may take a moment to exit.
  int fds = countFds(), threads = countThreads();
  for (int i = 0; i < 40 && (fds > fds0 + kFdSlack || threads > threads0 + kThreadSlack); i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fds = countFds(), threads = countThreads();
  }
  CHECK(fds <= fds0 + kFdSlack, "open fds grew from %d (after cycle 1) to %d after %d cycles", fds0, fds, kCycles);
  CHECK(threads <= threads0 + kThreadSlack, "threads grew from %d (after cycle 1) to %d after %d cycles", threads0,
        threads, kCycles);
  return true;
}

// Abort must also stop a collective that can never finish: rank 0 alone
// launches an AllReduce its peers never join. Last, as a failure here may
// leave a GPU busy.
bool testAbortInFlight() {
  if (gN < 2) return true;
  Comms c(gN);
  NCCL_OK(ncclCommInitAll(c.data(), gN, nullptr));
  RT_OK(rt::setDevice(0));
  void* buf = nullptr;
  NCCL_OK(ncclMemAlloc(&buf, 1 << 20));
  NCCL_OK(ncclAllReduce(buf, buf, (1 << 20) / sizeof(float), ncclFloat32, ncclSum, c[0], nullptr));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto t0 = Clock::now();
  for (ncclComm_t& comm : c) {
    NCCL_OK(ncclCommAbort(comm));
    comm = nullptr;
  }
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(s < 10.0, "aborting comms with a stuck AllReduce took %.1f s", s);
  RT_OK(rt::setDevice(0));
  RT_OK(rt::deviceSync());
  NCCL_OK(ncclMemFree(buf));
  return true;
}

// ---- ranks sharing GPU 0 ----

// Sets (value) or unsets (nullptr) an environment variable for one scope;
// the library reads its knobs at every init.
struct ScopedEnv {
  std::string name, old;
  bool had = false;
  ScopedEnv(const char* n, const char* value) : name(n) {
    const char* o = getenv(n);
    had = o != nullptr;
    if (had) old = o;
    if (value) setenv(n, value, 1);
    else unsetenv(n);
  }
  ~ScopedEnv() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

// k ranks on GPU 0 through RCCL's ncclCommInitRankMulti in one group (one
// thread makes them all: the inits meet only at ncclGroupEnd).
ncclResult_t initMultiOnGpu0(Comms& c, int k, int sameVirtualId) {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return r;
  if (rt::setDevice(0) != nullptr) return ncclUnhandledCudaError;
  ncclGroupStart();
  for (int i = 0; i < k && r == ncclSuccess; i++)
    r = ncclCommInitRankMulti(&c[i], k, id, i, sameVirtualId >= 0 ? sameVirtualId : i);
  ncclResult_t e = ncclGroupEnd();
  return r != ncclSuccess ? r : e;
}

// Without the opt-in two ranks on one GPU are refused, in every init flavour.
bool testShareRefused() {
  ScopedEnv off("UNICCL_RANKS_PER_GPU", nullptr);
  {
    Comms c(2);
    int devs[2] = {0, 0};
    CHECK_ERR(ncclCommInitAll(c.data(), 2, devs), ncclInvalidUsage, "Duplicate GPU detected");
    CHECK(c[0] == nullptr && c[1] == nullptr, "a refused ncclCommInitAll wrote communicators");
  }
  {
    Comms c(2);   // whatever the failed group init left is aborted on the way out
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    RT_OK(rt::setDevice(0));
    NCCL_OK(ncclGroupStart());
    for (int i = 0; i < 2; i++) GROUPED_OK(ncclCommInitRank(&c[i], 2, id, i));
    CHECK_ERR(ncclGroupEnd(), ncclInvalidUsage, "Duplicate GPU detected");
  }
  {
    Comms c(2);   // RCCL's opt-in needs a different virtualId per rank of a GPU
    CHECK_ERR(initMultiOnGpu0(c, 2, 7), ncclInvalidUsage, "virtualId");
  }
  {
    Comms c(1);
    RT_OK(rt::setDevice(0));
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    CHECK_ERR(ncclCommInitRankMulti(&c[0], 1, id, 0, -1), ncclInvalidArgument, "virtualId");
  }
  return true;
}

// The opt-in: k ranks on GPU 0 through UNICCL_RANKS_PER_GPU (ncclCommInitAll
// with a device list repeating GPU 0) and through ncclCommInitRankMulti
// without the variable; each communicator checked with an AllReduce.
bool testShareOptIn() {
  for (int k : {2, 3, 8}) {
    step("share-opt-in, " + std::to_string(k) + " ranks on GPU 0");
    {
      ScopedEnv on("UNICCL_RANKS_PER_GPU", std::to_string(k).c_str());
      Comms c(k);
      std::vector<int> devs(k, 0);
      NCCL_OK(ncclCommInitAll(c.data(), k, devs.data()));
      for (int i = 0; i < k; i++)
        if (!checkIdentity(c[i], i, k, 0)) return false;
      if (!allReduceCheck(c) || !c.destroyAll()) return false;
    }
    {
      ScopedEnv off("UNICCL_RANKS_PER_GPU", nullptr);
      Comms c(k);
      ncclResult_t r = initMultiOnGpu0(c, k, -1);
      REQUIRE(r == ncclSuccess, "ncclCommInitRankMulti x %d on GPU 0 -> %s: %s", k, ncclGetErrorString(r), testcheck::ncclLastError());
      for (int i = 0; i < k; i++)
        if (!checkIdentity(c[i], i, k, 0)) return false;
      if (!allReduceCheck(c) || !c.destroyAll()) return false;
    }
  }
  return true;
}

// ncclCommRevoke with AllReduces in flight, then ncclCommShrink around rank
// 1 (3 ranks sharing the visible GPUs): the revoked comms refuse
// collectives, the shrunk one computes, bad arguments are refused.
bool testRevokeShrink() {
  const int n = 3;
  const int ngpus = rt::deviceCount();
  ScopedEnv share("UNICCL_RANKS_PER_GPU", "3");
  Comms c(n);
  std::vector<int> devs(n);
  for (int i = 0; i < n; i++) devs[i] = i % ngpus;
  step("revoke-shrink: init");
  NCCL_OK(ncclCommInitAll(c.data(), n, devs.data()));
  // No allReduceCheck on these comms first: it destroys its streams, and a
  // comm orders a launch on a new stream after its last launch by recording
  // an event on that (destroyed) stream (README: known limitations).
  step("revoke-shrink: work in flight");
  std::vector<std::unique_ptr<RankIo>> io;
  const size_t count = 16u << 20;
  for (int r = 0; r < n; r++) {
    io.push_back(std::make_unique<RankIo>());
    RankIo& x = *io.back();
    x.dev = devs[r];
    RT_OK(rt::setDevice(x.dev));
    RT_OK(rt::streamCreate(&x.stream));
    RT_OK(rt::malloc((void**)&x.send, count * sizeof(float)));
  }
  NCCL_OK(ncclGroupStart());
  for (int k = 0; k < 4; k++)
    for (int r = 0; r < n; r++)
      NCCL_OK(ncclAllReduce(io[r]->send, io[r]->send, count, ncclFloat32, ncclSum, c[r], io[r]->stream));
  NCCL_OK(ncclGroupEnd());
  step("revoke-shrink: revoke");
  for (int r = 0; r < n; r++) NCCL_OK(ncclCommRevoke(c[r], NCCL_REVOKE_DEFAULT));
  for (int r = 0; r < n; r++) {
    ncclResult_t async = ncclInProgress;
    NCCL_OK(ncclCommGetAsyncError(c[r], &async));
    CHECK(async == ncclSuccess, "rank %d: async error %s after the revoke", r, ncclGetErrorString(async));
    RT_OK(rt::setDevice(devs[r]));
    RT_OK(rt::streamSync(io[r]->stream));   // the revoked kernels ended
  }
  CHECK_ERR(ncclAllReduce(io[0]->send, io[0]->send, 16, ncclFloat32, ncclSum, c[0], io[0]->stream), ncclInvalidUsage,
            "revoked");
  CHECK_ERR(ncclCommRevoke(c[0], 7), ncclInvalidArgument, "revokeFlags");
  int self = 0, one = 1;
  ncclComm_t bad = nullptr;
  CHECK_ERR(ncclCommShrink(c[0], &self, 1, &bad, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument, "exclude list");
  CHECK_ERR(ncclCommShrink(c[0], &one, 1, &bad, nullptr, 9), ncclInvalidArgument, "shrinkFlags");
  CHECK(bad == nullptr, "a refused ncclCommShrink set *newcomm");
  step("revoke-shrink: shrink");
  Comms s(2);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclCommShrink(c[0], &one, 1, &s[0], nullptr, NCCL_SHRINK_DEFAULT));
  NCCL_OK(ncclCommShrink(c[2], &one, 1, &s[1], nullptr, NCCL_SHRINK_DEFAULT));
  NCCL_OK(ncclGroupEnd());
  if (!checkIdentity(s[0], 0, 2, devs[0]) || !checkIdentity(s[1], 1, 2, devs[2])) return false;
  step("revoke-shrink: shrunk communicator");
  if (!allReduceCheck(s)) return false;
  step("revoke-shrink: destroy");
  return s.destroyAll() && c.destroyAll();
}

// Ranks whose blocks cannot all be resident would wait for each other
// forever: 8 ranks on GPU 0 that each ask for at least 128 channels must be
// refused at init with a message about the channels.
bool testShareNoFit() {
  ScopedEnv on("UNICCL_RANKS_PER_GPU", "8");
  ScopedEnv channels("NCCL_MIN_NCHANNELS", "128");
  Comms c(8);
  std::vector<int> devs(8, 0);
  auto t0 = Clock::now();
  CHECK_ERR(ncclCommInitAll(c.data(), 8, devs.data()), ncclInvalidUsage, "channels");
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(s < 30.0, "the refusal took %.1f s", s);
  return true;
}

}  // namespace

// A crash says in which step it happened, with the raw stack (addresses
// resolve with addr2line against the build's binaries).
void onCrash(int sig) {
  char msg[256];
  int n = snprintf(msg, sizeof(msg), "comm_api_test: signal %d during step '%s'\n", sig, gStep.c_str());
  ssize_t w = write(2, msg, n > 0 ? (size_t)n : 0);
  (void)w;
  void* frames[48];
  backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
  _exit(128 + sig);
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);   // progress lines reach the log before a crash
  signal(SIGSEGV, onCrash);
  signal(SIGABRT, onCrash);
  // Before the first runtime call: one host-to-GPU work queue per rank of the
  // share tests' 8 ranks on GPU 0 (a kernel queued behind another rank's
  // waiting kernel never starts).
  rt::raiseWorkQueues();
  int ngpus = rt::deviceCount();
  if (ngpus < 1) {
    printf("comm_api_test: no GPU visible; skipping\n");
    return 77;
  }
  gN = std::min(ngpus, argc > 1 ? std::max(1, atoi(argv[1])) : 4);
  unsigned seed = std::random_device{}();
  gRng.seed(seed);
  printf("comm_api_test: %d rank(s) on %d visible GPU(s) (%s), seed %u\n", gN, ngpus, COLLTEST_RT_BACKEND, seed);
  std::thread(watchdog).detach();

  struct Case { const char* name; bool (*fn)(); };
  const Case cases[] = {
      {"init-all", testInitAll},
      {"group-init", [] { return testGroupInit(false); }},
      {"group-init-scalable", [] { return testGroupInit(true); }},
      {"nonblocking-init", testNonBlockingInit},
      {"split", testSplit},
      {"finalize-abort", testFinalizeAbort},
      {"mem-register", testMemory},
      {"premulsum", testPreMulSum},
      {"revoke-shrink", testRevokeShrink},
      {"windows+simulate", testWindowsAndSimulate},
      {"repeated-init", testRepeatedInit},
      {"share-refused", testShareRefused},
      {"share-opt-in", testShareOptIn},
      {"share-no-fit", testShareNoFit},
      {"abort-inflight", testAbortInFlight},
  };
  int passed = 0, failed = 0;
  for (const Case& tc : cases) {
    testcheck::setFailPrefix(std::string("[") + tc.name + "] ");
    const int failuresBefore = testcheck::failures();
    step(tc.name);
    auto t0 = Clock::now();
    bool finished = tc.fn();
    if (!finished && testcheck::failures() == failuresBefore) ADD_FAILURE("stopped early without a reason");
    const bool ok = testcheck::failures() == failuresBefore;
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    printf("  %-22s %s %7.2f s\n", tc.name, ok ? "PASS" : "FAIL", s);
    fflush(stdout);
    (ok ? passed : failed)++;
  }
  step("exit");
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
