// Collective timeouts on real GPUs (suite 'gpu'; exits 77 without 2 GPUs).
// Two GPUs driven from one process (ncclCommInitAll), UNICCL_TIMEOUT=2 s.
// `watchdog_gpu_test --ranks=N` runs N ranks wrapped over the visible GPUs
// (rank r on GPU r % GPUs, UNICCL_RANKS_PER_GPU set when ranks share one),
// so the same cases run on one GPU; "rank 1" below then means every rank
// but rank 0:
//   (a) eager: only rank 0 calls AllReduce -> its comm gets ncclRemoteError
//       within timeout + a poll or two, the log names the collective, the
//       kernel exits (stream completes) and ncclCommAbort returns promptly;
//   (b) the same inside a graph replay;
//   (c) no false timeout: 1000 replays of a graph of small AllReduces on both
//       ranks, then eager AllReduces queued back to back for longer than the
//       timeout in total (queued time must not count);
//   (d) 300 capture/replay/destroy cycles (more than a comm's graph slots,
//       so slots are reused): tracked graphs, graph release hooks and device
//       memory do not grow.
// Links the library's archives (not the .so) to read the watchdog's counters.
// Prints one line per case and "N passed, M failed"; exits 0, 1 or 77.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "nccl.h"
#include "common/watchdog/watchdog.h"
#include "../coll/rt.h"
#include "test_check.h"


namespace {

namespace rt = colltest::rt;
using Clock = std::chrono::steady_clock;

constexpr int kTimeoutSec = 2;
constexpr int kPollMs = 50;
int gFails = 0, gPassed = 0;
std::string gLogPath;
std::vector<int> gDevs = {0, 1};   // rank -> GPU (a GPU repeats when ranks share it)
bool gShared = false;              // some GPU holds several ranks
int nRanks() { return (int)gDevs.size(); }
std::vector<int> distinctDevs() {
  std::vector<int> d = gDevs;
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  return d;
}

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }


struct Rank {
  ncclComm_t comm = nullptr;
  rtStream stream = nullptr;
  float* buf = nullptr;
};

bool setup(std::vector<Rank>* ranks, size_t floats) {
  const int n = nRanks();
  ranks->assign(n, Rank{});
  std::vector<ncclComm_t> comms(n);
  NCCL_OK(ncclCommInitAll(comms.data(), n, gDevs.data()));
  for (int r = 0; r < n; r++) {
    Rank& k = (*ranks)[r];
    k.comm = comms[r];
    RT_OK(rt::err(COLLTEST_RT(SetDevice)(gDevs[r])));
    RT_OK(rt::err(COLLTEST_RT(StreamCreateWithFlags)(&k.stream, 1 /* non-blocking */)));
    RT_OK(rt::err(COLLTEST_RT(Malloc)((void**)&k.buf, floats * sizeof(float))));
    std::vector<float> h(floats);
    for (size_t i = 0; i < floats; i++) h[i] = (float)((i * 7 + r * 13) % 31);
    RT_OK(rt::err(COLLTEST_RT(Memcpy)(k.buf, h.data(), floats * sizeof(float), COLLTEST_RT_H2D)));
  }
  return true;
}

// Aborts every comm (each within a bound) and frees buffers and streams.
bool teardown(std::vector<Rank>* ranks, bool abort) {
  for (int r = 0; r < nRanks(); r++) {
    Rank& k = (*ranks)[r];
    Clock::time_point t0 = Clock::now();
    if (abort) NCCL_OK(ncclCommAbort(k.comm));
    else NCCL_OK(ncclCommDestroy(k.comm));
    REQUIRE(secondsSince(t0) < 10, "rank %d: %s took %.1f s", r, abort ? "ncclCommAbort" : "ncclCommDestroy",
            secondsSince(t0));
    RT_OK(rt::err(COLLTEST_RT(SetDevice)(gDevs[r])));
    RT_OK(rt::err(COLLTEST_RT(StreamDestroy)(k.stream)));
    RT_OK(rt::err(COLLTEST_RT(Free)(k.buf)));
  }
  return true;
}

// Waits until comm reports an async error; returns the seconds it took (or -1).
double waitAsyncError(ncclComm_t comm, double limitSec, ncclResult_t* err) {
  Clock::time_point t0 = Clock::now();
  while (secondsSince(t0) < limitSec) {
    if (ncclCommGetAsyncError(comm, err) != ncclSuccess) return -1;
    if (*err != ncclSuccess && *err != ncclInProgress) return secondsSince(t0);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

// The stream must finish on its own once the abort flag is up.
bool streamFinishes(rtStream s, double limitSec) {
  Clock::time_point t0 = Clock::now();
  while (secondsSince(t0) < limitSec) {
    rtError e = COLLTEST_RT(StreamQuery)(s);
    if (e != COLLTEST_RT(ErrorNotReady)) {
      (void)COLLTEST_RT(GetLastError)();
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::string logText() {
  std::ifstream f(gLogPath);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool checkTimeoutFired(const std::vector<Rank>& ranks, Clock::time_point issued, size_t logBefore, bool graph) {
  ncclResult_t err = ncclSuccess;
  double waited = waitAsyncError(ranks[0].comm, kTimeoutSec + 10, &err);
  double sinceIssue = secondsSince(issued);
  REQUIRE(waited >= 0, "no async error within %d s", kTimeoutSec + 10);
  REQUIRE(err == ncclRemoteError, "async error %s, expected ncclRemoteError", ncclGetErrorString(err));
  REQUIRE(sinceIssue >= kTimeoutSec - 0.1, "fired after %.2f s, before the %d s timeout", sinceIssue, kTimeoutSec);
  // Timeout + up to two polls (first sighting, then the one past the limit) + launch latency.
  REQUIRE(sinceIssue <= kTimeoutSec + 2.0 * kPollMs / 1000 + 1.0, "fired only after %.2f s", sinceIssue);
  printf("  timeout fired %.2f s after the launch\n", sinceIssue);
  for (int r = 1; r < nRanks(); r++) {
    ncclResult_t other = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(ranks[r].comm, &other));
    REQUIRE(other == ncclSuccess, "rank %d (no work) has async error %s", r, ncclGetErrorString(other));
  }
  REQUIRE(streamFinishes(ranks[0].stream, 10), "rank 0's stream did not finish after the abort flag");
  std::string log = logText().substr(logBefore);
  REQUIRE(log.find("AllReduce(float, count 65536, seq 0") != std::string::npos, "log does not name the collective:\n%s",
          log.c_str());
  REQUIRE(!graph || log.find("graph replay") != std::string::npos, "log does not say graph replay:\n%s", log.c_str());
  // Later calls fail with the async error.
  ncclResult_t r = ncclAllReduce(ranks[0].buf, ranks[0].buf, 16, ncclFloat32, ncclSum, ranks[0].comm, ranks[0].stream);
  REQUIRE(r == ncclRemoteError, "a call after the timeout returned %s", ncclGetErrorString(r));
  return true;
}

bool testEager() {
  std::vector<Rank> ranks;
  if (!setup(&ranks, 65536)) return false;
  size_t logBefore = logText().size();
  RT_OK(rt::err(COLLTEST_RT(SetDevice)(gDevs[0])));
  Clock::time_point issued = Clock::now();
  NCCL_OK(ncclAllReduce(ranks[0].buf, ranks[0].buf, 65536, ncclFloat32, ncclSum, ranks[0].comm, ranks[0].stream));
  bool ok = checkTimeoutFired(ranks, issued, logBefore, false);
  return teardown(&ranks, true) && ok;
}

bool testGraph() {
  std::vector<Rank> ranks;
  if (!setup(&ranks, 65536)) return false;
  size_t logBefore = logText().size();
  RT_OK(rt::err(COLLTEST_RT(SetDevice)(gDevs[0])));
  rtGraph g = nullptr;
  rtGraphExec exec = nullptr;
  RT_OK(rt::err(COLLTEST_RT(StreamBeginCapture)(ranks[0].stream, COLLTEST_RT_CAPTURE_GLOBAL)));
  ncclResult_t r = ncclAllReduce(ranks[0].buf, ranks[0].buf, 65536, ncclFloat32, ncclSum, ranks[0].comm,
                                 ranks[0].stream);
  RT_OK(rt::err(COLLTEST_RT(StreamEndCapture)(ranks[0].stream, &g)));
  REQUIRE(r == ncclSuccess, "captured AllReduce -> %s", ncclGetErrorString(r));
  RT_OK(rt::err(COLLTEST_RT(GraphInstantiateWithFlags)(&exec, g, 0)));
  Clock::time_point issued = Clock::now();
  RT_OK(rt::err(COLLTEST_RT(GraphLaunch)(exec, ranks[0].stream)));
  bool ok = checkTimeoutFired(ranks, issued, logBefore, true);
  RT_OK(rt::err(COLLTEST_RT(GraphExecDestroy)(exec)));
  RT_OK(rt::err(COLLTEST_RT(GraphDestroy)(g)));
  return teardown(&ranks, true) && ok;
}

// Captures `perGraph` AllReduces of `floats` on each rank (one graph per rank).
bool captureAll(std::vector<Rank>& ranks, size_t floats, int perGraph, std::vector<rtGraph>& g,
                std::vector<rtGraphExec>& exec) {
  const int n = nRanks();
  g.assign(n, nullptr);
  exec.assign(n, nullptr);
  for (int r = 0; r < n; r++) {
    RT_OK(rt::err(COLLTEST_RT(SetDevice)(gDevs[r])));
    RT_OK(rt::err(COLLTEST_RT(StreamBeginCapture)(ranks[r].stream, COLLTEST_RT_CAPTURE_GLOBAL)));
  }
  NCCL_OK(ncclGroupStart());
  for (int i = 0; i < perGraph; i++)
    for (int r = 0; r < n; r++)
      NCCL_OK(ncclAllReduce(ranks[r].buf, ranks[r].buf, floats, ncclFloat32, ncclMax, ranks[r].comm, ranks[r].stream));
  NCCL_OK(ncclGroupEnd());
  // Every capture ends before any instantiation: global capture mode forbids
  // instantiating while another stream of the process is still capturing.
  for (int r = 0; r < n; r++) {
    RT_OK(rt::err(COLLTEST_RT(SetDevice)(gDevs[r])));
    RT_OK(rt::err(COLLTEST_RT(StreamEndCapture)(ranks[r].stream, &g[r])));
  }
  for (int r = 0; r < n; r++) {
    RT_OK(rt::err(COLLTEST_RT(SetDevice)(gDevs[r])));
    RT_OK(rt::err(COLLTEST_RT(GraphInstantiateWithFlags)(&exec[r], g[r], 0)));
  }
  return true;
}

void destroyGraphs(std::vector<rtGraph>& g, std::vector<rtGraphExec>& exec) {
  for (size_t r = 0; r < g.size(); r++) {
    // Teardown: a failure here cannot change the test's verdict.
    (void)COLLTEST_RT(SetDevice)(gDevs[r]);
    if (exec[r]) (void)COLLTEST_RT(GraphExecDestroy)(exec[r]);
    if (g[r]) (void)COLLTEST_RT(GraphDestroy)(g[r]);
  }
  g.clear();
  exec.clear();
}

bool noAsyncError(const std::vector<Rank>& ranks) {
  for (int r = 0; r < nRanks(); r++) {
    ncclResult_t e = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(ranks[r].comm, &e));
    REQUIRE(e == ncclSuccess, "rank %d has async error %s", r, ncclGetErrorString(e));
  }
  return true;
}

bool testNoFalseTimeout() {
  std::vector<Rank> ranks;
  const size_t big = 64u << 20;   // floats: 256 MB
  if (!setup(&ranks, big)) return false;
  const int n = nRanks();
  std::vector<rtGraph> g;
  std::vector<rtGraphExec> exec;
  if (!captureAll(ranks, 4096, 4, g, exec)) return false;
  Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 1000; i++)
    for (int r = 0; r < n; r++) RT_OK(rt::err(COLLTEST_RT(GraphLaunch)(exec[r], ranks[r].stream)));
  for (int r = 0; r < n; r++) RT_OK(rt::err(COLLTEST_RT(StreamSynchronize)(ranks[r].stream)));
  printf("  1000 replays of 4 AllReduces in %.2f s\n", secondsSince(t0));
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * kPollMs));
  if (!noAsyncError(ranks)) return false;

  // One large AllReduce to time, then enough of them back to back to keep
  // the GPUs busy for ~1.5x the timeout: each is short, the queue is long.
  auto eager = [&]() -> bool {
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; r++)
      NCCL_OK(ncclAllReduce(ranks[r].buf, ranks[r].buf, big, ncclFloat32, ncclMax, ranks[r].comm, ranks[r].stream));
    NCCL_OK(ncclGroupEnd());
    return true;
  };
  t0 = Clock::now();
  if (!eager()) return false;
  for (int r = 0; r < n; r++) RT_OK(rt::err(COLLTEST_RT(StreamSynchronize)(ranks[r].stream)));
  double one = secondsSince(t0);
  int queued = (int)std::min(4000.0, std::max(4.0, 1.5 * kTimeoutSec / std::max(one, 1e-4)));
  t0 = Clock::now();
  for (int i = 0; i < queued; i++)
    if (!eager()) return false;
  for (int r = 0; r < n; r++) RT_OK(rt::err(COLLTEST_RT(StreamSynchronize)(ranks[r].stream)));
  double total = secondsSince(t0);
  printf("  %d eager 256 MB AllReduces queued back to back ran %.2f s (one: %.3f s)\n", queued, total, one);
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * kPollMs));
  if (!noAsyncError(ranks)) return false;
  destroyGraphs(g, exec);
  return teardown(&ranks, false);
}

// A graph whose collective runs longer than half the
// timeout, replayed 1000 times: timers restart with every replay, so the
// total (seconds) never counts, only one replay's collective (ms) does.
bool testLongCollectivesInReplays() {
  std::vector<Rank> ranks;
  const int n = nRanks();
  // floats: 2 GiB, ~5.9 ms per graph AllReduce on 2 H200 (365 GB/s; NVLink's
  // SM ceiling keeps it above 5 ms), against a 10 ms timeout.
  size_t big = (size_t)512 << 20;
  const double timeoutMs = 10.0, targetMs = 7.0;
  if (gShared) {
    // Ranks sharing a GPU move data through its memory at a speed that
    // depends on how many share it: size the collective from a measured
    // replay (under the default timeout) so that it lands near 7 ms.
    const size_t probe = (size_t)64 << 20;   // 256 MB
    if (!setup(&ranks, probe)) return false;
    std::vector<rtGraph> g;
    std::vector<rtGraphExec> exec;
    if (!captureAll(ranks, probe, 1, g, exec)) return false;
    for (int r = 0; r < n; r++) RT_OK(rt::err(COLLTEST_RT(GraphLaunch)(exec[r], ranks[r].stream)));   // warm-up
    for (int r = 0; r < n; r++) RT_OK(rt::err(COLLTEST_RT(StreamSynchronize)(ranks[r].stream)));
    Clock::time_point t0 = Clock::now();
    const int kProbeReplays = 10;
    for (int i = 0; i < kProbeReplays; i++)
      for (int r = 0; r < n; r++) RT_OK(rt::err(COLLTEST_RT(GraphLaunch)(exec[r], ranks[r].stream)));
    for (int r = 0; r < n; r++) RT_OK(rt::err(COLLTEST_RT(StreamSynchronize)(ranks[r].stream)));
    const double probeMs = secondsSince(t0) * 1e3 / kProbeReplays;
    destroyGraphs(g, exec);
    if (!teardown(&ranks, false)) return false;
    big = std::min(big, std::max<size_t>(1u << 20, (size_t)((double)probe * targetMs / std::max(probeMs, 1e-3))));
    big &= ~(size_t)1023;
    printf("  %d ranks share GPUs: 256 MB AllReduce replays take %.2f ms, so %zu MB for ~%.0f ms\n", n, probeMs,
           big * sizeof(float) >> 20, targetMs);
  }
  setenv("UNICCL_TIMEOUT_MS", "10", 1);
  setenv("UNICCL_WATCHDOG_POLL_MS", "1", 1);
  bool ok = setup(&ranks, big);
  unsetenv("UNICCL_TIMEOUT_MS");
  setenv("UNICCL_WATCHDOG_POLL_MS", "50", 1);
  if (!ok) return false;
  std::vector<rtGraph> g;
  std::vector<rtGraphExec> exec;
  if (!captureAll(ranks, big, 1, g, exec)) return false;
  Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 1000 && ok; i++)
    for (int r = 0; r < n; r++) ok = ok && COLLTEST_RT(GraphLaunch)(exec[r], ranks[r].stream) == COLLTEST_RT_SUCCESS;
  for (int r = 0; r < n; r++) ok = ok && COLLTEST_RT(StreamSynchronize)(ranks[r].stream) == COLLTEST_RT_SUCCESS;
  double perReplayMs = secondsSince(t0) * 1e3 / 1000;
  printf("  1000 replays, %.2f ms each (timeout %.0f ms)\n", perReplayMs, timeoutMs);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ok = ok && noAsyncError(ranks);
  destroyGraphs(g, exec);
  ok = teardown(&ranks, false) && ok;
  REQUIRE(ok, "graph launches, synchronisation or the async-error check failed (see above)");
  REQUIRE(perReplayMs > timeoutMs / 2, "each collective ran %.2f ms, not longer than half the timeout", perReplayMs);
  return true;
}

bool testCaptureDestroyCycles() {
  std::vector<Rank> ranks;
  if (!setup(&ranks, 4096)) return false;
  const int n = nRanks();
  const std::vector<int> devs = distinctDevs();
  // Warm up once (first capture may allocate runtime state), then measure.
  std::vector<rtGraph> g;
  std::vector<rtGraphExec> exec;
  std::vector<size_t> freeBefore(devs.size()), freeAfter(devs.size());
  size_t total;
  uniccl::WatchdogStats before{}, after{};
  for (int cycle = -1; cycle < 300; cycle++) {
    if (cycle == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3 * kPollMs));
      before = uniccl::watchdogStatsForTesting();
      for (size_t d = 0; d < devs.size(); d++) {
          RT_OK(rt::err(COLLTEST_RT(SetDevice)(devs[d])));
          RT_OK(rt::err(COLLTEST_RT(MemGetInfo)(&freeBefore[d], &total)));
      }
    }
    if (!captureAll(ranks, 4096, 1 + (cycle & 1), g, exec)) return false;
    for (int r = 0; r < n; r++) RT_OK(rt::err(COLLTEST_RT(GraphLaunch)(exec[r], ranks[r].stream)));
    for (int r = 0; r < n; r++) {
      RT_OK(rt::err(COLLTEST_RT(SetDevice)(gDevs[r])));
      RT_OK(rt::err(COLLTEST_RT(StreamSynchronize)(ranks[r].stream)));
    }
    destroyGraphs(g, exec);
  }
  // User-object destructors run asynchronously; the next polls clean up.
  Clock::time_point t0 = Clock::now();
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
    after = uniccl::watchdogStatsForTesting();
  } while ((after.graphs > 0 || after.graphReleaseFlags > before.graphReleaseFlags || after.eagerInFlight > 0) &&
           secondsSince(t0) < 10);
  printf("  graphs tracked %zu -> %zu, graph release hooks %zu -> %zu, eager launches in flight %zu\n", before.graphs,
         after.graphs, before.graphReleaseFlags, after.graphReleaseFlags, after.eagerInFlight);
  REQUIRE(after.graphs == 0, "%zu graphs still tracked", after.graphs);
  REQUIRE(after.graphReleaseFlags <= before.graphReleaseFlags, "graph release hooks grew %zu -> %zu",
          before.graphReleaseFlags, after.graphReleaseFlags);
  REQUIRE(after.eagerInFlight == 0, "%zu eager launches never seen complete", after.eagerInFlight);
  for (size_t d = 0; d < devs.size(); d++) {
    RT_OK(rt::err(COLLTEST_RT(SetDevice)(devs[d])));
    RT_OK(rt::err(COLLTEST_RT(MemGetInfo)(&freeAfter[d], &total)));
    long long grew = (long long)freeBefore[d] - (long long)freeAfter[d];
    printf("  GPU %d: device memory in use grew by %lld bytes\n", devs[d], grew);
    REQUIRE(grew <= (16ll << 20), "GPU %d: %lld bytes more device memory in use after 300 cycles", devs[d], grew);
  }
  if (!noAsyncError(ranks)) return false;
  return teardown(&ranks, false);
}

void run(const char* name, bool (*fn)()) {
  printf("%s\n", name);
  fflush(stdout);
  Clock::time_point t0 = Clock::now();
  bool ok = fn();
  printf("%s %s (%.1f s)\n", ok ? "PASS" : "FAIL", name, secondsSince(t0));
  fflush(stdout);
  (ok ? gPassed : gFails)++;
}

}  // namespace

int main(int argc, char** argv) {
  int want = 0;   // --ranks=N; 0: two ranks on two GPUs (the default)
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a.rfind("--ranks=", 0) == 0 && (want = atoi(a.c_str() + 8)) >= 2 && want <= 64) continue;
    fprintf(stderr, "usage: watchdog_gpu_test [--ranks=N]   (N >= 2 ranks wrapped over the visible GPUs)\n");
    return 2;
  }
  if (want > 0) rt::raiseWorkQueues();   // before the first runtime call
  const int ngpus = rt::deviceCount();
  if (want == 0 && ngpus < 2) {
    printf("watchdog_gpu_test: needs 2 GPUs (or --ranks=N to share fewer); skipped\n");
    return 77;
  }
  if (ngpus < 1) {
    printf("watchdog_gpu_test: no GPU; skipped\n");
    return 77;
  }
  if (want > 0) {
    gDevs.clear();
    for (int r = 0; r < want; r++) gDevs.push_back(r % ngpus);
    const int perGpu = (want + ngpus - 1) / ngpus;
    gShared = perGpu > 1;
    // Ranks sharing a GPU are opt-in: the switch goes in before the first init.
    if (gShared) setenv("UNICCL_RANKS_PER_GPU", std::to_string(perGpu).c_str(), 1);
  }
  printf("watchdog_gpu_test: %d ranks on %zu GPU(s)%s\n", nRanks(), distinctDevs().size(),
         gShared ? " (ranks share GPUs)" : "");
  // Before the first API call: small timeout, frequent polls, the log in a file we read.
  char path[128];
  snprintf(path, sizeof(path), "/tmp/uniccl_watchdog_test_%d.log", (int)getpid());
  gLogPath = path;
  setenv("UNICCL_TIMEOUT", "2", 1);
  setenv("UNICCL_WATCHDOG_POLL_MS", "50", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  // A hang in the library must fail the run, not stall CI (more ranks: more
  // inits and more data through one GPU's memory).
  const int limitSec = 85 + 10 * std::max(0, nRanks() - 2);
  std::thread([limitSec] {
    std::this_thread::sleep_for(std::chrono::seconds(limitSec));
    fprintf(stderr, "watchdog_gpu_test: still running after %d s; aborting\n", limitSec);
    std::_Exit(1);
  }).detach();
  run("eager: a collective one rank never joins times out", testEager);
  run("graph: the same collective in a graph replay times out", testGraph);
  run("no false timeout: 1000 replays, long eager queue", testNoFalseTimeout);
  run("no false timeout: 1000 replays of a collective longer than half the timeout", testLongCollectivesInReplays);
  run("300 capture/destroy cycles: no growth", testCaptureDestroyCycles);
  printf("%d passed, %d failed\n", gPassed, gFails);
  if (gFails == 0) unlink(path);
  else printf("library log kept in %s\n", path);
  return gFails == 0 ? 0 : 1;
}
