// Stress, dead-peer and leak tests on the visible GPUs (up to 8), through the
// public NCCL API. Usage: stress_test [--ranks-per-gpu=K] [case...] (default: all, in the order
// below; the forked dead-peer cases always run first because the parent must
// not have touched the GPU runtime when it forks).
//
//   deadpeer-p2p   2 processes, kill -9 of rank 1 mid-AllReduce (P2P transport)
//   deadpeer-shm   the same with NCCL_P2P_DISABLE=1 (SHM transport)
//   deadpeer-net   the same with P2P and SHM disabled (socket transport on lo)
//                  (--ranks-per-gpu=K, K >= 2: both ranks on GPU 0, which
//                  needs MPS; without it the refusal of init is checked)
//   cycles-init    1000 x (ncclCommInitAll + checked AllReduce + destroy), 60 s cap
//   cycles-abort   100 x (init + AllReduce + ncclCommAbort), half aborted in flight
//   load-million   1M small AllReduces, then 100k groups of 8 (work FIFO)
//   many-comms     16 communicators, 1000 interleaved rounds, all checked
//   thread-per-comm 8 threads, each its own clique, 2000 checked AllReduces
//   soak           (only when named) checked AllReduces for STRESS_SOAK_S
//                  seconds over the transport the environment leaves (soak.cc)
//
// Prints one line per case (name, PASS/FAIL/SKIP, seconds, key numbers) and
// "N passed, N failed"; exits 0, 1, or 77 (no GPU, or every case skipped).
// A hang fails the run after STRESS_TIMEOUT_S seconds in all (default 150).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "stress.h"

namespace stress {
bool deadPeer(DeadPeerTransport transport, int ranksPerGpu);
bool cyclesInit(int n);
bool cyclesAbort(int n);
bool loadMillion(int n);
bool manyComms(int n);
bool threadPerComm(int n);
bool soak(int ngpus, int ranksPerGpu);
}  // namespace stress

namespace {

using namespace stress;

std::atomic<const char*> gCurrent{"startup"};
int gRanksPerGpu = 1;   // --ranks-per-gpu: dead-peer and soak ranks per GPU

void watchdog(int seconds) {
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  fprintf(stderr, "stress_test: WATCHDOG: still running after %d s (in case '%s'); the library hangs. Aborting.\n",
          seconds, gCurrent.load());
  fflush(stdout);
  std::_Exit(1);
}

// The GPU count, asked in a child process so that this one never initializes
// the GPU runtime before the dead-peer cases fork.
int probeGpus() {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) _exit(std::min(rt::deviceCount(), 100));
  for (int i = 0; i < 3000; i++) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return 0;
}

struct Case {
  const char* name;
  int minGpus;
  bool (*fn)(int n);
  bool byDefault = true;   // run when no case is named
};

const Case kCases[] = {
    // minGpus 2: two ranks on two GPUs, unless --ranks-per-gpu puts them on one (see main).
    {"deadpeer-p2p", 2, [](int) { return deadPeer(DeadPeerTransport::P2p, gRanksPerGpu); }},
    {"deadpeer-shm", 2, [](int) { return deadPeer(DeadPeerTransport::Shm, gRanksPerGpu); }},
    {"deadpeer-net", 2, [](int) { return deadPeer(DeadPeerTransport::Net, gRanksPerGpu); }},
    {"cycles-init", 1, cyclesInit},
    {"cycles-abort", 1, cyclesAbort},
    {"load-million", 1, loadMillion},
    {"many-comms", 1, manyComms},
    {"thread-per-comm", 1, threadPerComm},
    {"soak", 1, [](int n) { return soak(n, gRanksPerGpu); }, false},
};

}  // namespace

int main(int argc, char** argv) {
  int nCaseArgs = 0;
  for (int a = 1; a < argc; a++) nCaseArgs += strncmp(argv[a], "--", 2) != 0;
  std::vector<bool> selected(std::size(kCases), false);
  for (size_t i = 0; i < std::size(kCases); i++) selected[i] = nCaseArgs == 0 && kCases[i].byDefault;
  for (int a = 1; a < argc; a++) {
    if (strncmp(argv[a], "--ranks-per-gpu=", 16) == 0) {
      gRanksPerGpu = atoi(argv[a] + 16);
      if (gRanksPerGpu < 1 || gRanksPerGpu > 64) {
        fprintf(stderr, "stress_test: --ranks-per-gpu must be 1..64\n");
        return 2;
      }
      continue;
    }
    size_t i = 0;
    while (i < std::size(kCases) && strcmp(argv[a], kCases[i].name) != 0) i++;
    if (i == std::size(kCases)) {
      fprintf(stderr, "stress_test: unknown case '%s'; cases:", argv[a]);
      for (const Case& c : kCases) fprintf(stderr, " %s", c.name);
      fprintf(stderr, "\n");
      return 2;
    }
    selected[i] = true;
  }
  int ngpus = probeGpus();
  if (ngpus < 1) {
    printf("stress_test: no GPU visible; skipping\n");
    return 77;
  }
  int n = std::min(ngpus, 8);
  const char* limit = getenv("STRESS_TIMEOUT_S");
  int limitSec = limit ? atoi(limit) : 150;
  printf("stress_test: %d GPU(s) visible (%s), using %d; dead-peer ranks per GPU %d; watchdog %d s\n", ngpus,
         COLLTEST_RT_BACKEND, n, gRanksPerGpu, limitSec);
  fflush(stdout);
  std::thread(watchdog, limitSec).detach();

  int passed = 0, failed = 0, skipped = 0;
  for (size_t i = 0; i < std::size(kCases); i++) {
    if (!selected[i]) continue;
    const Case& c = kCases[i];
    // Dead-peer ranks sharing a GPU: K ranks per GPU need ceil(2 / K) GPUs.
    const int minGpus = c.minGpus == 2 && gRanksPerGpu > 1 ? 1 : c.minGpus;
    if (ngpus < minGpus) {
      printf("  %-16s SKIP  needs %d GPUs, %d visible (--ranks-per-gpu=2 puts both ranks on one)\n", c.name,
             minGpus, ngpus);
      skipped++;
      continue;
    }
    gCurrent = c.name;
    int before = testcheck::failures();
    Clock::time_point t0 = Clock::now();
    bool finished = c.fn(n);
    if (!finished && testcheck::failures() == before) ADD_FAILURE("stopped early without a reason");
    bool ok = testcheck::failures() == before;
    printf("  %-16s %s %7.2f s  %s\n", c.name, ok ? "PASS" : "FAIL", secondsSince(t0), takeNote().c_str());
    fflush(stdout);
    (ok ? passed : failed)++;
  }
  gCurrent = "exit";
  printf("%d passed, %d failed", passed, failed);
  if (skipped) printf(" (%d skipped)", skipped);
  printf("\n");
  if (failed) return 1;
  return passed == 0 ? 77 : 0;
}
