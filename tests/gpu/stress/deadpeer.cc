// deadpeer-p2p / -shm / -net: two ranks in two forked processes (one GPU
// each); after 5 checked AllReduces both loop on large AllReduces and the
// parent kill -9's rank 1. Rank 0 must see ncclCommGetAsyncError fail within
// 10 s of the kill at the default settings (the watchdog's UNICCL_TIMEOUT is
// 600 s: the liveness links report the dead rank, in milliseconds when idle;
// 10 s leaves room for a busy machine), ncclCommAbort must return within 5 s,
// its stream must drain, no thread of the library may be left, and the
// process must exit 0 promptly.
//
// With K ranks per GPU (stress_test --ranks-per-gpu=K, K >= 2) both ranks sit
// on GPU 0 (UNICCL_RANKS_PER_GPU=K). Ranks of two processes on one GPU need
// an MPS server (kernels of different processes do not run together without
// one): with MPS the case runs as above; without it the case checks instead
// that both ranks' ncclCommInitRank is refused with ncclInvalidUsage and a
// message naming MPS (a communicator let through would hang), and says so.
//
// The parent never touches the GPU runtime (a CUDA context does not survive
// fork): it only makes the unique id (which starts the bootstrap root thread
// here) and referees through pipes. Times cross processes as CLOCK_MONOTONIC
// nanoseconds (std::chrono::steady_clock).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "pipe_io.h"
#include "stress.h"

namespace stress {

namespace {

constexpr double kDetectBoundSec = 10.0;
constexpr size_t kCheckCount = (1u << 18) + 13;
constexpr size_t kBigCount = 8u << 20;   // 32 MiB per AllReduce

long long nowNs() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// What rank 0 tells the parent once it is done.
struct Report {
  int ok = 0;                 // rank 0's own checks passed
  int asyncErr = ncclSuccess; // what ncclCommGetAsyncError reported
  long long detectNs = 0;     // when it did
  long long bigOps = 0;       // large AllReduces issued before that
  double abortSec = -1, streamSec = -1;
  int threadsRuntime = 0, threadsComm = 0, threadsEnd = 0;
};

using testpipe::readUntil;
using testpipe::writeAll;

// Rank data for checked AllReduce k: the same on every process from the seed.
std::vector<float> rankData(unsigned seed, int k, int rank, size_t count) {
  std::mt19937 rng(seed * 7919u + (unsigned)k * 2 + (unsigned)rank);
  std::vector<float> v(count);
  for (float& x : v) x = randInt(rng);
  return v;
}

bool checkedAllReduces(ncclComm_t comm, GpuSide& g, int rank, unsigned seed) {
  std::vector<float> out(kCheckCount);
  for (int k = 0; k < 5; k++) {
    std::vector<float> mine = rankData(seed, k, rank, kCheckCount), other = rankData(seed, k, 1 - rank, kCheckCount);
    std::vector<float> prior = rankData(seed, 100 + k, rank, kCheckCount);
    RT_OK(copyIn(g.bufs[0], mine.data(), kCheckCount * sizeof(float), g.stream));
    RT_OK(copyIn(g.bufs[1], prior.data(), kCheckCount * sizeof(float), g.stream));
    NCCL_OK(ncclAllReduce(g.bufs[0], g.bufs[1], kCheckCount, ncclFloat32, ncclSum, comm, g.stream));
    RT_OK(copyOut(out.data(), g.bufs[1], kCheckCount * sizeof(float), g.stream));
    for (size_t i = 0; i < kCheckCount; i++)
      REQUIRE(out[i] == mine[i] + other[i], "AllReduce %d: out[%zu] = %g, expected %g", k, i, out[i], mine[i] + other[i]);
  }
  return true;
}

// Rank 0 after the 'ready' byte: keeps one large AllReduce in flight and
// polls the async error while the stream is busy.
bool survive(ncclComm_t& comm, GpuSide& g, Report* rep) {
  Clock::time_point t0 = Clock::now();
  ncclResult_t async = ncclSuccess;
  while (true) {
    NCCL_OK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess) break;
    REQUIRE(secondsSince(t0) < 30, "no async error 30 s after the peer loop started (%lld AllReduces)", rep->bigOps);
    const char* err = nullptr;
    int state = streamState(g.stream, &err);
    REQUIRE(state >= 0, "the stream failed (%s) instead of being stopped by the watchdog", err);
    if (state == 1) {
      ncclResult_t r = ncclAllReduce(g.bufs[2], g.bufs[2], kBigCount, ncclFloat32, ncclMax, comm, g.stream);
      REQUIRE(r == ncclSuccess || r == ncclRemoteError, "large AllReduce -> %s: %s", ncclGetErrorString(r),
              testcheck::ncclLastError());
      rep->bigOps += r == ncclSuccess;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  rep->detectNs = nowNs();
  rep->asyncErr = async;
  Clock::time_point ta = Clock::now();
  ncclResult_t aborted = ncclCommAbort(comm);
  comm = nullptr;
  NCCL_OK(aborted);
  rep->abortSec = secondsSince(ta);
  const char* err = nullptr;
  int state;
  while ((state = streamState(g.stream, &err)) == 0 && secondsSince(ta) < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  rep->streamSec = secondsSince(ta);
  REQUIRE(state == 1, "after ncclCommAbort the stream %s", state == 0 ? "is still busy after 10 s" : err);
  return true;
}

void setTransportEnv(DeadPeerTransport transport) {
  if (transport != DeadPeerTransport::P2p) setenv("NCCL_P2P_DISABLE", "1", 1);
  if (transport == DeadPeerTransport::Net) {
    setenv("NCCL_SHM_DISABLE", "1", 1);   // the socket transport on loopback between the local GPUs
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    setenv("NCCL_IB_DISABLE", "1", 1);
  }
}

// GPU of a rank: r / K (both ranks on GPU 0 once K >= 2), with the opt-in
// for ranks sharing a GPU set before the first runtime call.
int rankDevice(int rank, int ranksPerGpu) {
  if (ranksPerGpu > 1) setenv("UNICCL_RANKS_PER_GPU", std::to_string(ranksPerGpu).c_str(), 1);
  return rank / ranksPerGpu;
}

bool mpsRunning() {
  const char* dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
  return access((std::string(dir != nullptr && *dir ? dir : "/tmp/nvidia-mps") + "/control").c_str(), F_OK) == 0;
}

// A rank of the refusal check: init must fail with ncclInvalidUsage and a
// message naming MPS. Tells the parent 'Y' or 'N' and the message.
int refusalChildMain(int rank, ncclUniqueId id, DeadPeerTransport transport, int ranksPerGpu, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  alarm(60);
  setTransportEnv(transport);
  const int dev = rankDevice(rank, ranksPerGpu);
  char msg[512] = "";
  bool ok = false;
  if (const char* e = rt::setDevice(dev)) {
    snprintf(msg, sizeof(msg), "cannot select GPU %d: %s", dev, e);
  } else {
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank);
    const char* last = testcheck::ncclLastError();
    ok = r == ncclInvalidUsage && strstr(last, "MPS") != nullptr;
    snprintf(msg, sizeof(msg), "ncclCommInitRank -> %s: %s", ncclGetErrorString(r), last);
    if (r == ncclSuccess) ncclCommAbort(comm);   // its peer may never run: do not wait for it
  }
  char verdict = ok ? 'Y' : 'N';
  writeAll(fd, &verdict, 1);
  writeAll(fd, msg, sizeof(msg));
  close(fd);
  return ok ? 0 : 1;
}

int childMain(int rank, ncclUniqueId id, unsigned seed, DeadPeerTransport transport, int ranksPerGpu, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);   // never outlive the parent (e.g. its watchdog fired)
  alarm(90);
  testcheck::setFailPrefix("rank " + std::to_string(rank) + " (pid " + std::to_string(getpid()) + "): ");
  const int dev = rankDevice(rank, ranksPerGpu);
  // The defaults: the watchdog must not be what finds the dead peer.
  unsetenv("UNICCL_TIMEOUT_MS");
  unsetenv("UNICCL_TIMEOUT");
  setenv("UNICCL_WATCHDOG_POLL_MS", "50", 1);
  setTransportEnv(transport);
  Report rep;
  auto body = [&]() -> bool {
    GpuSide g;
    if (!g.init(dev, {kCheckCount, kCheckCount, kBigCount})) return false;
    std::vector<float> big = rankData(seed, 999, rank, kBigCount);
    RT_OK(copyIn(g.bufs[2], big.data(), kBigCount * sizeof(float), g.stream));
    RT_OK(rt::streamSync(g.stream));
    rep.threadsRuntime = countThreads();
    // After `g`: a failure aborts the comm (stopping its kernels) before the stream is synced.
    struct Guard {
      ncclComm_t c = nullptr;
      ~Guard() { if (c) ncclCommAbort(c); }
    } guard;
    ncclComm_t& comm = guard.c;
    NCCL_OK(ncclCommInitRank(&comm, 2, id, rank));
    rep.threadsComm = countThreads();
    if (!checkedAllReduces(comm, g, rank, seed)) return false;
    REQUIRE(writeAll(fd, "R", 1), "cannot tell the parent it is ready");
    if (rank == 1) {
      // Until killed. An error here is the parent's to notice (no kill target).
      while (ncclAllReduce(g.bufs[2], g.bufs[2], kBigCount, ncclFloat32, ncclMax, comm, g.stream) == ncclSuccess)
        rt::streamSync(g.stream);
      ADD_FAILURE("large AllReduce failed before the kill: %s", testcheck::ncclLastError());
      for (;;) pause();
    }
    return survive(comm, g, &rep);
  };
  bool ok = body();
  // Threads of the library (the watchdog) are joined by the last abort; the
  // runtime may have started a helper or two lazily (host-function callbacks).
  for (int i = 0; i < 40 && countThreads() > rep.threadsRuntime + 2; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  rep.threadsEnd = countThreads();
  rep.ok = ok;
  writeAll(fd, &rep, sizeof(rep));
  close(fd);
  return ok ? 0 : 1;   // a normal exit: atexit handlers and runtime teardown must not hang
}

bool waitExit(pid_t pid, Clock::time_point deadline, int* status) {
  while (Clock::now() < deadline) {
    if (waitpid(pid, status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Both ranks on one GPU in two processes without MPS: both inits refused.
bool refusedWithoutMps(DeadPeerTransport transport, int ranksPerGpu) {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  pid_t pid[2] = {-1, -1};
  int fd[2] = {-1, -1};
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < 2; r++) {
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe failed");
    fd[r] = p[0];
    pid[r] = fork();
    REQUIRE(pid[r] >= 0, "fork failed");
    if (pid[r] == 0) {
      for (int q = 0; q <= r; q++) close(fd[q]);
      exit(refusalChildMain(r, id, transport, ranksPerGpu, p[1]));
    }
    close(p[1]);
  }
  bool ok = true;
  std::string first;
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < 2; r++) {
    char verdict = 0;
    char msg[512] = "";
    bool got = readUntil(fd[r], &verdict, 1, deadline) == 1 && readUntil(fd[r], msg, sizeof(msg), deadline) == sizeof(msg);
    msg[sizeof(msg) - 1] = '\0';
    if (!got || verdict != 'Y') {
      ADD_FAILURE("rank %d: %s; expected ncclInvalidUsage and a message naming MPS", r,
                  got ? msg : "no answer within 60 s");
      ok = false;
    } else if (first.empty()) {
      first = msg;
    }
    if (!got) kill(pid[r], SIGKILL);
    waitpid(pid[r], nullptr, 0);
    close(fd[r]);
  }
  if (ok) note("EXPECTED REFUSAL (no MPS; counted as a pass): both ranks on GPU 0 in 2 processes: %s", first.c_str());
  return ok;
}

}  // namespace

bool deadPeer(DeadPeerTransport transport, int ranksPerGpu) {
  if (ranksPerGpu > 1 && !mpsRunning()) return refusedWithoutMps(transport, ranksPerGpu);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  unsigned seed = std::random_device{}();
  // Read ends of the children's pipes; whatever happens below, no child
  // outlives the case.
  struct Children {
    pid_t pid[2] = {-1, -1};
    int fd[2] = {-1, -1};
    ~Children() {
      for (int r = 0; r < 2; r++) {
        if (pid[r] > 0) {
          kill(pid[r], SIGKILL);
          waitpid(pid[r], nullptr, 0);
        }
        if (fd[r] >= 0) close(fd[r]);
      }
    }
  } kids;
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < 2; r++) {
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe failed");
    kids.fd[r] = p[0];
    kids.pid[r] = fork();
    REQUIRE(kids.pid[r] >= 0, "fork failed");
    if (kids.pid[r] == 0) {
      for (int q = 0; q <= r; q++) close(kids.fd[q]);
      exit(childMain(r, id, seed, transport, ranksPerGpu, p[1]));
    }
    close(p[1]);
  }

  Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < 2; r++) {
    char c = 0;
    REQUIRE(readUntil(kids.fd[r], &c, 1, deadline) == 1 && c == 'R',
            "rank %d did not finish init and 5 checked AllReduces (see its messages above)", r);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  long long killNs = nowNs();
  REQUIRE(kill(kids.pid[1], SIGKILL) == 0, "kill -9 of rank 1 failed");
  int status = 0;
  REQUIRE(waitExit(kids.pid[1], Clock::now() + std::chrono::seconds(10), &status), "rank 1 did not die after kill -9");
  kids.pid[1] = -1;
  REQUIRE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "rank 1 ended with status 0x%x, not by the kill", status);

  Report rep;
  size_t got = readUntil(kids.fd[0], &rep, sizeof(rep), Clock::now() + std::chrono::seconds(45));
  long long reportNs = nowNs();
  REQUIRE(got == sizeof(rep), "no report from rank 0 (got %zu bytes; see its messages above)", got);
  bool exited = waitExit(kids.pid[0], Clock::now() + std::chrono::seconds(10), &status);
  double exitSec = (nowNs() - reportNs) / 1e9;
  if (exited) kids.pid[0] = -1;
  double detectSec = (rep.detectNs - killNs) / 1e9;
  note("async error %s %.3f s after the kill (bound %.0f s, %lld large AllReduces)", ncclGetErrorString((ncclResult_t)rep.asyncErr),
       detectSec, kDetectBoundSec, rep.bigOps);
  note("abort %.3f s, stream drained %.3f s, exit %.2f s", rep.abortSec, rep.streamSec, exitSec);
  note("threads: %d with the runtime, %d with the comm, %d at the end", rep.threadsRuntime, rep.threadsComm, rep.threadsEnd);
  REQUIRE(rep.ok, "rank 0 reported a failure (see its messages above)");
  REQUIRE(rep.asyncErr != ncclSuccess && rep.asyncErr != ncclInProgress, "async error %d", rep.asyncErr);
  REQUIRE(detectSec <= kDetectBoundSec, "async error only %.2f s after the kill", detectSec);
  REQUIRE(rep.abortSec < 5.0, "ncclCommAbort took %.2f s", rep.abortSec);
  REQUIRE(rep.threadsEnd <= rep.threadsRuntime + 2, "%d threads left, %d before ncclCommInitRank", rep.threadsEnd,
          rep.threadsRuntime);
  REQUIRE(exited, "rank 0 did not exit within 10 s of its report");
  REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank 0 ended with status 0x%x", status);
  return true;
}

}  // namespace stress
