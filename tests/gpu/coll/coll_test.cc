// End-to-end correctness of every collective through the public NCCL API.
//
//   coll_test [--mode=A-all,A-group,B] [--transport=env|p2p|shm|net|both]
//             [--filter=PAT[,PAT...]] [--quick] [--full] [--no-huge] [--no-perf]
//             [--ngpus=N] [--ranks-per-gpu=K] [--timeout=SECONDS] [--list] [--verbose]
//
// Modes: A-all   one process drives every GPU (ncclCommInitAll), ops grouped
//                across the communicators;
//        A-group the same with ncclGroupStart + ncclCommInitRank per GPU +
//                ncclGroupEnd (a representative slice of the cases);
//        B       one process per GPU (fork), ncclGetUniqueId in a process
//                that never touched the GPU runtime, ncclCommInitRank.
// Ranks per GPU (--ranks-per-gpu=K, default 1): N*K ranks, rank r on GPU
// r/K, so the multi-rank matrix runs on fewer GPUs (even one). A-all sets
// UNICCL_RANKS_PER_GPU=K and passes ncclCommInitAll a device list that
// repeats each GPU K times; A-group opts in through RCCL's
// ncclCommInitRankMulti (virtualId r%K) instead, with the variable unset; B
// puts K processes on a GPU, which needs an MPS server: without one (no
// control pipe in $CUDA_MPS_PIPE_DIRECTORY or /tmp/nvidia-mps) mode B checks
// that init is refused with ncclInvalidUsage and a message naming MPS, and
// runs no cases. With K > 1 the 64 Mi-element cases and the 1 GiB Perf case
// are left out (K arenas share one GPU's memory) and the run says so.
// Transport: "env" (default) labels the run from NCCL_P2P_DISABLE and
// NCCL_SHM_DISABLE; "p2p" / "shm" / "net" set them for the test processes
// (net: the socket transport on NCCL_SOCKET_IFNAME, default lo); "both" runs
// p2p and shm.
// Filter: comma-separated patterns on names like
// "A-all/p2p/AllReduce/bf16/sum/c1023/inplace" (fnmatch when the pattern has
// * ? or [, else substring); a leading '-' excludes. Env: COLL_TEST_FILTER,
// COLL_TEST_TIMEOUT.
//
// The top-level process never touches the GPU: it counts GPUs in a child,
// runs each mode in children and reads their per-case results from shared
// memory, so a crash or hang (each test process has a watchdog) costs only
// the cases not yet run. Exit status: 0 all passed, 1 failures, 77 no GPU,
// 2 bad usage.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cases.h"
#include "check.h"
#include "nccl.h"
#include "rccl/rccl.h"  // ncclCommInitRankMulti (uniccl implements RCCL's multi-rank-per-GPU init)
#include "rt.h"
#include "runner.h"

using namespace colltest;

namespace {

// Exit codes of the test processes.
constexpr int kExitOk = 0, kExitFailures = 1, kExitTimeout = 3, kExitSetup = 4, kExitFatal = 5;

struct Options {
  std::vector<std::string> modes = {"A-all", "A-group", "B"};
  std::string transport = "env";
  BuildOptions build;
  int ngpus = 0;
  int ranksPerGpu = 1;  // K ranks on each GPU: rank r on GPU r / K
  bool list = false;
  bool verbose = false;
};

// Written by the test processes, read by the driver.
struct Shared {
  PerfResult perf;
  uint8_t status[1];  // [slot * nCases + case], Status values
};

struct ModeRun {
  std::string mode, transport;
  int nranks = 1;
  int ranksPerGpu = 1;
  bool expectRefusal = false;  // mode B, several processes per GPU, no MPS: init must be refused
  std::vector<Case> cases;
  size_t arenaBytes = 0;
  Shared* shared = nullptr;
  size_t sharedBytes = 0;
  int slots = 1;
  double seconds = 0;
  std::string crash;  // how the test processes ended, when abnormally
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t c = s.find(',', at);
    if (c == std::string::npos) c = s.size();
    if (c > at) out.push_back(s.substr(at, c - at));
    at = c + 1;
  }
  return out;
}

void addFilters(Options& o, const std::string& list) {
  for (const std::string& p : split(list)) {
    if (p[0] == '-') o.build.exclude.push_back(p.substr(1));
    else o.build.include.push_back(p);
  }
}

void usage() {
  fprintf(stderr,
          "usage: coll_test [--mode=A-all,A-group,B] [--transport=env|p2p|shm|net|both] [--filter=PAT[,PAT...]]\n"
          "                 [--quick] [--full] [--no-huge] [--no-perf] [--ngpus=N] [--ranks-per-gpu=K] [--timeout=S]\n"
          "                 [--list] [--verbose]\n");
}

bool parse(int argc, char** argv, Options& o) {
  if (const char* f = getenv("COLL_TEST_FILTER")) addFilters(o, f);
  if (const char* t = getenv("COLL_TEST_TIMEOUT")) o.build.timeoutS = atof(t);
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&](const char* key) -> const char* {
      size_t k = strlen(key);
      return a.compare(0, k, key) == 0 ? argv[i] + k : nullptr;
    };
    if (const char* v = val("--mode=")) {
      o.modes = split(v);
      for (const std::string& m : o.modes)
        if (m != "A-all" && m != "A-group" && m != "B") return false;
    } else if (const char* v = val("--transport=")) {
      o.transport = v;
      if (o.transport != "env" && o.transport != "p2p" && o.transport != "shm" && o.transport != "net" &&
          o.transport != "both")
        return false;
    } else if (const char* v = val("--filter=")) {
      addFilters(o, v);
    } else if (const char* v = val("--ngpus=")) {
      o.ngpus = atoi(v);
    } else if (const char* v = val("--ranks-per-gpu=")) {
      o.ranksPerGpu = atoi(v);
      if (o.ranksPerGpu < 1 || o.ranksPerGpu > 64) return false;
    } else if (const char* v = val("--timeout=")) {
      o.build.timeoutS = atof(v);
    } else if (a == "--quick") {
      o.build.quick = true;
    } else if (a == "--full") {
      o.build.full = true;
    } else if (a == "--no-huge") {
      o.build.huge = false;
    } else if (a == "--no-perf") {
      o.build.perf = false;
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--verbose") {
      o.verbose = true;
    } else {
      return false;
    }
  }
  return o.build.timeoutS > 0;
}

// Counting GPUs initializes the runtime, after which fork() is unsafe: ask a
// child.
int probeGpus() {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int n = rt::deviceCount();
    _exit(n > 100 ? 100 : n);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) < 0) return 0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

// Whether an MPS control daemon runs for this process: the same pipe the
// library looks for (CUDA_MPS_PIPE_DIRECTORY, default /tmp/nvidia-mps).
std::string mpsControlPipe() {
  const char* dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
  return std::string(dir != nullptr && *dir ? dir : "/tmp/nvidia-mps") + "/control";
}
bool mpsRunning() { return access(mpsControlPipe().c_str(), F_OK) == 0; }

// The opt-in a mode uses for ranks sharing a GPU: the environment switch for
// A-all and B (plain NCCL programs), RCCL's ncclCommInitRankMulti alone for
// A-group (so that it is shown to work without the switch).
void setSharingEnv(const ModeRun& m) {
  if (m.ranksPerGpu <= 1) return;  // today's behaviour: the environment is left as it is
  if (m.mode == "A-group") unsetenv("UNICCL_RANKS_PER_GPU");
  else setenv("UNICCL_RANKS_PER_GPU", std::to_string(m.ranksPerGpu).c_str(), 1);
}

// ---------------------------------------------------------------- test processes

[[noreturn]] void finish(int code) {
  fflush(nullptr);
  _exit(code);
}

// Runs the case list on the local ranks; returns the process exit code.
int runCases(World& w, ModeRun& m, int slot, bool finalizeFirst) {
  if (!setupLocals(w, m.arenaBytes)) return kExitSetup;
  const size_t n = m.cases.size();
  bool anyFail = false, fatal = false;
  for (size_t i = 0; i < n && !fatal; i++) {
    const Case& c = m.cases[i];
    watchdog::arm(c.name.c_str(), c.timeoutS);
    PerfResult perf;
    Status s = runCase(w, c, &perf, &fatal);
    watchdog::disarm();
    m.shared->status[slot * n + i] = (uint8_t)s;
    if (perf.valid && slot == 0) m.shared->perf = perf;
    if (s != Status::Pass) anyFail = true;
    if (w.verbose && s == Status::Pass) printf("  ok %s\n", c.name.c_str());
  }
  if (fatal) {
    fprintf(stderr, "[%s] the GPU runtime failed: skipping the remaining cases of this process\n", w.who.c_str());
    finish(kExitFatal);  // the context may be unusable: do not tear down
  }
  watchdog::arm("teardown (free buffers, ncclCommFinalize/ncclCommDestroy)", 120);
  freeLocals(w);
  for (LocalRank& lr : w.locals) {
    if (finalizeFirst && ncclCommFinalize(lr.comm) != ncclSuccess) {
      fprintf(stderr, "[%s] rank %d: ncclCommFinalize failed: %s\n", w.who.c_str(), lr.rank, ncclGetLastError(lr.comm));
      anyFail = true;
    }
    if (ncclCommDestroy(lr.comm) != ncclSuccess) {
      fprintf(stderr, "[%s] rank %d: ncclCommDestroy failed\n", w.who.c_str(), lr.rank);
      anyFail = true;
    }
  }
  watchdog::disarm();
  return anyFail ? kExitFailures : kExitOk;
}

// Checks what the communicator reports about itself.
bool checkCommInfo(const World& w, const LocalRank& lr) {
  int count = -1, rank = -1, dev = -1;
  bool ok = ncclCommCount(lr.comm, &count) == ncclSuccess && ncclCommUserRank(lr.comm, &rank) == ncclSuccess &&
            ncclCommCuDevice(lr.comm, &dev) == ncclSuccess && count == w.nranks && rank == lr.rank && dev == lr.dev;
  if (!ok)
    fprintf(stderr, "[%s] rank %d: comm reports count %d rank %d device %d, expected %d %d %d\n", w.who.c_str(),
            lr.rank, count, rank, dev, w.nranks, lr.rank, lr.dev);
  return ok;
}

[[noreturn]] void modeAProcess(ModeRun& m, const Options& o) {
  World w;
  w.who = m.mode + "/" + m.transport;
  w.nranks = m.nranks;
  w.verbose = o.verbose;
  watchdog::start(w.who);
  watchdog::arm("communicator init", o.build.timeoutS + 60);
  setSharingEnv(m);
  const int n = m.nranks, k = m.ranksPerGpu;
  std::vector<ncclComm_t> comms(n, nullptr);
  ncclResult_t r;
  if (m.mode == "A-all") {
    std::vector<int> devs(n);
    for (int i = 0; i < n; i++) devs[i] = i / k;  // each GPU K times when ranks share GPUs
    r = ncclCommInitAll(comms.data(), n, devs.data());
  } else {
    ncclUniqueId id;
    r = ncclGetUniqueId(&id);
    if (r == ncclSuccess) {
      ncclGroupStart();
      for (int i = 0; i < n && r == ncclSuccess; i++) {
        const char* e = rt::setDevice(i / k);
        if (e) {
          fprintf(stderr, "[%s] cannot select GPU %d: %s\n", w.who.c_str(), i / k, e);
          finish(kExitSetup);
        }
        // Inside the group every rank's init waits for the others only at
        // ncclGroupEnd, so one thread can make all K ranks of a GPU.
        r = k > 1 ? ncclCommInitRankMulti(&comms[i], n, id, i, i % k) : ncclCommInitRank(&comms[i], n, id, i);
      }
      ncclResult_t e = ncclGroupEnd();
      if (r == ncclSuccess) r = e;
    }
  }
  watchdog::disarm();
  if (r != ncclSuccess) {
    fprintf(stderr, "[%s] communicator init failed: %s: %s\n", w.who.c_str(), ncclGetErrorString(r),
            ncclGetLastError(nullptr));
    finish(kExitSetup);
  }
  bool infoOk = true;
  for (int i = 0; i < n; i++) {
    LocalRank lr;
    lr.rank = i;
    lr.dev = i / k;
    lr.comm = comms[i];
    w.locals.push_back(lr);
    infoOk &= checkCommInfo(w, lr);
  }
  int code = runCases(w, m, 0, /*finalizeFirst=*/false);
  finish(infoOk ? code : std::max(code, kExitFailures));
}

[[noreturn]] void modeBRank(ModeRun& m, const Options& o, const ncclUniqueId& id, int rank) {
  World w;
  w.who = m.mode + "/" + m.transport + " rank " + std::to_string(rank);
  w.nranks = m.nranks;
  w.verbose = o.verbose && rank == 0;
  watchdog::start(w.who);
  watchdog::arm("communicator init", o.build.timeoutS + 60);
  setSharingEnv(m);
  const int dev = rank / m.ranksPerGpu;
  const char* e = rt::setDevice(dev);
  if (e) {
    fprintf(stderr, "[%s] cannot select GPU %d: %s\n", w.who.c_str(), dev, e);
    finish(kExitSetup);
  }
  LocalRank lr;
  lr.rank = rank;
  lr.dev = dev;
  ncclResult_t r = ncclCommInitRank(&lr.comm, m.nranks, id, rank);
  watchdog::disarm();
  if (m.expectRefusal) {
    // Every rank sees the same peer info, so every rank must be refused (a
    // rank let through would wait forever for its peers' kernels).
    const char* msg = ncclGetLastError(nullptr);
    const bool ok = r == ncclInvalidUsage && msg != nullptr && strstr(msg, "MPS") != nullptr;
    if (ok) {
      if (rank == 0)
        printf("[%s] EXPECTED REFUSAL (counted as a pass): %d processes share GPU %d without MPS; "
               "ncclCommInitRank -> ncclInvalidUsage: %s\n", w.who.c_str(), m.ranksPerGpu, dev, msg);
    } else {
      fprintf(stderr, "[%s] ncclCommInitRank with %d processes on GPU %d and no MPS returned %s (%s); expected "
              "ncclInvalidUsage and a message naming MPS\n", w.who.c_str(), m.ranksPerGpu, dev,
              ncclGetErrorString(r), msg ? msg : "");
      if (r == ncclSuccess) ncclCommAbort(lr.comm);  // its peers may never run: do not wait for them
    }
    m.shared->status[rank * m.cases.size()] = (uint8_t)(ok ? Status::Pass : Status::Fail);
    finish(ok ? kExitOk : kExitFailures);
  }
  if (r != ncclSuccess) {
    fprintf(stderr, "[%s] ncclCommInitRank failed: %s: %s\n", w.who.c_str(), ncclGetErrorString(r),
            ncclGetLastError(nullptr));
    finish(kExitSetup);
  }
  w.locals.push_back(lr);
  bool infoOk = checkCommInfo(w, lr);
  int code = runCases(w, m, rank, /*finalizeFirst=*/true);
  finish(infoOk ? code : std::max(code, kExitFailures));
}

std::string describeExit(int st) {
  char buf[96];
  if (WIFSIGNALED(st)) snprintf(buf, sizeof(buf), "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else if (WEXITSTATUS(st) == kExitTimeout) snprintf(buf, sizeof(buf), "watchdog timeout (exit %d)", kExitTimeout);
  else if (WEXITSTATUS(st) == kExitSetup) snprintf(buf, sizeof(buf), "setup/init failed (exit %d)", kExitSetup);
  else if (WEXITSTATUS(st) == kExitFatal) snprintf(buf, sizeof(buf), "GPU runtime error (exit %d)", kExitFatal);
  else snprintf(buf, sizeof(buf), "exit %d", WEXITSTATUS(st));
  return buf;
}

bool abnormal(int st) { return WIFSIGNALED(st) || (WEXITSTATUS(st) != kExitOk && WEXITSTATUS(st) != kExitFailures); }

// Mode B's coordinator: makes the id before any GPU runtime call in this
// process (fork after GPU init is unsafe), forks one process per GPU, and
// stops the others as soon as one ends abnormally (they would only hang).
[[noreturn]] void modeBCoordinator(ModeRun& m, const Options& o) {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    fprintf(stderr, "[B/%s] ncclGetUniqueId failed: %s: %s\n", m.transport.c_str(), ncclGetErrorString(r),
            ncclGetLastError(nullptr));
    finish(kExitSetup);
  }
  std::vector<pid_t> pids(m.nranks, -1);
  fflush(nullptr);
  for (int rank = 0; rank < m.nranks; rank++) {
    pid_t p = fork();
    if (p == 0) modeBRank(m, o, id, rank);
    if (p < 0) {
      perror("fork");
      for (pid_t q : pids)
        if (q > 0) kill(q, SIGKILL);
    }
    pids[rank] = p;
  }
  int worst = kExitOk;
  std::string why;
  for (int left = m.nranks; left > 0;) {
    int st = 0;
    pid_t p = waitpid(-1, &st, 0);
    if (p < 0) {
      if (errno == EINTR) continue;
      break;
    }
    auto it = std::find(pids.begin(), pids.end(), p);
    if (it == pids.end()) continue;
    int rank = (int)(it - pids.begin());
    *it = -1;
    left--;
    if (abnormal(st)) {
      fprintf(stderr, "[B/%s] rank %d ended: %s; stopping the other ranks\n", m.transport.c_str(), rank,
              describeExit(st).c_str());
      for (pid_t q : pids)
        if (q > 0) kill(q, SIGKILL);
      worst = kExitFatal;
    } else if (WEXITSTATUS(st) != kExitOk && worst == kExitOk) {
      worst = kExitFailures;
    }
  }
  finish(worst);
}

void runMode(ModeRun& m, const Options& o) {
  m.slots = m.mode == "B" ? m.nranks : 1;
  m.sharedBytes = sizeof(Shared) + (size_t)m.slots * m.cases.size();
  void* p = mmap(nullptr, m.sharedBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(kExitFailures);
  }
  m.shared = static_cast<Shared*>(p);
  memset(p, 0, m.sharedBytes);
  printf("== %s/%s: %zu cases, %d rank%s, %d per GPU, %zu MiB of buffers per rank ==\n", m.mode.c_str(),
         m.transport.c_str(), m.cases.size(), m.nranks, m.nranks > 1 ? "s" : "", m.ranksPerGpu, m.arenaBytes >> 20);
  fflush(nullptr);
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    if (m.mode == "B") modeBCoordinator(m, o);
    modeAProcess(m, o);
  }
  int st = 0;
  if (pid < 0) {
    perror("fork");
    m.crash = "fork failed";
  } else {
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (abnormal(st)) m.crash = describeExit(st);
  }
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("   %s/%s finished in %.1f s%s%s\n", m.mode.c_str(), m.transport.c_str(), m.seconds,
         m.crash.empty() ? "" : ": ", m.crash.c_str());
}

// ---------------------------------------------------------------- summary

struct Row {
  std::string mode, transport, label;
  int pass = 0, fail = 0, notRun = 0;
};

int summarize(const std::vector<ModeRun>& runs) {
  std::vector<Row> rows;
  std::vector<std::string> failed, notRun;
  for (const ModeRun& m : runs) {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < m.cases.size(); i++) {
      const Case& c = m.cases[i];
      auto it = index.find(c.label);
      if (it == index.end()) {
        it = index.emplace(c.label, rows.size()).first;
        rows.push_back({m.mode, m.transport, c.label});
      }
      Row& row = rows[it->second];
      bool anyFail = false, anyMissing = false;
      for (int s = 0; s < m.slots; s++) {
        Status st = (Status)m.shared->status[s * m.cases.size() + i];
        anyFail |= st == Status::Fail;
        anyMissing |= st == Status::NotRun;
      }
      if (anyFail) {
        row.fail++;
        failed.push_back(c.name);
      } else if (anyMissing) {
        row.notRun++;
        notRun.push_back(c.name);
      } else {
        row.pass++;
      }
    }
  }
  int pass = 0, fail = 0, missing = 0;
  printf("\n== uniccl collective tests: summary ==\n");
  printf("%-8s %-9s %-15s %7s %6s %8s\n", "mode", "transport", "collective", "passed", "failed", "not run");
  for (const Row& r : rows) {
    printf("%-8s %-9s %-15s %7d %6d %8d%s\n", r.mode.c_str(), r.transport.c_str(), r.label.c_str(), r.pass, r.fail,
           r.notRun, r.fail || r.notRun ? "  <--" : "");
    pass += r.pass;
    fail += r.fail;
    missing += r.notRun;
  }
  for (const ModeRun& m : runs) {
    printf("%s/%s: %d rank%s (%d per GPU)%s, %.1f s%s%s\n", m.mode.c_str(), m.transport.c_str(), m.nranks,
           m.nranks > 1 ? "s" : "", m.ranksPerGpu, m.expectRefusal ? ", init refusal checked (no MPS)" : "",
           m.seconds, m.crash.empty() ? "" : ", test processes ended abnormally: ", m.crash.c_str());
    if (m.shared->perf.valid)
      printf("  1 GiB float AllReduce (%s/%s, %d GPUs): %.2f ms, algbw %.1f GB/s, busbw %.1f GB/s "
             "(busbw = 2(n-1)/n * bytes / time)\n",
             m.mode.c_str(), m.transport.c_str(), m.shared->perf.nranks, m.shared->perf.ms, m.shared->perf.algbw,
             m.shared->perf.busbw);
  }
  printf("tolerances: %s\n", toleranceSummary().c_str());
  const size_t kShow = 25;
  for (size_t i = 0; i < failed.size() && i < kShow; i++) printf("  failed:  %s\n", failed[i].c_str());
  if (failed.size() > kShow) printf("  ... and %zu more failed\n", failed.size() - kShow);
  for (size_t i = 0; i < notRun.size() && i < 5; i++) printf("  not run: %s\n", notRun[i].c_str());
  if (notRun.size() > 5) printf("  ... and %zu more not run\n", notRun.size() - 5);
  printf("%d passed, %d failed%s\n", pass, fail,
         missing ? (", " + std::to_string(missing) + " not run (counted as failed)").c_str() : "");
  return fail == 0 && missing == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  if (!parse(argc, argv, o)) {
    usage();
    return 2;
  }
  const int k = o.ranksPerGpu;
  if (k > 1) {
    // One work queue per rank of a GPU (a kernel queued behind another
    // rank's waiting kernel never starts): before the first runtime call,
    // which the GPU probe below makes in a child that inherits it.
    rt::raiseWorkQueues();
  }
  int ngpus = o.list && o.ngpus > 0 ? o.ngpus : probeGpus();
  if (ngpus == 0) {
    printf("coll_test: no GPU visible: skipped\n");
    return 77;
  }
  if (k > 1) {
    if (!o.build.quick && (o.build.huge || o.build.perf))
      printf("coll_test: %d ranks per GPU: skipping the 64 Mi-element cases and the 1 GiB Perf case (%d ranks' "
             "buffers share each GPU's memory)\n", k, k);
    o.build.huge = false;
    o.build.perf = false;
  }
  if (o.ngpus > 0) ngpus = std::min(ngpus, o.ngpus);

  std::vector<std::string> transports;
  if (o.transport == "both") transports = {"p2p", "shm"};
  else transports = {o.transport};

  std::vector<ModeRun> runs;
  for (const std::string& t : transports) {
    std::string label = t;
    if (t == "p2p") {
      unsetenv("NCCL_P2P_DISABLE");
      unsetenv("NCCL_SHM_DISABLE");
    }
    if (t == "shm") {
      setenv("NCCL_P2P_DISABLE", "1", 1);
      unsetenv("NCCL_SHM_DISABLE");
    }
    if (t == "net") {
      setenv("NCCL_P2P_DISABLE", "1", 1);
      setenv("NCCL_SHM_DISABLE", "1", 1);
      setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    }
    if (t == "env") {
      const char* p = getenv("NCCL_P2P_DISABLE");
      const char* sh = getenv("NCCL_SHM_DISABLE");
      const bool noP2p = p && atoi(p) != 0, noShm = sh && atoi(sh) != 0;
      label = !noP2p ? "p2p" : noShm ? "net" : "shm";
    }
    for (const std::string& mode : o.modes) {
      ModeRun m;
      m.mode = mode;
      m.transport = label;
      m.ranksPerGpu = k;
      m.nranks = ngpus * k;  // mode B: one process per rank, K of them on a GPU
      BuildOptions b = o.build;
      b.mode = mode;
      b.transport = label;
      b.nranks = m.nranks;
      b.nLocalGpus = mode == "B" ? 1 : ngpus;
      m.cases = buildCases(b);
      if (mode == "B" && k > 1 && !mpsRunning() && !m.cases.empty()) {
        // Kernels of different processes do not run at the same time on a
        // GPU without MPS: the library must refuse such a communicator.
        if (!o.list)
          printf("coll_test: B/%s: %d processes per GPU need an MPS server and none runs (no %s): checking that "
                 "init is refused (ncclInvalidUsage, message naming MPS) instead of running %zu cases\n",
                 label.c_str(), k, mpsControlPipe().c_str(), m.cases.size());
        Case c;
        c.name = "B/" + label + "/InitRefused/" + std::to_string(k) + "-processes-per-gpu-without-mps";
        c.label = "InitRefused";
        c.kind = Kind::InitRefused;
        c.timeoutS = o.build.timeoutS;
        m.cases.assign(1, c);
        m.expectRefusal = true;
      }
      for (const Case& c : m.cases) m.arenaBytes = std::max(m.arenaBytes, layoutCase(c, m.nranks).bytes);
      if (o.list) {
        for (const Case& c : m.cases) printf("%s\n", c.name.c_str());
        continue;
      }
      if (m.cases.empty()) continue;
      runMode(m, o);
      runs.push_back(std::move(m));
    }
  }
  if (o.list) return 0;
  if (runs.empty()) {
    printf("coll_test: no case matches the filter\n");
    return 0;
  }
  return summarize(runs);
}
