// Init at scale on CPUs: N ranks of one communicator in one process (one
// thread per rank, ncclCommInitAll over N fake GPUs, tests/unit/fake), the
// whole init path: bootstrap (root, ring allgather), peer info, topology,
// transports and the init-time connections (ring and tree peers), channels,
// device communicator. Prints per N: init wall time, the process's RSS
// growth per rank, and the GPU and pinned host memory the library asked the
// backend for per rank (fake::liveBytes: what a GPU would hold; the fake
// keeps unwritten GPU memory out of the RSS, so the RSS is the library's
// host side plus the GPU bytes init really writes).
//
//   init_scale [--ranks=64,256,1024] [--ranks-per-host=8] [--check]
//
// --ranks-per-host=K gives the fake ranks host identities (ranks r..r+K-1
// on one simulated host, through setHostIdHookForTesting): ranks of one
// host connect through P2P, ranks of different hosts through the network
// transport (sockets), as on a cluster. Without it all ranks share a host.
//
// Each N runs in a child process of its own (a fresh RSS baseline, threads
// and sockets released). --check: fail (exit 1) unless every rank's init
// succeeds, its ring neighbours are connected and nothing beyond its ring
// and tree peers is. docs/scale.md has the figures and the method.
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/core/comm.h"
#include "common/core/peer_info.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace {

using namespace uniccl;

// A field of /proc/self/status in KiB (VmRSS, VmHWM) or a count (Threads).
long procStatus(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') return atol(line.c_str() + n + 1);
  return -1;
}

int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) n++;
    closedir(d);
  }
  return n - 2;   // . and ..
}

// Every peer a rank is expected to have connected at init: ring neighbours
// of every channel and, where the tree may run, tree neighbours.
std::set<int> initPeers(const ncclComm* c) {
  std::set<int> s;
  for (int ch = 0; ch < c->nChannels; ch++) {
    const dev::Channel& x = c->channelsHost[ch];
    for (int p : {x.ringPrev, x.ringNext, x.treeUp, x.treeDown[0], x.treeDown[1]})
      if (p >= 0 && p != c->rank) s.insert(p);
  }
  return s;
}

// Simulated hosts: rank (= fake GPU) g on host g / ranksPerHost.
int ranksPerHost = 0;

bool simulatedHost(int gpuDev, char* name, size_t cap) {
  if (ranksPerHost <= 0) return false;
  snprintf(name, cap, "simhost-%d", gpuDev / ranksPerHost);
  return true;
}

// One N, in this (child) process. Returns the exit status.
int runOne(int n, bool check) {
  setHostIdHookForTesting(simulatedHost);
  fake::reset();
  fake::setDeviceCount(n);
  fake::setAutoComplete(true);
  const long rss0 = procStatus("VmRSS");
  const fake::Bytes b0 = fake::liveBytes();
  std::vector<ncclComm_t> comms(n, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const ncclResult_t res = ncclCommInitAll(comms.data(), n, nullptr);
  const double initS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (res != ncclSuccess) {
    fprintf(stderr, "N=%d: ncclCommInitAll failed: %s: %s\n", n, ncclGetErrorString(res), ncclGetLastError(nullptr));
    return 1;
  }
  const long rss1 = procStatus("VmRSS"), hwm = procStatus("VmHWM"), threads = procStatus("Threads");
  const int fds = openFds();
  const fake::Bytes b1 = fake::liveBytes();
  int bad = 0;
  long connected = 0, viaNet = 0;
  for (ncclComm_t c : comms) {
    const std::set<int> expected = initPeers(c);
    for (int p = 0; p < n; p++) {
      if (!c->transports.connected(p)) continue;
      connected++;
      if (c->transports.kind(p) == TransportKind::Net) viaNet++;
      if (check && !expected.count(p) && bad++ < 5)
        fprintf(stderr, "N=%d: rank %d connected rank %d, which is no ring or tree neighbour\n", n, c->rank, p);
    }
    for (int ch = 0; ch < c->nChannels && check; ch++) {
      const dev::Channel& x = c->channelsHost[ch];
      if ((!c->transports.ready(x.ringNext, kDirSend) || !c->transports.ready(x.ringPrev, kDirRecv)) && bad++ < 5)
        fprintf(stderr, "N=%d: rank %d channel %d: a ring neighbour is not connected\n", n, c->rank, ch);
    }
  }
  const int nChannels = comms[0]->nChannels;
  const auto t1 = std::chrono::steady_clock::now();
  for (ncclComm_t c : comms)
    if (ncclCommDestroy(c) != ncclSuccess) bad++;
  const double destroyS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  const double mib = 1024.0 * 1024.0;
  printf("%6d %8.2f %9.2f %11.1f %11.1f %10.2f %9.3f %4d %6.2f %6.2f %7ld %6d\n", n, initS, destroyS,
         (rss1 - rss0) / (double)n, hwm / (double)n, (b1.device - b0.device) / mib / n,
         (b1.host - b0.host) / mib / n, nChannels, connected / (double)n, viaNet / (double)n, threads, fds);
  fflush(stdout);
  if (bad) fprintf(stderr, "N=%d: %d problems\n", n, bad);
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {64, 256, 1024};
  bool check = false;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--ranks=", 8) == 0) {
      sizes.clear();
      for (const char* s = argv[i] + 8; *s;) {
        sizes.push_back(atoi(s));
        s = strchr(s, ',');
        if (!s) break;
        s++;
      }
    } else if (strncmp(argv[i], "--ranks-per-host=", 17) == 0) {
      ranksPerHost = atoi(argv[i] + 17);
      if (ranksPerHost < 1) {
        fprintf(stderr, "--ranks-per-host: need 1 or more\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--check") == 0) {
      check = true;
    } else {
      fprintf(stderr, "usage: %s [--ranks=64,256,1024] [--ranks-per-host=K] [--check]\n", argv[0]);
      return 2;
    }
  }
  printf("# %6s %8s %9s %11s %11s %10s %9s %4s %6s %6s %7s %6s\n", "ranks", "init_s", "destroy_s", "rss_KiB/rk",
         "peak_KiB/rk", "gpu_MiB/rk", "host_MiB/rk", "ch", "peers", "net", "threads", "fds");
  fflush(stdout);
  int failures = 0;
  for (int n : sizes) {
    if (n < 2) {
      fprintf(stderr, "--ranks: %d is not a communicator size of 2 or more\n", n);
      return 2;
    }
    const pid_t pid = fork();
    // exit, not _exit: the library's static registries join their threads
    // (the bootstrap root's), as at the end of any program (ThreadSanitizer
    // reports threads left running). This process starts no thread itself.
    if (pid == 0) exit(runOne(n, check));
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures++;
      if (WIFSIGNALED(status)) fprintf(stderr, "N=%d: killed by signal %d\n", n, WTERMSIG(status));
    }
  }
  return failures ? 1 : 0;
}
