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
//   init_scale [--ranks=64,256,1024] [--ranks-per-host=8] [--procs=P] [--check]
//
// --ranks-per-host=K gives the fake ranks host identities (ranks r..r+K-1
// on one simulated host, through setHostIdHookForTesting): ranks of one
// host connect through P2P, ranks of different hosts through the network
// transport (sockets), as on a cluster. Without it all ranks share a host.
//
// --procs=P splits the N ranks over P worker processes (each with its own
// descriptor limit, a thread per rank), the hosts whole in one process;
// the process that runs N makes the unique id and sends it to the workers,
// as a launcher's rank 0 would. The row sums the workers' memory, threads
// and descriptors; the init time is the slowest worker's. Needs
// --ranks-per-host (a fake GPU's bus id is unique only in its process).
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
#include "../../common/pipe_io.h"
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

// Simulated hosts: the rank on fake GPU g of this process is rank
// rankBase + g, on host (rankBase + g) / ranksPerHost.
int ranksPerHost = 0;
int rankBase = 0;

bool simulatedHost(int gpuDev, char* name, size_t cap) {
  if (ranksPerHost <= 0) return false;
  snprintf(name, cap, "simhost-%d", (rankBase + gpuDev) / ranksPerHost);
  return true;
}

// What one process measured over its ranks' communicators (plain data: a
// worker process sends it through a pipe).
struct Stats {
  double initS = 0, destroyS = 0;
  long rssGrowthKiB = 0, peakKiB = 0, threads = 0;
  int fds = 0, nChannels = 0, bad = 0;
  size_t deviceBytes = 0, hostBytes = 0;
  long connected = 0, viaNet = 0;
};

// Counts and checks the connections of this process's communicators.
void inspect(const std::vector<ncclComm_t>& comms, int n, bool check, Stats* st) {
  for (ncclComm_t c : comms) {
    const std::set<int> expected = initPeers(c);
    for (int p = 0; p < n; p++) {
      if (!c->transports.connected(p)) continue;
      st->connected++;
      if (c->transports.kind(p) == TransportKind::Net) st->viaNet++;
      if (check && !expected.count(p) && st->bad++ < 5)
        fprintf(stderr, "N=%d: rank %d connected rank %d, which is no ring or tree neighbour\n", n, c->rank, p);
    }
    for (int ch = 0; ch < c->nChannels && check; ch++) {
      const dev::Channel& x = c->channelsHost[ch];
      if ((!c->transports.ready(x.ringNext, kDirSend) || !c->transports.ready(x.ringPrev, kDirRecv)) && st->bad++ < 5)
        fprintf(stderr, "N=%d: rank %d channel %d: a ring neighbour is not connected\n", n, c->rank, ch);
    }
  }
  st->nChannels = comms[0]->nChannels;
}

// After the init: memory, threads and descriptors of this process.
void sample(long rss0, const fake::Bytes& b0, Stats* st) {
  st->rssGrowthKiB = procStatus("VmRSS") - rss0;
  st->peakKiB = procStatus("VmHWM");
  st->threads = procStatus("Threads");
  st->fds = openFds();
  const fake::Bytes b1 = fake::liveBytes();
  st->deviceBytes = b1.device - b0.device;
  st->hostBytes = b1.host - b0.host;
}

void destroyAll(const std::vector<ncclComm_t>& comms, Stats* st) {
  const auto t1 = std::chrono::steady_clock::now();
  for (ncclComm_t c : comms)
    if (ncclCommDestroy(c) != ncclSuccess) st->bad++;
  st->destroyS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
}

void printRow(int n, const Stats& st) {
  const double mib = 1024.0 * 1024.0;
  printf("%6d %8.2f %9.2f %11.1f %11.1f %10.2f %9.3f %4d %6.2f %6.2f %7ld %6d\n", n, st.initS, st.destroyS,
         st.rssGrowthKiB / (double)n, st.peakKiB / (double)n, st.deviceBytes / mib / n, st.hostBytes / mib / n,
         st.nChannels, st.connected / (double)n, st.viaNet / (double)n, st.threads, st.fds);
  fflush(stdout);
  if (st.bad) fprintf(stderr, "N=%d: %d problems\n", n, st.bad);
}

void fakeGpus(int count) {
  setHostIdHookForTesting(simulatedHost);
  fake::reset();
  fake::setDeviceCount(count);
  fake::setAutoComplete(true);
}

// One N, all ranks in this (child) process. Returns the exit status.
int runOne(int n, bool check) {
  fakeGpus(n);
  const long rss0 = procStatus("VmRSS");
  const fake::Bytes b0 = fake::liveBytes();
  std::vector<ncclComm_t> comms(n, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const ncclResult_t res = ncclCommInitAll(comms.data(), n, nullptr);
  Stats st;
  st.initS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (res != ncclSuccess) {
    fprintf(stderr, "N=%d: ncclCommInitAll failed: %s: %s\n", n, ncclGetErrorString(res), ncclGetLastError(nullptr));
    return 1;
  }
  sample(rss0, b0, &st);
  inspect(comms, n, check, &st);
  destroyAll(comms, &st);
  printRow(n, st);
  return st.bad ? 1 : 0;
}

// The parent and its workers exchange fixed-size records over pipes; a
// worker's init may take minutes, so a read waits as long as init may.
bool readAll(int fd, void* p, size_t bytes) {
  return testpipe::readUntil(fd, p, bytes, testpipe::Clock::now() + std::chrono::hours(2)) == bytes;
}
using testpipe::writeAll;

// A worker process: ranks base .. base + local - 1 on fake GPUs 0 .. local - 1,
// initialised from the id the coordinator sends (one thread per rank: the
// inits of a group run concurrently). Sends its Stats after the init, then
// destroys on the coordinator's word and sends them again.
int worker(int n, int base, int local, int in, int out, bool check) {
  rankBase = base;
  fakeGpus(local);
  const long rss0 = procStatus("VmRSS");
  const fake::Bytes b0 = fake::liveBytes();
  ncclUniqueId id;
  if (!readAll(in, &id, sizeof(id))) return 1;
  std::vector<ncclComm_t> comms(local, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  ncclResult_t res = ncclGroupStart();
  for (int d = 0; d < local && res == ncclSuccess; d++) {
    res = gpu::setDevice(d);
    if (res == ncclSuccess) res = ncclCommInitRank(&comms[d], n, id, base + d);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (res == ncclSuccess) res = end;
  Stats st;
  st.initS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (res != ncclSuccess) {
    fprintf(stderr, "N=%d: ranks %d..%d: init failed: %s: %s\n", n, base, base + local - 1, ncclGetErrorString(res),
            ncclGetLastError(nullptr));
    return 1;
  }
  sample(rss0, b0, &st);
  inspect(comms, n, check, &st);
  if (!writeAll(out, &st, sizeof(st))) return 1;
  char go = 0;
  if (!readAll(in, &go, 1)) return 1;
  destroyAll(comms, &st);
  if (!writeAll(out, &st, sizeof(st))) return 1;
  return st.bad ? 1 : 0;
}

// One N over `procs` worker processes (each its own descriptor limit), one
// unique id that this process makes, as a launcher's rank 0 would.
// The row sums the workers' memory, threads and descriptors; its init time
// is the slowest worker's. Returns the exit status.
int runProcs(int n, int procs, bool check) {
  const int local = n / procs;
  std::vector<int> toWorker(procs, -1), fromWorker(procs, -1);
  std::vector<pid_t> pids(procs, -1);
  // Workers first, while this process has no thread of the library's.
  for (int i = 0; i < procs; i++) {
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) {
      perror("pipe");
      return 1;
    }
    pids[i] = fork();
    if (pids[i] == 0) {
      close(down[1]);
      close(up[0]);
      for (int j = 0; j < i; j++) close(toWorker[j]), close(fromWorker[j]);
      exit(worker(n, i * local, local, down[0], up[1], check));
    }
    close(down[0]);
    close(up[1]);
    toWorker[i] = down[1];
    fromWorker[i] = up[0];
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "N=%d: ncclGetUniqueId failed: %s\n", n, ncclGetLastError(nullptr));
    return 1;
  }
  for (int i = 0; i < procs; i++) (void)writeAll(toWorker[i], &id, sizeof(id));
  Stats total;
  bool ok = true;
  std::vector<Stats> each(procs);
  for (int i = 0; i < procs && ok; i++) ok = readAll(fromWorker[i], &each[i], sizeof(Stats));
  for (int i = 0; i < procs && ok; i++) {
    const char go = 1;
    ok = writeAll(toWorker[i], &go, 1);
  }
  for (int i = 0; i < procs && ok; i++) ok = readAll(fromWorker[i], &each[i], sizeof(Stats));
  int failures = ok ? 0 : 1;
  for (int i = 0; i < procs; i++) {
    close(toWorker[i]);
    close(fromWorker[i]);
    int status = 0;
    waitpid(pids[i], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failures++;
  }
  if (!ok) {
    fprintf(stderr, "N=%d: a worker process failed\n", n);
    return 1;
  }
  for (int i = 0; i < procs; i++) {
    const Stats& w = each[i];
    printf("#   process %d: ranks %5d..%5d init %8.2f s  RSS +%8.1f MiB  peak %8.1f MiB  threads %5ld  fds %6d\n", i,
           i * local, (i + 1) * local - 1, w.initS, w.rssGrowthKiB / 1024.0, w.peakKiB / 1024.0, w.threads, w.fds);
    total.initS = std::max(total.initS, w.initS);
    total.destroyS = std::max(total.destroyS, w.destroyS);
    total.rssGrowthKiB += w.rssGrowthKiB;
    total.peakKiB += w.peakKiB;
    total.threads += w.threads;
    total.fds += w.fds;
    total.nChannels = w.nChannels;
    total.bad += w.bad;
    total.deviceBytes += w.deviceBytes;
    total.hostBytes += w.hostBytes;
    total.connected += w.connected;
    total.viaNet += w.viaNet;
  }
  printRow(n, total);
  return failures || total.bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {64, 256, 1024};
  bool check = false;
  int procs = 1;
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
    } else if (strncmp(argv[i], "--procs=", 8) == 0) {
      procs = atoi(argv[i] + 8);
      if (procs < 1) {
        fprintf(stderr, "--procs: need 1 or more\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--check") == 0) {
      check = true;
    } else {
      fprintf(stderr, "usage: %s [--ranks=64,256,1024] [--ranks-per-host=K] [--procs=P] [--check]\n", argv[0]);
      return 2;
    }
  }
  if (procs > 1 && ranksPerHost == 0) {
    fprintf(stderr, "--procs needs --ranks-per-host (a simulated host lies in one process)\n");
    return 2;
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
    // A simulated host in one process: its fake GPUs' bus ids are unique only there.
    if (n % procs != 0 || (ranksPerHost > 0 && (n / procs) % ranksPerHost != 0)) {
      fprintf(stderr, "--ranks: %d ranks do not split into %d processes of whole hosts of %d\n", n, procs,
              ranksPerHost);
      return 2;
    }
    const pid_t pid = fork();
    // exit, not _exit: the library's static registries join their threads
    // (the bootstrap root's), as at the end of any program (ThreadSanitizer
    // reports threads left running). This process starts no thread itself.
    if (pid == 0) exit(procs > 1 ? runProcs(n, procs, check) : runOne(n, check));
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures++;
      if (WIFSIGNALED(status)) fprintf(stderr, "N=%d: killed by signal %d\n", n, WTERMSIG(status));
    }
  }
  return failures ? 1 : 0;
}
