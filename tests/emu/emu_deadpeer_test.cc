// Dead peers on the CPU emulator: one forked process per
// rank, each with its own emulated runtime, rank r on emulated device r (the
// bus ids must differ, as on one real host); the
// transport comes from the environment meson sets (NET: the socket transport
// on lo with the proxy thread; SHM), or with --net=ib the IB transport on a
// fake fabric across the rank processes (deadpeer_fake_ib.h). The parent
// makes the unique id (which
// starts the bootstrap root thread here), never touches the emulated GPU, and
// referees through pipes; times cross processes as CLOCK_MONOTONIC
// nanoseconds (std::chrono::steady_clock).
//
// The kill cases run at the default settings (the watchdog's UNICCL_TIMEOUT
// of 600 s must not be shortened): the liveness links (common/liveness)
// report the dead rank. The bound is 10 s from the kill, generous for a
// report that takes milliseconds, so that a busy 2-core machine passes.
//
//   --case=allreduce  checked AllReduces, then large AllReduces in a loop; the
//                     parent kill -9's the victim (rank 1) after 0.3 s. Every survivor must
//                     see ncclCommGetAsyncError fail with ncclRemoteError (or a launch fail with
//                     it) within 10 s of the kill, the last error naming the victim,
//                     ncclCommAbort return within 5 s, its stream drain
//                     within 5 s, and then hold no more fds, emulated device
//                     memory, host allocations, IPC imports, mappings or
//                     /dev/shm segments of its own than before its init, no library thread, and exit 0.
//   --case=recv       (2 ranks) rank 1 sends to rank 0 in a loop, rank 0 only
//                     receives; rank 1 is killed. Rank 0's receive ends through
//                     the liveness report: same bounds.
//   --case=setup      the victim kills itself during its init, right after
//                     the bootstrap (once its liveness links are up, while the
//                     transports connect; with --net=ib at one of its first
//                     QPs, inside the IB handshakes); every survivor's
//                     ncclCommInitRank must fail with ncclRemoteError naming the victim within
//                     10 s, leaving nothing behind.
//   --case=abort      every rank keeps AllReduces in flight; the parent tells
//                     all ranks to abort at once and kill -9's the victim
//                     0-3 ms after it said it is calling ncclCommAbort (inside
//                     its abort). Every survivor's ncclCommAbort must return
//                     within 5 s, its stream drain, and nothing be left behind.
//   --victim=N        (allreduce, setup) the rank killed (default 1).
//   --root-in-rank0   rank 0 makes the unique id (the bootstrap root runs in
//                     its process) instead of the parent: with --victim=0 the
//                     rank hosting the root dies.
//   --case=orderly    (2 ranks) no kill: rank 1 sends 16 MiB to rank 0 and
//                     destroys its communicator as soon as its stream is
//                     done; rank 0 receives (posted late), checks every
//                     element, and destroys 0.5 s after rank 1 exited. Rank 0
//                     must see no async error, no WARN in its log (the closed
//                     connections are not a failure), and a successful destroy.
//   --case=shrink     as allreduce, then each survivor shrinks the communicator
//                     around the dead rank 1 (ncclCommShrink with
//                     NCCL_SHRINK_ABORT), runs checked AllReduces on the new
//                     one (nranks - 1 ranks, renumbered), destroys it and
//                     aborts the parent.
//   --case=revoke     no kill: every rank keeps AllReduces in flight, then
//                     revokes (ncclCommRevoke): it must return within 5 s with
//                     the stream drained and no async error, a collective on
//                     the revoked communicator must fail with ncclInvalidUsage,
//                     and a shrink that excludes nobody must give a working
//                     communicator (checked AllReduces) of the same ranks.
//   --ranks=N         (allreduce, shrink, revoke, setup, abort; default 2) rank 1 is the victim.
//   --net=ib          the network is IB (NCCL_NET=IB) on the fake fabric; the
//                     survivors must also have posted work requests through
//                     it and, after the abort, hold no QP, CQ or MR (the
//                     transport's device table keeps one context and PD).
//
// A victim killed after its connections were set up leaves no /dev/shm
// segment (the SHM transport unlinks each one once its peer opened it); only
// a death during setup may leave one (docs/reliability.md). The parent
// removes whatever is left either way.
//
// Every wait is bounded: a stuck case fails (the parent's alarm kills the
// children), it never hangs.
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu.h"
#include "common/liveness/peer_liveness.h"
#include "deadpeer_fake_ib.h"
#include "emu_gpu.h"
#include "emu_runtime.h"
#include "nccl.h"
#include "pipe_io.h"
#include "test_check.h"

using namespace uniccl;

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kCheckCount = 70001;   // checked operations: many steps with the small buffers meson sets
constexpr size_t kBigCount = 1u << 20;  // the looped operations (4 MiB)
constexpr size_t kFinalCount = 4u << 20;   // orderly: the last transfer (16 MiB) before rank 1's destroy
constexpr int kChecked = 5;
constexpr double kAbortLimitSec = 5.0;
constexpr double kDrainLimitSec = 5.0;
constexpr double kRevokeLimitSec = 25.0;
constexpr int kParentAlarmSec = 80;   // the whole case; meson's timeout is above it
// A SIGKILLed rank's exit is the kernel's work: every one of its threads must
// be scheduled once to die, which on a 2-core machine under a load of 50+
// took over 10 s. Not a bound on the library.
constexpr int kKillExitSec = 30;
constexpr double kDetectBoundSec = 10.0;   // kill -> survivor's error (see the top)

int gVictim = 1;
bool gRootInRank0 = false;
bool gIb = false;          // --net=ib
std::string gJobToken;     // names the fake fabric's sockets: the parent's pid

// An emulated runtime call's result as RT_OK reads it: nullptr, or the emulator's error text.
const char* gpuError(ncclResult_t r) { return r == ncclSuccess ? nullptr : emu::lastErrorString(); }

long long nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int countThreads() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

using testpipe::readUntil;
using testpipe::writeAll;

// Small integers as floats: sums are exact in any order.
std::vector<float> rankData(unsigned seed, int k, int rank, size_t count) {
  std::mt19937 rng(seed * 7919u + (unsigned)k * 64 + (unsigned)rank);
  std::vector<float> v(count);
  for (float& x : v) x = (float)(int)(rng() % 201) - 100.0f;
  return v;
}

enum class Case { AllReduce, Recv, Orderly, Shrink, Revoke, Setup, Abort };

// What each surviving rank tells the parent at the end.
struct Report {
  int ok = 0;
  int asyncErr = ncclSuccess;    // ncclCommGetAsyncError when the failure was seen
  int launchErr = ncclSuccess;   // a launch that failed instead (peer-gone check)
  long long detectNs = 0;
  long long ops = 0;             // looped operations launched before that
  long long firstOpNs = 0;       // when the first one was launched
  long long lastOpNs = 0;        // when the last one was (the watchdog times it from its start)
  double abortSec = -1, drainSec = -1, destroySec = -1;
  int threadsStart = 0, threadsRuntime = 0, threadsComm = 0, threadsEnd = 0;
  int warnLines = -1;            // orderly: NCCL WARN lines in rank 0's log
  // What the rank held with its runtime up, before its init, and after its
  // abort (or failed init): fds, its own /dev/shm segments, emulated objects.
  int fdsRuntime = 0, fdsEnd = 0, shmEnd = 0;
  emu::Usage usageRuntime{}, usageEnd{};
  deadpeer::FakeIbCount ibRuntime{}, ibEnd{};   // --net=ib
  char lastError[256] = {};      // ncclGetLastError when the failure was seen
};

int countFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1;   // the directory's own fd
}

// /dev/shm segments a process made (shm_segment.cc names them /uniccl-<pid>-...).
std::vector<std::string> shmSegmentsOf(pid_t pid) {
  std::vector<std::string> names;
  const std::string prefix = "uniccl-" + std::to_string(pid) + "-";
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return names;
  while (dirent* e = readdir(d))
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) names.push_back(e->d_name);
  closedir(d);
  return names;
}

void recordEnd(Report* rep) {
  rep->fdsEnd = countFds();
  rep->shmEnd = (int)shmSegmentsOf(getpid()).size();
  rep->usageEnd = emu::usage();
  rep->ibEnd = deadpeer::fakeIbCount();
  deadpeer::printFakeIbViolations(("FAIL " + testcheck::failPrefix()).c_str());
}

// The emulated device side of one rank: a stream and buffers, freed in order.
struct Side {
  gpu::Stream stream = nullptr;
  gpu::Event probe = nullptr;   // recorded to ask "is the stream idle?" without blocking
  bool probing = false;         // probe recorded, not yet seen complete
  std::vector<float*> bufs;
  bool init(int dev, std::vector<size_t> floats) {
    RT_OK(gpuError(gpu::setDevice(dev)));
    RT_OK(gpuError(gpu::streamCreate(&stream)));
    RT_OK(gpuError(gpu::eventCreate(&probe)));
    for (size_t n : floats) {
      void* p = nullptr;
      RT_OK(gpuError(gpu::deviceAlloc(&p, n * sizeof(float))));
      bufs.push_back(static_cast<float*>(p));
    }
    return true;
  }
  uniccl_stream_t api() const { return static_cast<uniccl_stream_t>(stream); }
  // 1: idle (what was enqueued before the probe has run), 0: busy, -1: failed.
  // The probe is recorded once and queried until it completes: recording it
  // again on every poll would ask the stream a new question each time, and
  // a poll right after its record would find it pending however idle the
  // stream is.
  int state() {
    if (!probing) {
      if (gpu::eventRecord(probe, stream) != ncclSuccess) return -1;
      probing = true;
    }
    ncclResult_t r = gpu::eventQuery(probe);
    if (r == ncclSuccess) probing = false;
    return r == ncclSuccess ? 1 : r == ncclInProgress ? 0 : -1;
  }
  void release() {
    // Teardown after a peer died: these may fail, and the test is about what came before.
    if (stream != nullptr) (void)gpu::streamSynchronize(stream);
    for (float* p : bufs) (void)gpu::deviceFree(p);
    bufs.clear();
    if (probe != nullptr) (void)gpu::eventDestroy(probe);
    probe = nullptr;
    if (stream != nullptr) (void)gpu::streamDestroy(stream);
    stream = nullptr;
  }
  ~Side() { release(); }
};

bool upload(Side& s, float* dst, const std::vector<float>& v) {
  RT_OK(gpuError(gpu::memcpyAsync(dst, v.data(), v.size() * sizeof(float), s.stream)));
  RT_OK(gpuError(gpu::streamSynchronize(s.stream)));
  return true;
}

bool checkedAllReduces(ncclComm_t comm, Side& s, int rank, int nranks, unsigned seed) {
  std::vector<float> out(kCheckCount);
  for (int k = 0; k < kChecked; k++) {
    std::vector<float> want(kCheckCount, 0.0f);
    for (int r = 0; r < nranks; r++) {
      std::vector<float> v = rankData(seed, k, r, kCheckCount);
      for (size_t i = 0; i < kCheckCount; i++) want[i] += v[i];
    }
    if (!upload(s, s.bufs[0], rankData(seed, k, rank, kCheckCount))) return false;
    if (!upload(s, s.bufs[1], rankData(seed, 100 + k, rank, kCheckCount))) return false;   // garbage to overwrite
    NCCL_OK(ncclAllReduce(s.bufs[0], s.bufs[1], kCheckCount, ncclFloat32, ncclSum, comm, s.api()));
    RT_OK(gpuError(gpu::memcpyAsync(out.data(), s.bufs[1], kCheckCount * sizeof(float), s.stream)));
    RT_OK(gpuError(gpu::streamSynchronize(s.stream)));
    // An aborted collective leaves partial results: say so instead of
    // reporting the first wrong element (on an overloaded machine the
    // watchdog's short UNICCL_TIMEOUT_MS can fire before any kill).
    ncclResult_t async = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comm, &async));
    REQUIRE(async == ncclSuccess, "checked AllReduce %d was aborted before any kill (%s): the watchdog fired; "
            "is the machine overloaded?", k, ncclGetErrorString(async));
    for (size_t i = 0; i < kCheckCount; i++)
      REQUIRE(out[i] == want[i], "checked AllReduce %d: out[%zu] = %g, expected %g", k, i, out[i], want[i]);
  }
  return true;
}

// Rank 1 -> rank 0, checked on rank 0.
bool checkedSendRecv(ncclComm_t comm, Side& s, int rank, unsigned seed) {
  std::vector<float> out(kCheckCount);
  for (int k = 0; k < kChecked; k++) {
    if (rank == 1) {
      if (!upload(s, s.bufs[0], rankData(seed, 200 + k, 1, kCheckCount))) return false;
      NCCL_OK(ncclSend(s.bufs[0], kCheckCount, ncclFloat32, 0, comm, s.api()));
      RT_OK(gpuError(gpu::streamSynchronize(s.stream)));
    } else {
      if (!upload(s, s.bufs[1], rankData(seed, 300 + k, 0, kCheckCount))) return false;
      NCCL_OK(ncclRecv(s.bufs[1], kCheckCount, ncclFloat32, 1, comm, s.api()));
      RT_OK(gpuError(gpu::memcpyAsync(out.data(), s.bufs[1], kCheckCount * sizeof(float), s.stream)));
      RT_OK(gpuError(gpu::streamSynchronize(s.stream)));
      ncclResult_t async = ncclSuccess;
      NCCL_OK(ncclCommGetAsyncError(comm, &async));
      REQUIRE(async == ncclSuccess, "checked recv %d was aborted before any kill (%s)", k, ncclGetErrorString(async));
      std::vector<float> want = rankData(seed, 200 + k, 1, kCheckCount);
      for (size_t i = 0; i < kCheckCount; i++)
        REQUIRE(out[i] == want[i], "checked recv %d: out[%zu] = %g, expected %g", k, i, out[i], want[i]);
    }
  }
  return true;
}

// A survivor after the 'ready' byte: keeps one looped operation in flight and
// polls the async error while the stream is busy, until the failure shows.
bool survive(Case c, ncclComm_t comm, Side& s, Report* rep) {
  const Clock::time_point t0 = Clock::now();
  while (true) {
    ncclResult_t async = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess) {
      rep->asyncErr = async;
      snprintf(rep->lastError, sizeof(rep->lastError), "%s", ncclGetLastError(comm));
      break;
    }
    REQUIRE(secondsSince(t0) < 20, "no error 20 s after the loop started (%lld operations)", rep->ops);
    int st = s.state();
    REQUIRE(st >= 0, "the stream failed (%s) instead of being stopped", emu::lastErrorString());
    if (st == 1) {
      ncclResult_t r = c == Case::Recv ? ncclRecv(s.bufs[2], kBigCount, ncclFloat32, 1, comm, s.api())
                                       : ncclAllReduce(s.bufs[2], s.bufs[2], kBigCount, ncclFloat32, ncclMax, comm, s.api());
      REQUIRE(r == ncclSuccess || r == ncclRemoteError, "looped operation -> %s: %s", ncclGetErrorString(r),
              ncclGetLastError(nullptr));
      if (r != ncclSuccess) {
        rep->launchErr = r;
        NCCL_OK(ncclCommGetAsyncError(comm, &async));
        rep->asyncErr = async;
        snprintf(rep->lastError, sizeof(rep->lastError), "%s", ncclGetLastError(comm));
        break;
      }
      rep->lastOpNs = nowNs();
      if (rep->ops++ == 0) rep->firstOpNs = rep->lastOpNs;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  rep->detectNs = nowNs();
  return true;
}

// Aborts the communicator, then waits (bounded) for the stream to drain.
bool abortAndDrain(ncclComm_t& comm, Side& s, Report* rep) {
  const Clock::time_point ta = Clock::now();
  ncclResult_t aborted = ncclCommAbort(comm);
  comm = nullptr;
  rep->abortSec = secondsSince(ta);
  NCCL_OK(aborted);
  int st;
  while ((st = s.state()) == 0 && secondsSince(ta) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  rep->drainSec = secondsSince(ta);
  REQUIRE(st == 1, "after ncclCommAbort the stream %s", st == 0 ? "is still busy after 10 s" : "failed");
  RT_OK(gpuError(gpu::streamSynchronize(s.stream)));   // returns at once now
  return true;
}

// The abort case, every rank: one AllReduce in flight at a time until the
// parent's 'A', then ncclCommAbort. The victim says 'a' right before its
// abort (the parent kills it within 3 ms) and 'd' should the abort return
// first; it never exits by itself.
bool abortTogether(ncclComm_t& comm, Side& s, int rank, int fromParent, int toParent, Report* rep) {
  const Clock::time_point t0 = Clock::now();
  bool launching = true;
  for (;;) {
    pollfd pfd{fromParent, POLLIN, 0};
    if (poll(&pfd, 1, 0) == 1) break;
    REQUIRE(secondsSince(t0) < 20, "no word to abort 20 s after the loop started (%lld operations)", rep->ops);
    const int st = s.state();
    REQUIRE(st >= 0, "the stream failed (%s) before the abort", emu::lastErrorString());
    if (launching && st == 1) {
      const ncclResult_t r = ncclAllReduce(s.bufs[2], s.bufs[2], kBigCount, ncclFloat32, ncclMax, comm, s.api());
      // A peer that began its abort first fails later launches: wait for the word.
      REQUIRE(r == ncclSuccess || r == ncclRemoteError, "looped AllReduce -> %s: %s", ncclGetErrorString(r),
              ncclGetLastError(nullptr));
      launching = r == ncclSuccess;
      if (launching) {
        rep->lastOpNs = nowNs();
        if (rep->ops++ == 0) rep->firstOpNs = rep->lastOpNs;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  char word = 0;
  REQUIRE(read(fromParent, &word, 1) == 1 && word == 'A', "expected the word to abort from the parent");
  if (rank == gVictim) {
    REQUIRE(writeAll(toParent, "a", 1), "cannot tell the parent it is aborting");
    ncclCommAbort(comm);
    comm = nullptr;
    writeAll(toParent, "d", 1);
    for (;;) pause();
  }
  ncclResult_t async = ncclSuccess;
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  rep->asyncErr = async;
  snprintf(rep->lastError, sizeof(rep->lastError), "%s", ncclGetLastError(comm));
  rep->detectNs = nowNs();
  return abortAndDrain(comm, s, rep);
}

// Shrinks `comm` without the ranks in `excluded`, checks AllReduces on the
// new communicator (this rank's place among the remaining ranks), destroys
// it. The parent stays for the caller to abort or destroy.
bool shrinkAndCheck(ncclComm_t comm, Side& s, int rank, int nranks, const std::vector<int>& excluded, int flags,
                    unsigned seed, Report* rep) {
  const Clock::time_point t0 = Clock::now();
  ncclComm_t child = nullptr;
  std::vector<int> list = excluded;
  NCCL_OK(ncclCommShrink(comm, list.data(), (int)list.size(), &child, nullptr, flags));
  rep->abortSec = secondsSince(t0);   // the shrink, including stopping the parent's work
  REQUIRE(child != nullptr, "ncclCommShrink succeeded without a communicator");
  int count = 0, newRank = -1;
  NCCL_OK(ncclCommCount(child, &count));
  NCCL_OK(ncclCommUserRank(child, &newRank));
  int expectRank = rank;
  for (int r : excluded) expectRank -= r < rank ? 1 : 0;
  REQUIRE(count == nranks - (int)excluded.size() && newRank == expectRank,
          "the shrunk communicator has %d ranks with this one as %d (expected %d, %d)", count, newRank,
          nranks - (int)excluded.size(), expectRank);
  const bool ok = checkedAllReduces(child, s, newRank, count, seed + 1);
  NCCL_OK(ncclCommDestroy(child));
  return ok;
}

// Every rank: AllReduces in flight, then a revoke (bounded, drained, no
// async error); the revoked comm refuses collectives and shrinks.
bool revokeAndCheck(ncclComm_t comm, Side& s, int rank, int nranks, unsigned seed, Report* rep) {
  for (int i = 0; i < 3; i++)
    NCCL_OK(ncclAllReduce(s.bufs[2], s.bufs[2], kBigCount, ncclFloat32, ncclMax, comm, s.api()));
  const Clock::time_point t0 = Clock::now();
  NCCL_OK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  rep->abortSec = secondsSince(t0);
  // Bounded, not fast: every rank's kernels spin with all peers alive, and on
  // a loaded 2-core machine their emulated threads take seconds to see the flag.
  REQUIRE(rep->abortSec < kRevokeLimitSec, "ncclCommRevoke took %.2f s", rep->abortSec);
  int st;
  while ((st = s.state()) == 0 && secondsSince(t0) < kRevokeLimitSec + 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  rep->drainSec = secondsSince(t0);
  REQUIRE(st == 1, "after ncclCommRevoke the stream %s", st == 0 ? "is still busy" : "failed");
  ncclResult_t async = ncclInProgress;
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  rep->asyncErr = async;
  REQUIRE(async == ncclSuccess, "async error %s after the revoke returned", ncclGetErrorString(async));
  ncclResult_t r = ncclAllReduce(s.bufs[2], s.bufs[2], kBigCount, ncclFloat32, ncclMax, comm, s.api());
  REQUIRE(r == ncclInvalidUsage && strstr(ncclGetLastError(nullptr), "revoked") != nullptr,
          "a collective on the revoked communicator -> %s (%s), expected ncclInvalidUsage naming the revoke",
          ncclGetErrorString(r), ncclGetLastError(nullptr));
  REQUIRE(ncclCommRevoke(comm, 1) == ncclInvalidArgument, "ncclCommRevoke with flags 1 was accepted");
  return shrinkAndCheck(comm, s, rank, nranks, {}, NCCL_SHRINK_DEFAULT, seed, rep);
}

// Rank 0 of the orderly case logs to a file, so that it can count WARN lines.
struct LogCapture {
  int saved = -1;
  FILE* file = nullptr;
  bool start() {
    file = tmpfile();
    REQUIRE(file != nullptr, "tmpfile failed");
    fflush(stderr);
    saved = dup(2);
    REQUIRE(saved >= 0 && dup2(fileno(file), 2) >= 0, "cannot redirect stderr");
    return true;
  }
  // Restores stderr, echoes the log there, returns the WARN lines.
  int finish() {
    if (saved < 0) return -1;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    saved = -1;
    rewind(file);
    char line[4096];
    int warns = 0;
    while (fgets(line, sizeof(line), file) != nullptr) {
      fputs(line, stderr);
      if (strstr(line, "WARN") != nullptr) warns++;
    }
    fclose(file);
    file = nullptr;
    return warns;
  }
  ~LogCapture() { finish(); }
};

int childMain(Case c, int rank, int nranks, ncclUniqueId id, unsigned seed, int toParent, int fromParent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);   // never outlive the parent (e.g. its alarm fired)
  alarm(40);
  testcheck::setFailPrefix("rank " + std::to_string(rank) + " (pid " + std::to_string(getpid()) + "): ");
  if (gRootInRank0) {
    // The bootstrap root runs in rank 0's process; the parent hands the id on.
    if (rank == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess || !writeAll(toParent, &id, sizeof(id))) return 1;
    } else if (readUntil(fromParent, &id, sizeof(id), Clock::now() + std::chrono::seconds(20)) != sizeof(id)) {
      return 1;
    }
  }
  Report rep;
  rep.threadsStart = countThreads();
  LogCapture log;
  auto body = [&]() -> bool {
    if (c == Case::Orderly && rank == 0 && !log.start()) return false;
    emu::installCpuKernelRunner();
    std::string ibError;
    REQUIRE(!gIb || deadpeer::installFakeIb(rank, gJobToken, &ibError), "cannot join the fake IB fabric: %s",
            ibError.c_str());
    Side s;
    // Device r in process r: the library refuses two ranks on one bus id of a host.
    if (!s.init(rank, {kCheckCount, kCheckCount, kBigCount, c == Case::Orderly ? kFinalCount : 1})) return false;
    if (!upload(s, s.bufs[2], rankData(seed, 999, rank, kBigCount))) return false;
    rep.threadsRuntime = countThreads();
    rep.fdsRuntime = countFds();
    rep.usageRuntime = emu::usage();
    rep.ibRuntime = deadpeer::fakeIbCount();
    // After `s`: a failure aborts the comm (stopping its kernels) before the stream is synced.
    struct Guard {
      ncclComm_t comm = nullptr;
      ~Guard() { if (comm) ncclCommAbort(comm); }
    } guard;
    ncclComm_t& comm = guard.comm;
    if (c == Case::Setup) {
      if (rank == gVictim && gIb) {
        // Dies inside its init at its k-th QP, in the middle of its IB
        // connections' handshakes (two channels per ring neighbour, a QP
        // per direction: 8 QPs with 3 ranks or more, 4 with 2).
        const int k = 1 + (int)(seed % (nranks == 2 ? 3 : 6));
        printf("  rank %d: dies at its QP %d\n", rank, k);
        fflush(stdout);
        deadpeer::onFakeIbQp([toParent, k](int created) {
          if (created < k) return;
          const long long ns = nowNs();
          if (writeAll(toParent, "K", 1)) writeAll(toParent, &ns, sizeof(ns));
          raise(SIGKILL);
        });
      } else if (rank == gVictim) {
        // Dies inside its init once its liveness links are up: the bootstrap
        // is over, the transports are connecting.
        std::thread([&comm, nranks, id, rank] {
          CHECK(gpu::setDevice(rank) == ncclSuccess, "the rank's device");   // the current device is per thread
          ncclCommInitRank(&comm, nranks, id, rank);
        }).detach();
        const Clock::time_point t0 = Clock::now();
        while (livenessStatsForTesting().sets == 0 && secondsSince(t0) < 30)
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        const long long ns = nowNs();
        if (writeAll(toParent, "K", 1)) writeAll(toParent, &ns, sizeof(ns));
        raise(SIGKILL);
      }
      const ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
      rep.detectNs = nowNs();
      if (r == ncclSuccess) {
        // The victim's init got through before its kill (possible, rare):
        // the steady-state report must come instead.
        printf("  rank %d: init completed before the victim died\n", rank);
        if (!survive(Case::AllReduce, comm, s, &rep)) return false;
        if (!abortAndDrain(comm, s, &rep)) return false;
      } else {
        comm = nullptr;   // a failed init frees its communicator
        rep.launchErr = r;
        snprintf(rep.lastError, sizeof(rep.lastError), "%s", ncclGetLastError(nullptr));
      }
      recordEnd(&rep);
      s.release();
      return true;
    }
    NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
    rep.threadsComm = countThreads();
    if (c == Case::Revoke) {
      if (!checkedAllReduces(comm, s, rank, nranks, seed)) return false;
      REQUIRE(writeAll(toParent, "R", 1), "cannot tell the parent it is ready");
      if (!revokeAndCheck(comm, s, rank, nranks, seed, &rep)) return false;
      NCCL_OK(ncclCommDestroy(comm));
      comm = nullptr;
      s.release();
      return true;
    }
    if (c == Case::Recv) {
      if (!checkedSendRecv(comm, s, rank, seed)) return false;
    } else {
      if (!checkedAllReduces(comm, s, rank, nranks, seed)) return false;
    }
    REQUIRE(writeAll(toParent, "R", 1), "cannot tell the parent it is ready");

    if (c == Case::Abort) {
      if (!abortTogether(comm, s, rank, fromParent, toParent, &rep)) return false;
      recordEnd(&rep);
      s.release();
      return true;
    }
    if (c == Case::Orderly) {
      // A last transfer right before rank 1's destroy: what rank 1's kernel
      // handed to the network must still arrive (rank 0 posts its receive
      // late, so the data is still on its way when rank 1 destroys).
      const std::vector<float> last = rankData(seed, 777, 1, kFinalCount);
      if (rank == 1) {
        if (!upload(s, s.bufs[3], last)) return false;
        NCCL_OK(ncclSend(s.bufs[3], kFinalCount, ncclFloat32, 0, comm, s.api()));
        RT_OK(gpuError(gpu::streamSynchronize(s.stream)));
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        NCCL_OK(ncclRecv(s.bufs[3], kFinalCount, ncclFloat32, 1, comm, s.api()));
        // Bounded: the watchdog (UNICCL_TIMEOUT_MS) ends a lost transfer.
        RT_OK(gpuError(gpu::streamSynchronize(s.stream)));
        std::vector<float> out(kFinalCount);
        RT_OK(gpuError(gpu::memcpy(out.data(), s.bufs[3], kFinalCount * sizeof(float))));
        ncclResult_t async = ncclSuccess;
        NCCL_OK(ncclCommGetAsyncError(comm, &async));
        REQUIRE(async == ncclSuccess, "async error %s after the last receive", ncclGetErrorString(async));
        for (size_t i = 0; i < kFinalCount; i++)
          REQUIRE(out[i] == last[i], "last receive: out[%zu] = %g, expected %g", i, out[i], last[i]);
        char go = 0;
        REQUIRE(readUntil(fromParent, &go, 1, Clock::now() + std::chrono::seconds(20)) == 1 && go == 'G',
                "no go from the parent after rank 1's destroy");
      }
      ncclResult_t async = ncclSuccess;
      NCCL_OK(ncclCommGetAsyncError(comm, &async));
      rep.asyncErr = async;
      REQUIRE(async == ncclSuccess, "async error %s after %s", ncclGetErrorString(async),
              rank == 0 ? "the peer's orderly destroy" : "the last send");
      const Clock::time_point td = Clock::now();
      ncclResult_t destroyed = ncclCommDestroy(comm);
      comm = nullptr;
      rep.destroySec = secondsSince(td);
      NCCL_OK(destroyed);
    } else if (rank == gVictim) {
      // The victim, until killed. An error here is the parent's to notice (no kill target).
      ncclResult_t r;
      while ((r = c == Case::Recv ? ncclSend(s.bufs[2], kBigCount, ncclFloat32, 0, comm, s.api())
                                  : ncclAllReduce(s.bufs[2], s.bufs[2], kBigCount, ncclFloat32, ncclMax, comm,
                                                  s.api())) == ncclSuccess)
        (void)gpu::streamSynchronize(s.stream);
      ADD_FAILURE("looped operation failed before the kill: %s", ncclGetLastError(nullptr));
      for (;;) pause();
    } else {
      if (!survive(c, comm, s, &rep)) return false;
      if (c == Case::Shrink) {
        Report shrink;
        if (!shrinkAndCheck(comm, s, rank, nranks, {1}, NCCL_SHRINK_ABORT, seed, &shrink)) return false;
        printf("  rank %d: shrunk around rank 1 in %.3f s, checked AllReduces on %d ranks passed\n", rank,
               shrink.abortSec, nranks - 1);
      }
      if (!abortAndDrain(comm, s, &rep)) return false;
      recordEnd(&rep);
    }
    s.release();   // the stream's worker thread goes too: the count below is exact
    return true;
  };
  bool ok = body();
  // The library's threads (proxy, socket helpers, watchdog) are joined by the
  // last destroy/abort; give stragglers a moment, then count.
  for (int i = 0; i < 40 && countThreads() > rep.threadsStart; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  rep.threadsEnd = countThreads();
  rep.warnLines = log.finish();
  rep.ok = ok;
  writeAll(toParent, &rep, sizeof(rep));
  close(toParent);
  return ok ? 0 : 1;   // a normal exit: atexit handlers and runtime teardown must not hang
}

// The parent's last resort: kill every child and fail (async-signal-safe).
constexpr int kMaxRanks = 8;
volatile pid_t gKids[kMaxRanks];
void onAlarm(int) {
  const char msg[] = "FAIL parent: the case did not end within its time limit; killing the ranks\n";
  ssize_t w = write(2, msg, sizeof(msg) - 1);
  (void)w;
  for (int r = 0; r < kMaxRanks; r++)
    if (gKids[r] > 0) kill(gKids[r], SIGKILL);
  _exit(1);
}

bool waitExit(pid_t pid, Clock::time_point deadline, int* status) {
  while (Clock::now() < deadline) {
    if (waitpid(pid, status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Children and their pipes: whatever happens below, no child outlives the case.
struct Children {
  int n = 0;
  pid_t pid[kMaxRanks];
  int from[kMaxRanks];   // child -> parent
  int to[kMaxRanks];     // parent -> child
  Children() {
    for (int r = 0; r < kMaxRanks; r++) pid[r] = -1, from[r] = to[r] = -1;
  }
  ~Children() {
    for (int r = 0; r < n; r++) {
      if (pid[r] > 0) {
        kill(pid[r], SIGKILL);
        waitpid(pid[r], nullptr, 0);
        gKids[r] = -1;
      }
      if (from[r] >= 0) close(from[r]);
      if (to[r] >= 0) close(to[r]);
    }
  }
};

bool checkThreads(int rank, const Report& rep) {
  printf("  rank %d threads: %d at start, %d with the runtime, %d with the comm, %d at the end\n", rank,
         rep.threadsStart, rep.threadsRuntime, rep.threadsComm, rep.threadsEnd);
  REQUIRE(rep.threadsEnd <= rep.threadsStart, "rank %d: %d threads left at the end, %d at the start", rank,
          rep.threadsEnd, rep.threadsStart);
  return true;
}

// --net=ib: the fake fabric's objects after the abort against before init.
// QPs, CQs and MRs belong to connections and registrations: none may stay.
// The transport's device table keeps each device's context and PD for the
// process's lifetime (as NCCL's does): at most one of each here. With
// `expectTraffic` (the communicator worked) the transport must have posted
// work requests: the network really was IB.
bool checkFakeIb(int rank, const Report& rep, bool expectTraffic) {
  const deadpeer::FakeIbCount& a = rep.ibRuntime;
  const deadpeer::FakeIbCount& b = rep.ibEnd;
  printf("  rank %d fake IB after the abort: %d QPs, %d CQs, %d MRs (%d, %d, %d before init), %d context(s) and %d "
         "PD(s) (the device table's), %lld work requests posted, %d misuses\n", rank, b.qps, b.cqs, b.mrs, a.qps,
         a.cqs, a.mrs, b.contexts, b.pds, b.postedSends, b.violations);
  REQUIRE(b.qps == a.qps && b.cqs == a.cqs && b.mrs == a.mrs,
          "rank %d: verbs objects left after the abort: %d QPs, %d CQs, %d MRs (%d, %d, %d before init)", rank, b.qps,
          b.cqs, b.mrs, a.qps, a.cqs, a.mrs);
  REQUIRE(b.violations == 0, "rank %d: the fake fabric saw %d verbs misuses (printed by the rank)", rank,
          b.violations);
  REQUIRE(b.contexts <= 1 && b.pds <= 1, "rank %d: %d device contexts and %d PDs after the abort (one device)", rank,
          b.contexts, b.pds);
  REQUIRE(!expectTraffic || b.postedSends > 0, "rank %d: no work request went through the fake IB fabric", rank);
  return true;
}

// A survivor's resources after its abort (or failed init) against before its init.
bool checkLeftovers(int rank, const Report& rep, bool expectIbTraffic) {
  const bool ibOk = !gIb || checkFakeIb(rank, rep, expectIbTraffic);
  const emu::Usage& a = rep.usageRuntime;
  const emu::Usage& b = rep.usageEnd;
  printf("  rank %d after the abort: %d fds (%d before init), %d own /dev/shm segments, emulated device allocations "
         "%zu (%zu), host allocations %zu (%zu), IPC imports %zu (%zu), mappings %zu (%zu)\n", rank, rep.fdsEnd,
         rep.fdsRuntime, rep.shmEnd, b.deviceAllocs, a.deviceAllocs, b.hostAllocs, a.hostAllocs, b.ipcOpens,
         a.ipcOpens, b.mappings, a.mappings);
  REQUIRE(rep.fdsEnd <= rep.fdsRuntime, "rank %d: %d fds open after the abort, %d before init", rank, rep.fdsEnd,
          rep.fdsRuntime);
  REQUIRE(rep.shmEnd == 0, "rank %d: %d /dev/shm segments of its own left after the abort", rank, rep.shmEnd);
  REQUIRE(b.deviceAllocs == a.deviceAllocs && b.deviceBytes == a.deviceBytes && b.hostAllocs == a.hostAllocs &&
              b.registrations == a.registrations && b.ipcOpens == a.ipcOpens && b.physAllocs == a.physAllocs &&
              b.mappings == a.mappings && b.reservations == a.reservations && b.events <= a.events &&
              b.streams <= a.streams,
          "rank %d: emulated GPU objects left after the abort (device allocations %zu/%zu bytes %zu/%zu, host %zu/%zu, "
          "registrations %zu/%zu, IPC imports %zu/%zu, physical %zu/%zu, mappings %zu/%zu, reservations %zu/%zu, "
          "events %zu/%zu, streams %zu/%zu; after/before)",
          rank, b.deviceAllocs, a.deviceAllocs, b.deviceBytes, a.deviceBytes, b.hostAllocs, a.hostAllocs,
          b.registrations, a.registrations, b.ipcOpens, a.ipcOpens, b.physAllocs, a.physAllocs, b.mappings,
          a.mappings, b.reservations, a.reservations, b.events, a.events, b.streams, a.streams);
  return ibOk;
}

bool runCase(Case c, int nranks) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (!gRootInRank0) NCCL_OK(ncclGetUniqueId(&id));
  const unsigned seed = std::random_device{}();
  Children kids;
  kids.n = nranks;
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < nranks; r++) {
    int up[2], down[2];
    REQUIRE(pipe(up) == 0 && pipe(down) == 0, "pipe failed");
    kids.from[r] = up[0];
    kids.to[r] = down[1];
    kids.pid[r] = fork();
    REQUIRE(kids.pid[r] >= 0, "fork failed");
    if (kids.pid[r] == 0) {
      for (int q = 0; q <= r; q++) close(kids.from[q]), close(kids.to[q]);
      _exit(childMain(c, r, nranks, id, seed, up[1], down[0]));
    }
    gKids[r] = kids.pid[r];
    close(up[1]);
    close(down[0]);
  }

  if (gRootInRank0) {
    REQUIRE(readUntil(kids.from[0], &id, sizeof(id), Clock::now() + std::chrono::seconds(20)) == sizeof(id),
            "no unique id from rank 0");
    for (int r = 1; r < nranks; r++) REQUIRE(writeAll(kids.to[r], &id, sizeof(id)), "cannot hand the id to rank %d", r);
  }
  long long killNs = 0;
  if (c == Case::Setup) {
    char ch = 0;
    REQUIRE(readUntil(kids.from[gVictim], &ch, 1, Clock::now() + std::chrono::seconds(30)) == 1 && ch == 'K' &&
                readUntil(kids.from[gVictim], &killNs, sizeof(killNs), Clock::now() + std::chrono::seconds(5)) ==
                    sizeof(killNs),
            "rank %d did not say it was dying during its init (see its messages above)", gVictim);
  } else {
    const Clock::time_point readyBy = Clock::now() + std::chrono::seconds(30);
    for (int r = 0; r < nranks; r++) {
      char ch = 0;
      REQUIRE(readUntil(kids.from[r], &ch, 1, readyBy) == 1 && ch == 'R',
              "rank %d did not finish init and the checked operations (see its messages above)", r);
    }
  }
  int status = 0;

  if (c == Case::Orderly) {
    Report rep1;
    REQUIRE(readUntil(kids.from[1], &rep1, sizeof(rep1), Clock::now() + std::chrono::seconds(20)) == sizeof(rep1),
            "no report from rank 1 (see its messages above)");
    REQUIRE(waitExit(kids.pid[1], Clock::now() + std::chrono::seconds(10), &status), "rank 1 did not exit");
    kids.pid[1] = gKids[1] = -1;
    const long long destroyedNs = nowNs();
    // Rank 0's proxy sees the closed connections in the meantime.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    REQUIRE(writeAll(kids.to[0], "G", 1), "cannot tell rank 0 to go");
    Report rep0;
    REQUIRE(readUntil(kids.from[0], &rep0, sizeof(rep0), Clock::now() + std::chrono::seconds(20)) == sizeof(rep0),
            "no report from rank 0 (see its messages above)");
    printf("  rank 1 destroyed its communicator in %.3f s; rank 0 %.2f s later: async error %s, destroy %.3f s, "
           "%d WARN lines\n", rep1.destroySec, (nowNs() - destroyedNs) / 1e9,
           ncclGetErrorString((ncclResult_t)rep0.asyncErr), rep0.destroySec, rep0.warnLines);
    bool ok = checkThreads(0, rep0) & checkThreads(1, rep1);
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0 && rep1.ok, "rank 1 failed (status 0x%x)", status);
    REQUIRE(rep0.ok, "rank 0 reported a failure (see its messages above)");
    REQUIRE(rep0.warnLines == 0, "rank 0 logged %d WARN lines after its peer's orderly destroy", rep0.warnLines);
    REQUIRE(waitExit(kids.pid[0], Clock::now() + std::chrono::seconds(10), &status), "rank 0 did not exit");
    kids.pid[0] = gKids[0] = -1;
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank 0 ended with status 0x%x", status);
    return ok;
  }

  if (c == Case::Revoke) {
    bool ok = true;
    for (int r = 0; r < nranks; r++) {
      Report rep;
      REQUIRE(readUntil(kids.from[r], &rep, sizeof(rep), Clock::now() + std::chrono::seconds(30)) == sizeof(rep),
              "no report from rank %d (see its messages above)", r);
      printf("  rank %d: revoke %.3f s, stream idle %.3f s after it began, async error %s after it\n", r,
             rep.abortSec, rep.drainSec, ncclGetErrorString((ncclResult_t)rep.asyncErr));
      ok &= checkThreads(r, rep);
      REQUIRE(rep.ok, "rank %d reported a failure (see its messages above)", r);
      REQUIRE(waitExit(kids.pid[r], Clock::now() + std::chrono::seconds(10), &status), "rank %d did not exit", r);
      kids.pid[r] = gKids[r] = -1;
      REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d ended with status 0x%x", r, status);
    }
    return ok;
  }

  const int victim = gVictim;
  const pid_t victimPid = kids.pid[victim];
  if (c == Case::Abort) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // The victim first, the others right after: all abort at about the same time.
    REQUIRE(writeAll(kids.to[victim], "A", 1), "cannot tell rank %d to abort", victim);
    for (int r = 0; r < nranks; r++)
      if (r != victim) REQUIRE(writeAll(kids.to[r], "A", 1), "cannot tell rank %d to abort", r);
    char ch = 0;
    REQUIRE(readUntil(kids.from[victim], &ch, 1, Clock::now() + std::chrono::seconds(10)) == 1 && ch == 'a',
            "rank %d did not say it is aborting (see its messages above)", victim);
    const long long abortingNs = nowNs();
    std::this_thread::sleep_for(std::chrono::microseconds(std::random_device{}() % 3001));
    killNs = nowNs();
    REQUIRE(kill(victimPid, SIGKILL) == 0, "kill -9 of rank %d failed", victim);
    REQUIRE(waitExit(victimPid, Clock::now() + std::chrono::seconds(kKillExitSec), &status),
            "rank %d did not die after kill -9", victim);
    const bool returned = readUntil(kids.from[victim], &ch, 1, Clock::now() + std::chrono::milliseconds(100)) == 1;
    printf("  rank %d killed %.2f ms after it began its abort (%s)\n", victim, (killNs - abortingNs) / 1e6,
           returned ? "its abort had returned" : "inside its abort");
  } else {
    if (c != Case::Setup) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      killNs = nowNs();
      REQUIRE(kill(victimPid, SIGKILL) == 0, "kill -9 of rank %d failed", victim);
    }
    REQUIRE(waitExit(victimPid, Clock::now() + std::chrono::seconds(kKillExitSec), &status),
            "rank %d did not die after kill -9", victim);
  }
  kids.pid[victim] = gKids[victim] = -1;
  REQUIRE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "rank %d ended with status 0x%x, not by the kill", victim,
          status);
  // What the victim left in /dev/shm. Killed after its connections were set
  // up, nothing: the SHM transport unlinks each segment once its peer opened
  // it. A death during setup may leave one (the documented window). The
  // parent removes them either way, so that the machine does not fill up.
  {
    const std::vector<std::string> left = shmSegmentsOf(victimPid);
    printf("  rank %d (killed) left %zu /dev/shm segments\n", victim, left.size());
    for (const std::string& n : left) {
      if (c != Case::Setup) ADD_FAILURE("rank %d, killed after init, left /dev/shm/%s", victim, n.c_str());
      unlink(("/dev/shm/" + n).c_str());
    }
  }
  char victimName[32];
  snprintf(victimName, sizeof(victimName), "rank %d ", victim);

  bool ok = true;
  for (int r = 0; r < nranks; r++) {
    if (r == victim) continue;
    Report rep;
    const size_t got = readUntil(kids.from[r], &rep, sizeof(rep), Clock::now() + std::chrono::seconds(25));
    const long long reportNs = nowNs();
    REQUIRE(got == sizeof(rep), "no report from rank %d (got %zu bytes; see its messages above)", r, got);
    const bool exited = waitExit(kids.pid[r], Clock::now() + std::chrono::seconds(10), &status);
    const double exitSec = (nowNs() - reportNs) / 1e9;
    if (exited) kids.pid[r] = gKids[r] = -1;
    const double detectSec = (rep.detectNs - killNs) / 1e9;
    if (c == Case::Abort) {
      printf("  rank %d: %lld looped AllReduces; async error %s when told to abort%s%s\n", r, rep.ops,
             ncclGetErrorString((ncclResult_t)rep.asyncErr), rep.asyncErr != ncclSuccess ? ": " : "",
             rep.asyncErr != ncclSuccess ? rep.lastError : "");
    } else {
      printf("  rank %d: %s%s %.3f s after the kill (%lld looped operations): %s\n", r,
             rep.launchErr != ncclSuccess ? (c == Case::Setup ? "init failed with " : "launch failed with ")
                                          : "async error ",
             ncclGetErrorString((ncclResult_t)(rep.launchErr != ncclSuccess ? rep.launchErr : rep.asyncErr)),
             detectSec, rep.ops, rep.lastError);
      if (rep.ops > 0)
        printf("  rank %d: looped operations launched from %.3f s before the kill to %.3f s %s it\n", r,
               (killNs - rep.firstOpNs) / 1e9, std::abs(rep.lastOpNs - killNs) / 1e9,
               rep.lastOpNs > killNs ? "after" : "before");
    }
    printf("  rank %d: abort %.3f s, stream drained %.3f s after the abort began, exit %.3f s after the report\n", r,
           rep.abortSec, rep.drainSec, exitSec);
    ok &= checkThreads(r, rep);
    REQUIRE(rep.ok, "rank %d reported a failure (see its messages above)", r);
    if (c != Case::Abort) {   // the survivors of the abort case were aborting anyway: no report is due
      REQUIRE(rep.asyncErr == ncclRemoteError || rep.launchErr == ncclRemoteError,
              "rank %d: async error %d, launch/init error %d (expected ncclRemoteError)", r, rep.asyncErr,
              rep.launchErr);
      REQUIRE(strstr(rep.lastError, victimName) != nullptr, "rank %d: the last error does not name rank %d: %s", r,
              victim, rep.lastError);
      REQUIRE(detectSec <= kDetectBoundSec, "rank %d saw the failure only %.2f s after the kill (bound %.0f s)", r,
              detectSec, kDetectBoundSec);
    }
    if (rep.abortSec >= 0) {
      REQUIRE(rep.abortSec < kAbortLimitSec, "rank %d: ncclCommAbort took %.2f s", r, rep.abortSec);
      REQUIRE(rep.drainSec < kDrainLimitSec, "rank %d: the stream drained only %.2f s after the abort", r,
              rep.drainSec);
    }
    ok &= checkLeftovers(r, rep, c != Case::Setup);
    REQUIRE(exited, "rank %d did not exit within 10 s of its report", r);
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d ended with status 0x%x", r, status);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  testcheck::setFailPrefix("parent: ");   // a forked rank names itself instead
  Case c = Case::AllReduce;
  int nranks = 2;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--ranks=", 8)) nranks = atoi(argv[i] + 8);
    else if (!strcmp(argv[i], "--case=allreduce")) c = Case::AllReduce;
    else if (!strcmp(argv[i], "--case=recv")) c = Case::Recv;
    else if (!strcmp(argv[i], "--case=orderly")) c = Case::Orderly;
    else if (!strcmp(argv[i], "--case=shrink")) c = Case::Shrink;
    else if (!strcmp(argv[i], "--case=revoke")) c = Case::Revoke;
    else if (!strcmp(argv[i], "--case=setup")) c = Case::Setup;
    else if (!strcmp(argv[i], "--case=abort")) c = Case::Abort;
    else if (!strncmp(argv[i], "--victim=", 9)) gVictim = atoi(argv[i] + 9);
    else if (!strcmp(argv[i], "--root-in-rank0")) gRootInRank0 = true;
    else if (!strcmp(argv[i], "--net=ib")) gIb = true;
    else {
      fprintf(stderr, "usage: %s [--case=allreduce|recv|orderly|shrink|revoke|setup|abort] [--ranks=N] [--victim=N] "
              "[--root-in-rank0] [--net=ib]\n", argv[0]);
      return 2;
    }
  }
  const bool anyRanks =
      c == Case::AllReduce || c == Case::Shrink || c == Case::Revoke || c == Case::Setup || c == Case::Abort;
  if (nranks < 2 || nranks > kMaxRanks || (!anyRanks && nranks != 2) || (c == Case::Shrink && nranks < 3)) {
    fprintf(stderr, "emu_deadpeer_test: --ranks must be 2..%d (2 for --case=recv and --case=orderly, 3+ for "
            "--case=shrink)\n", kMaxRanks);
    return 2;
  }
  if ((gVictim != 1 && c != Case::AllReduce && c != Case::Setup) || gVictim < 0 || gVictim >= nranks) {
    fprintf(stderr, "emu_deadpeer_test: --victim must be a rank, and only the allreduce and setup cases take one\n");
    return 2;
  }
  // The kill cases prove that dead peers are found without the watchdog.
  if (c != Case::Revoke && (getenv("UNICCL_TIMEOUT_MS") != nullptr || getenv("UNICCL_TIMEOUT") != nullptr)) {
    fprintf(stderr, "emu_deadpeer_test: run the kill and orderly cases without UNICCL_TIMEOUT(_MS): the watchdog "
            "must not be what finds the dead peer\n");
    return 2;
  }
  const bool netOnly = getenv("NCCL_SHM_DISABLE") != nullptr && getenv("NCCL_P2P_DISABLE") != nullptr;
  if (gIb) {
    const char* ibOff = getenv("NCCL_IB_DISABLE");
    if (!netOnly || (ibOff != nullptr && atoi(ibOff) != 0)) {
      fprintf(stderr, "emu_deadpeer_test: --net=ib needs NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 and IB enabled\n");
      return 2;
    }
    // Before anything reads the knobs; the ranks inherit it: never a silent fallback to sockets.
    setenv("NCCL_NET", "IB", 1);
    gJobToken = std::to_string(getpid());
  }
  const char* transport = gIb ? "IB" : netOnly ? "NET" : getenv("NCCL_P2P_DISABLE") != nullptr ? "SHM" : "P2P";
  const char* name = c == Case::AllReduce ? "allreduce" : c == Case::Recv ? "recv" : c == Case::Orderly ? "orderly"
                     : c == Case::Shrink ? "shrink" : c == Case::Revoke ? "revoke" : c == Case::Abort ? "abort"
                     : "setup";
  printf("emu_deadpeer_test: case %s, %d ranks, %s\n", name, nranks, transport);
  for (int r = 0; r < kMaxRanks; r++) gKids[r] = -1;
  signal(SIGALRM, onAlarm);
  alarm(kParentAlarmSec);
  const Clock::time_point t0 = Clock::now();
  const bool ok = runCase(c, nranks) && testcheck::failures() == 0;
  alarm(0);
  printf("emu_deadpeer_test: case %s, %d ranks, %s: %s in %.1f s\n", name, nranks, transport, ok ? "PASS" : "FAIL",
         secondsSince(t0));
  return ok ? 0 : 1;
}
