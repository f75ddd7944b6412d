// The benchmark driver: launch modes, communicators, buffers, timing, the
// result check and the table. One CollSpec (all_reduce.cc, ...) says what
// is measured; everything else lives here.
//
// Launch modes (one process drives nThreads x nGpus ranks):
//   single  one process, -t threads x -g GPUs; the unique id is shared in memory.
//   mpi     (built with MPI, started by mpirun/srun) one process per -t*-g GPUs;
//           rank 0's unique id goes out with MPI_Bcast; per-rank numbers are
//           combined with MPI_Allreduce.
//   env     NCCL_COMM_ID=<host:port> plus RANK/WORLD_SIZE (or UNICCL_RANK/
//           UNICCL_NRANKS) and LOCAL_RANK: every process calls ncclGetUniqueId,
//           which derives the same id from NCCL_COMM_ID (in NCCL and uniccl
//           alike; rank 0 hosts the rendezvous); numbers are combined with a
//           small ncclAllReduce after each row.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "common.h"

#if defined(UNICCL_BENCH_MPI)
#include <mpi.h>
#endif

namespace bench {

const std::vector<const CollSpec*>& allColls() {
  static const std::vector<const CollSpec*> colls = {&kAllReduce, &kAllGather, &kReduceScatter,
                                                     &kBroadcast, &kReduce, &kAlltoAll,
                                                     &kSendRecv, &kGather, &kScatter};
  return colls;
}

namespace {

enum class Mode { Single, Mpi, Env };
constexpr size_t kGuard = 4096;         // poisoned bytes around every buffer
constexpr unsigned char kPoison = 0xA5;
constexpr int kSlots = 8;

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------ failures
// A failed call on one rank would leave the others waiting inside a
// collective, so any failure ends the whole job at once.
[[noreturn]] void fatal(const char* fmtStr, ...) {
  va_list ap;
  va_start(ap, fmtStr);
  char host[64] = "?";
  gethostname(host, sizeof host);
  fprintf(stderr, "%s:%d: ", host, int(getpid()));
  vfprintf(stderr, fmtStr, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stdout);
  fflush(stderr);
#if defined(UNICCL_BENCH_MPI)
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Abort(MPI_COMM_WORLD, 2);
#endif
  std::_Exit(2);
}

#define NCCLCHECK(cmd)                                                                        \
  do {                                                                                        \
    ncclResult_t r_ = (cmd);                                                                  \
    if (r_ != ncclSuccess)                                                                    \
      fatal("%s:%d: %s failed: %s (%d); last error: %s", __FILE__, __LINE__, #cmd,            \
            ncclGetErrorString(r_), int(r_), ncclGetLastError(nullptr));                      \
  } while (0)

#define RTCHECK(cmd)                                                                          \
  do {                                                                                        \
    benchError_t e_ = (cmd);                                                                  \
    if (e_ != benchSuccess)                                                                   \
      fatal("%s:%d: %s failed: %s", __FILE__, __LINE__, #cmd, benchGetErrorString(e_));       \
  } while (0)

// ------------------------------------------------------------------ process state
struct World {
  Mode mode = Mode::Single;
  int nprocs = 1, proc = 0, localProc = 0, localProcs = 1;
  int nThreads = 1, nGpus = 1, nranks = 1;  // nGpus: ranks per thread (-g x -P)
  int ranksPerGpu = 1;                       // -P: consecutive ranks of a process share a GPU
  ncclUniqueId id;
};

class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const unsigned gen = gen_;
    if (++count_ == n_) { count_ = 0; gen_++; cv_.notify_all(); return; }
    cv_.wait(lock, [&] { return gen_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0;
  unsigned gen_ = 0;
};

struct Gpu {
  int dev = 0, rank = 0;
  ncclComm_t comm = nullptr;
  benchStream_t stream = nullptr;
  char* alloc = nullptr;
  size_t allocBytes = 0, sendOff = 0, recvOff = 0;  // region offsets inside alloc
  double* scratch = nullptr;                        // 3 * kSlots doubles for env-mode combining
  void* regHandle = nullptr;                        // -R 1: ncclCommRegister's handle
  ncclWindow_t window = nullptr;                    // -R 2: the symmetric window over alloc
  std::unique_ptr<char[]> host;                     // staging for inputs and outputs
  ncclRedOp_t redop = ncclSum;
  bool ownsRedop = false;
  benchGraphExec_t exec = nullptr;
};

struct Values {
  std::array<double, kSlots> sum{}, min{}, max{};
  Values() { min.fill(std::numeric_limits<double>::infinity()); max.fill(-std::numeric_limits<double>::infinity()); }
};

struct Shared {
  explicit Shared(int nThreads) : barrier(nThreads) {}
  Barrier barrier;
  std::mutex mu;
  Values accum, result;
  std::atomic<long long> failures{0};
  FILE* json = nullptr;
  bool firstJson = true;
  double bwSum = 0;
  int bwCount = 0;
  long long totalWrong = 0, totalOob = 0;
};

struct Thread {
  int index = 0;
  std::vector<Gpu> gpus;
  benchEvent_t start = nullptr, stop = nullptr;
  uint64_t seedCounter = 0;
};

const World* gWorld;
const Args* gArgs;
const CollSpec* gColl;
Shared* gShared;
uint64_t gBaseSeed = 0x5eed5eedull;

bool isPrinter(const Thread& th) { return gWorld->proc == 0 && th.index == 0; }

// ------------------------------------------------------------------ launch
const char* firstEnv(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = getenv(n)) return v;
  return nullptr;
}

bool launchedByMpi() { return firstEnv({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) != nullptr; }

void setupWorld(int* argc, char*** argv, World* w) {
  const char* envSize = firstEnv({"UNICCL_NRANKS", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  const char* envRank = firstEnv({"UNICCL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"});
#if defined(UNICCL_BENCH_MPI)
  if (launchedByMpi()) {
    w->mode = Mode::Mpi;
    MPI_Init(argc, argv);
    MPI_Comm_size(MPI_COMM_WORLD, &w->nprocs);
    MPI_Comm_rank(MPI_COMM_WORLD, &w->proc);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->proc, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &w->localProc);
    MPI_Comm_size(local, &w->localProcs);
    MPI_Comm_free(&local);
    return;
  }
#endif
  if (getenv("NCCL_COMM_ID") && envSize) {
    w->mode = Mode::Env;
    w->nprocs = atoi(envSize);
    w->proc = envRank ? atoi(envRank) : -1;
    if (w->nprocs < 1 || w->proc < 0 || w->proc >= w->nprocs)
      fatal("NCCL_COMM_ID is set but the process rank/count is not usable: set RANK and WORLD_SIZE "
            "(or UNICCL_RANK and UNICCL_NRANKS) with 0 <= rank < size");
    const char* local = firstEnv({"UNICCL_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"});
    const char* localSize = firstEnv({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"});
    w->localProc = local ? atoi(local) : w->proc;  // one node when LOCAL_RANK is not given
    w->localProcs = localSize ? atoi(localSize) : w->nprocs;
    return;
  }
  if (launchedByMpi())
    fatal("started by an MPI launcher, but this build has no MPI support: rebuild with MPI, "
          "or set NCCL_COMM_ID=<host:port> so the processes meet through the environment");
}

void setupUniqueId(World* w) {
  switch (w->mode) {
    case Mode::Single:
    case Mode::Env:  // with NCCL_COMM_ID set every process derives the same id
      NCCLCHECK(ncclGetUniqueId(&w->id));
      break;
    case Mode::Mpi:
#if defined(UNICCL_BENCH_MPI)
      if (w->proc == 0) NCCLCHECK(ncclGetUniqueId(&w->id));
      MPI_Bcast(&w->id, sizeof w->id, MPI_BYTE, 0, MPI_COMM_WORLD);
#endif
      break;
  }
}

int deviceOf(const World& w, int t, int g) {
  return (w.localProc * w.nThreads * w.nGpus + t * w.nGpus + g) / w.ranksPerGpu;
}
int rankOf(const World& w, int t, int g) { return w.proc * w.nThreads * w.nGpus + t * w.nGpus + g; }

std::vector<std::string> localDeviceLines(const World& w) {
  std::vector<std::string> lines;
  char host[64] = "?";
  gethostname(host, sizeof host);
  for (int t = 0; t < w.nThreads; t++) {
    for (int g = 0; g < w.nGpus; g++) {
      const int dev = deviceOf(w, t, g);
      benchDeviceProp_t prop;
      char busId[64] = "?";
      RTCHECK(benchGetDeviceProperties(&prop, dev));
      RTCHECK(benchDeviceGetPCIBusId(busId, sizeof busId, dev));
      char line[512];
      snprintf(line, sizeof line, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s",
               rankOf(w, t, g), 0, int(getpid()), host, dev, busId, prop.name);
      lines.push_back(line);
    }
  }
  return lines;
}

// Device lines of all ranks, for rank 0's header.
std::vector<std::string> allDeviceLines(const World& w) {
  std::vector<std::string> lines = localDeviceLines(w);
#if defined(UNICCL_BENCH_MPI)
  if (w.mode == Mode::Mpi) {
    constexpr int kLen = 512;
    std::vector<char> mine(lines.size() * kLen, 0), all;
    for (size_t i = 0; i < lines.size(); i++) strncpy(&mine[i * kLen], lines[i].c_str(), kLen - 1);
    if (w.proc == 0) all.resize(mine.size() * w.nprocs);
    MPI_Gather(mine.data(), int(mine.size()), MPI_CHAR, all.data(), int(mine.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
    lines.clear();
    for (size_t i = 0; i * kLen < all.size(); i++) lines.push_back(&all[i * kLen]);
  }
#endif
  if (w.mode == Mode::Env && w.nprocs > 1)
    lines.push_back("#  (ranks of other processes print no device line without MPI)");
  return lines;
}

// ------------------------------------------------------------------ combining
// Combines per-thread values over all threads of all processes; every
// thread of the process must call it with the same layout.
Values combine(Thread& th, const Values& mine) {
  Shared& sh = *gShared;
  const World& w = *gWorld;
  {
    std::lock_guard<std::mutex> lock(sh.mu);
    for (int i = 0; i < kSlots; i++) {
      sh.accum.sum[i] += mine.sum[i];
      sh.accum.min[i] = std::min(sh.accum.min[i], mine.min[i]);
      sh.accum.max[i] = std::max(sh.accum.max[i], mine.max[i]);
    }
  }
  sh.barrier.wait();
  if (th.index == 0) {
    sh.result = sh.accum;
    sh.accum = Values();
#if defined(UNICCL_BENCH_MPI)
    if (w.mode == Mode::Mpi) {
      MPI_Allreduce(MPI_IN_PLACE, sh.result.sum.data(), kSlots, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, sh.result.min.data(), kSlots, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, sh.result.max.data(), kSlots, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
#endif
  }
  sh.barrier.wait();
  Values out = sh.result;
  if (w.mode == Mode::Env && w.nprocs > 1) {
    // Without MPI the library itself carries the numbers between processes:
    // the first rank of each process contributes its process's values, the
    // others the identity, and every rank joins the three reductions.
    const Values identity;
    // float, whatever datatypes the build has kernels for (a
    // -Dkernel_filter=f32 build has no double ones): times keep 7 digits,
    // counts are exact up to 2^24.
    using Wire = float;
    const ncclDataType_t wireType = ncclFloat32;
    Wire host[3 * kSlots];
    auto pack = [&](const Values& v) {
      for (int i = 0; i < kSlots; i++) {
        host[i] = (Wire)v.sum[i];
        host[kSlots + i] = (Wire)v.min[i];
        host[2 * kSlots + i] = (Wire)v.max[i];
      }
    };
    Wire* base = nullptr;
    NCCLCHECK(ncclGroupStart());
    for (size_t g = 0; g < th.gpus.size(); g++) {
      Gpu& gpu = th.gpus[g];
      pack((th.index == 0 && g == 0) ? out : identity);
      base = reinterpret_cast<Wire*>(gpu.scratch);
      RTCHECK(benchSetDevice(gpu.dev));
      RTCHECK(benchMemcpyToDevice(base, host, sizeof host));
      NCCLCHECK(ncclAllReduce(base, base, kSlots, wireType, ncclSum, gpu.comm, gpu.stream));
      NCCLCHECK(ncclAllReduce(base + kSlots, base + kSlots, kSlots, wireType, ncclMin, gpu.comm, gpu.stream));
      NCCLCHECK(ncclAllReduce(base + 2 * kSlots, base + 2 * kSlots, kSlots, wireType, ncclMax, gpu.comm, gpu.stream));
    }
    NCCLCHECK(ncclGroupEnd());
    for (Gpu& gpu : th.gpus) {
      RTCHECK(benchSetDevice(gpu.dev));
      RTCHECK(benchDeviceSynchronize());
    }
    RTCHECK(benchSetDevice(th.gpus[0].dev));
    RTCHECK(benchMemcpyToHost(host, th.gpus[0].scratch, sizeof host));
    for (int i = 0; i < kSlots; i++) {
      out.sum[i] = host[i];
      out.min[i] = host[kSlots + i];
      out.max[i] = host[2 * kSlots + i];
    }
  }
  return out;
}

// ------------------------------------------------------------------ waiting
// Waits for every stream of the thread, watching the communicators' async
// errors and the -T deadline so a broken run fails instead of hanging.
void waitAll(Thread& th) {
  const auto begin = Clock::now();
  for (Gpu& gpu : th.gpus) {
    for (;;) {
      benchError_t e = benchStreamQuery(gpu.stream);
      if (e == benchSuccess) break;
      if (e != benchErrorNotReady) fatal("rank %d: stream failed: %s", gpu.rank, benchGetErrorString(e));
      ncclResult_t async = ncclSuccess;
      NCCLCHECK(ncclCommGetAsyncError(gpu.comm, &async));
      if (async != ncclSuccess && async != ncclInProgress)
        fatal("rank %d: communicator reported an asynchronous error: %s; last error: %s", gpu.rank,
              ncclGetErrorString(async), ncclGetLastError(gpu.comm));
      if (gArgs->timeoutSec > 0 &&
          std::chrono::duration<double>(Clock::now() - begin).count() > gArgs->timeoutSec) {
        for (Gpu& g : th.gpus) ncclCommAbort(g.comm);
        fatal("rank %d: operation did not complete within -T %.1f s: communicators aborted", gpu.rank,
              gArgs->timeoutSec);
      }
      std::this_thread::yield();
    }
  }
}

// ------------------------------------------------------------------ one measurement
struct Placement {
  const TypeInfo* t;
  Op op;
  int root;
  CollSizes sizes;
  bool inPlace;
};

void pointers(const Gpu& gpu, const Placement& p, char** send, char** recv) {
  const size_t tb = p.t->bytes;
  if (p.inPlace) {
    char* base = gpu.alloc + gpu.recvOff;
    *send = base + size_t(gpu.rank) * p.sizes.sendInplaceStride * tb;
    *recv = base + size_t(gpu.rank) * p.sizes.recvInplaceStride * tb;
  } else {
    *send = gpu.alloc + gpu.sendOff;
    *recv = gpu.alloc + gpu.recvOff;
  }
}

// Enqueues `agg` operations on every GPU of the thread in one group.
void issue(Thread& th, const Placement& p, int agg) {
  NCCLCHECK(ncclGroupStart());
  for (int a = 0; a < agg; a++) {
    for (Gpu& gpu : th.gpus) {
      char *send, *recv;
      pointers(gpu, p, &send, &recv);
      CallArgs c{send, recv, p.sizes.paramCount, p.t->type, gpu.redop, p.root,
                 gpu.rank, gWorld->nranks, gpu.comm, gpu.stream};
      ncclResult_t r = gColl->call(c);
      if (r != ncclSuccess)
        fatal("rank %d: nccl%s(count %zu, %s, root %d) failed: %s; last error: %s", gpu.rank, gColl->name,
              p.sizes.paramCount, p.t->name, p.root, ncclGetErrorString(r), ncclGetLastError(gpu.comm));
    }
  }
  NCCLCHECK(ncclGroupEnd());
}

// Captures `iters` iterations of `agg` operations into one graph per GPU.
void capture(Thread& th, const Placement& p, int iters, int agg) {
  for (Gpu& gpu : th.gpus) {
    RTCHECK(benchSetDevice(gpu.dev));
    RTCHECK(benchStreamBeginCapture(gpu.stream));
  }
  for (int i = 0; i < iters; i++) issue(th, p, agg);
  // End every capture before instantiating: instantiation is not permitted
  // while another stream of this thread is still capturing.
  std::vector<benchGraph_t> graphs(th.gpus.size());
  for (size_t g = 0; g < th.gpus.size(); g++) {
    RTCHECK(benchSetDevice(th.gpus[g].dev));
    RTCHECK(benchStreamEndCapture(th.gpus[g].stream, &graphs[g]));
  }
  for (size_t g = 0; g < th.gpus.size(); g++) {
    RTCHECK(benchSetDevice(th.gpus[g].dev));
    RTCHECK(benchGraphInstantiate(&th.gpus[g].exec, graphs[g]));
    RTCHECK(benchGraphDestroy(graphs[g]));
  }
}

double launchGraphs(Thread& th) {
  double cpu = 0;
  for (Gpu& gpu : th.gpus) {
    auto t0 = Clock::now();
    RTCHECK(benchGraphLaunch(gpu.exec, gpu.stream));
    cpu += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  return cpu;
}

void dropGraphs(Thread& th) {
  for (Gpu& gpu : th.gpus) {
    if (gpu.exec) RTCHECK(benchGraphExecDestroy(gpu.exec));
    gpu.exec = nullptr;
  }
}

void uploadInput(Thread& th, const Placement& p, uint64_t seed) {
  DataGen gen{p.t, p.op, gWorld->nranks, seed};
  for (Gpu& gpu : th.gpus) {
    char *send, *recv;
    pointers(gpu, p, &send, &recv);
    fillInput(gen, gpu.rank, gpu.host.get(), p.sizes.sendCount);
    RTCHECK(benchSetDevice(gpu.dev));
    RTCHECK(benchMemcpyToDevice(send, gpu.host.get(), p.sizes.sendCount * p.t->bytes));
    // The operations run on non-blocking streams, which the legacy stream's
    // memset (the poison) and copy do not order, and a copy from pageable
    // memory may return before its DMA is done: wait for both, or the
    // operation can read stale input or have its output overwritten.
    RTCHECK(benchDeviceSynchronize());
  }
}

// Every rank of every process reaches this point before any goes on (the
// thread barrier, then MPI's across processes). Env mode has no side
// channel: its processes start their runs unaligned.
void barrierAll(Thread& th) {
  gShared->barrier.wait();
#if defined(UNICCL_BENCH_MPI)
  if (gWorld->mode == Mode::Mpi) {
    if (th.index == 0) MPI_Barrier(MPI_COMM_WORLD);
    gShared->barrier.wait();
  }
#endif
}

// Times the operation; returns {device time per operation, host enqueue time per iteration} in us.
std::pair<double, double> timeIt(Thread& th, const Placement& p) {
  const Args& a = *gArgs;
  uploadInput(th, p, gBaseSeed + 0x1000 * ++th.seedCounter);
  barrierAll(th);
  for (int i = 0; i < a.warmup; i++) {
    issue(th, p, a.aggIters);
    if (a.blocking) waitAll(th);
  }
  waitAll(th);
  if (a.graphLaunches > 0) {
    capture(th, p, a.iters, a.aggIters);
    launchGraphs(th);  // the first replay uploads the graph: not timed
    waitAll(th);
  }
  barrierAll(th);
  Gpu& first = th.gpus[0];
  RTCHECK(benchSetDevice(first.dev));
  RTCHECK(benchEventRecord(th.start, first.stream));
  double cpu = 0;
  if (a.graphLaunches > 0) {
    for (int l = 0; l < a.graphLaunches; l++) cpu += launchGraphs(th);
  } else {
    for (int i = 0; i < a.iters; i++) {
      auto t0 = Clock::now();
      issue(th, p, a.aggIters);
      cpu += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      if (a.blocking) waitAll(th);
    }
  }
  RTCHECK(benchSetDevice(first.dev));
  RTCHECK(benchEventRecord(th.stop, first.stream));
  waitAll(th);
  float ms = 0;
  RTCHECK(benchEventElapsedTime(&ms, th.start, th.stop));
  dropGraphs(th);
  const double launches = a.graphLaunches > 0 ? a.graphLaunches : 1;
  return {ms * 1e3 / (double(a.iters) * a.aggIters * launches), cpu / (a.iters * launches)};
}

struct Interval { size_t begin, end; };

// Bytes in the merged windows of the allocation that differ from the poison.
long long countClobbered(Gpu& gpu, std::vector<Interval> windows) {
  std::sort(windows.begin(), windows.end(), [](const Interval& x, const Interval& y) { return x.begin < y.begin; });
  std::vector<Interval> merged;
  for (Interval w : windows) {
    w.end = std::min(w.end, gpu.allocBytes);
    if (w.begin >= w.end) continue;
    if (!merged.empty() && w.begin <= merged.back().end) merged.back().end = std::max(merged.back().end, w.end);
    else merged.push_back(w);
  }
  long long bad = 0;
  for (const Interval& w : merged) {
    RTCHECK(benchMemcpyToHost(gpu.host.get(), gpu.alloc + w.begin, w.end - w.begin));
    for (size_t i = 0; i < w.end - w.begin; i++) bad += static_cast<unsigned char>(gpu.host[i]) != kPoison;
  }
  return bad;
}

// One run on fresh data with poisoned surroundings; returns {#wrong, out-of-bounds bytes}.
std::pair<long long, long long> checkIt(Thread& th, const Placement& p) {
  const uint64_t seed = gBaseSeed + 0x1000 * ++th.seedCounter + 1;
  for (Gpu& gpu : th.gpus) {
    RTCHECK(benchSetDevice(gpu.dev));
    RTCHECK(benchMemset(gpu.alloc, kPoison, gpu.allocBytes));
  }
  uploadInput(th, p, seed);
  barrierAll(th);
  if (gArgs->graphLaunches > 0) {  // check what was timed: the captured path
    capture(th, p, 1, 1);
    launchGraphs(th);
  } else {
    issue(th, p, 1);
  }
  waitAll(th);
  dropGraphs(th);

  const size_t tb = p.t->bytes;
  DataGen gen{p.t, p.op, gWorld->nranks, seed};
  long long wrong = 0, oob = 0;
  for (Gpu& gpu : th.gpus) {
    RTCHECK(benchSetDevice(gpu.dev));
    char *send, *recv;
    pointers(gpu, p, &send, &recv);
    const Expectation e = gColl->expect(gpu.rank, gWorld->nranks, p.root, p.sizes);
    const size_t sendB = p.sizes.sendCount * tb, recvB = p.sizes.recvCount * tb;
    if (!e.segments.empty()) {
      RTCHECK(benchMemcpyToHost(gpu.host.get(), recv, recvB));
      wrong += checkOutput(gen, gpu.rank, e, gpu.host.get()).wrong;
    }
    const size_t s = size_t(send - gpu.alloc), r = size_t(recv - gpu.alloc);
    std::vector<Interval> watch;
    if (!p.inPlace) {
      watch.push_back({s - kGuard, s});
      watch.push_back({s + sendB, s + sendB + kGuard});
      watch.push_back({r - kGuard, r});
      watch.push_back({r + recvB, r + recvB + kGuard});
      if (e.outputUnused) watch.push_back({r, r + recvB});
    } else {
      const size_t lo = std::min(s, r), hi = std::max(s + sendB, r + recvB);
      watch.push_back({lo - kGuard, lo});
      watch.push_back({hi, hi + kGuard});
      if (e.outputUnused) {  // the unused output must keep the poison, except where the input sits
        watch.push_back({r, std::min(r + recvB, s)});
        watch.push_back({std::max(r, s + sendB), r + recvB});
      }
    }
    oob += countClobbered(gpu, watch);
  }
  return {wrong, oob};
}

ncclRedOp_t builtinOp(Op op) {
  switch (op) {
    case Op::Prod: return ncclProd;
    case Op::Max: return ncclMax;
    case Op::Min: return ncclMin;
    case Op::Avg: return ncclAvg;
    default: return ncclSum;
  }
}

void setOp(Thread& th, const TypeInfo& t, Op op) {
  for (Gpu& gpu : th.gpus) {
    if (op == Op::PreMulSum) {
      uint64_t scalar = preMulScalarBits(t, gpu.rank);  // little-endian: the low bytes hold the value
      NCCLCHECK(ncclRedOpCreatePreMulSum(&gpu.redop, &scalar, t.type, ncclScalarHostImmediate, gpu.comm));
      gpu.ownsRedop = true;
    } else {
      gpu.redop = builtinOp(op);
    }
  }
}

void clearOp(Thread& th) {
  for (Gpu& gpu : th.gpus) {
    if (gpu.ownsRedop) NCCLCHECK(ncclRedOpDestroy(gpu.redop, gpu.comm));
    gpu.ownsRedop = false;
    gpu.redop = ncclSum;
  }
}

// Contributes one per-thread number under the -a rule into slot i.
void contributeTime(const Thread& th, Values* v, int i, double x) {
  switch (gArgs->average) {
    case 0: v->sum[i] = isPrinter(th) ? x : 0; break;
    case 1: v->sum[i] = x; break;
    case 2: v->min[i] = x; break;
    default: v->max[i] = x; break;
  }
}

double resultTime(const Values& v, int i) {
  switch (gArgs->average) {
    case 0: return v.sum[i];
    case 1: return v.sum[i] / (gWorld->nprocs * gWorld->nThreads);
    case 2: return v.min[i];
    default: return v.max[i];
  }
}

void runRow(Thread& th, const TypeInfo& t, Op op, int root, size_t bytes) {
  const World& w = *gWorld;
  Row row{};
  Values mine;
  Placement p{&t, op, root, {}, false};
  gColl->sizes(bytes, t.bytes, w.nranks, &p.sizes);
  for (int ip = 0; ip < 2; ip++) {
    p.inPlace = ip == 1;
    if (p.inPlace && !gColl->inPlaceDefined) continue;
    auto [us, cpu] = timeIt(th, p);
    contributeTime(th, &mine, 2 * ip, us);
    contributeTime(th, &mine, 2 * ip + 1, cpu);
    if (gArgs->check) {
      auto [wrong, oob] = checkIt(th, p);
      mine.sum[4 + 2 * ip] = double(wrong);
      mine.sum[5 + 2 * ip] = double(oob);
    }
  }
  const Values all = combine(th, mine);
  if (th.index != 0) return;  // every process's first thread keeps the totals (for its exit code)
  Shared& sh = *gShared;
  row.bytes = p.sizes.totalBytes;
  row.count = p.sizes.totalBytes / t.bytes;
  row.type = t.name;
  row.redop = opName(op);
  row.root = gColl->hasRoot ? root : -1;
  for (int ip = 0; ip < 2; ip++) {
    RowHalf& h = ip ? row.ip : row.oop;
    if (ip && !gColl->inPlaceDefined) continue;
    h.valid = true;
    h.timeUs = resultTime(all, 2 * ip);
    h.cpuUs = resultTime(all, 2 * ip + 1);
    h.algbw = h.timeUs > 0 ? double(row.bytes) / 1e3 / h.timeUs : 0;  // GB/s with GB = 1e9 B
    h.busbw = h.algbw * gColl->busbwFactor(w.nranks);
    h.wrong = gArgs->check ? (long long)all.sum[4 + 2 * ip] : -1;
    if (gArgs->check) {
      sh.totalWrong += h.wrong;
      sh.totalOob += (long long)all.sum[5 + 2 * ip];
    }
    sh.bwSum += h.busbw;
    sh.bwCount++;
  }
  if (!isPrinter(th)) return;
  printf("%s\n", formatRow(row, gArgs->reportCpu).c_str());
  fflush(stdout);
  if (sh.json) {
    fprintf(sh.json, "%s  %s", sh.firstJson ? "" : ",\n", rowJson(*gColl, row, w.nranks, gArgs->graphLaunches).c_str());
    sh.firstJson = false;
  }
}

// ------------------------------------------------------------------ per thread
void threadMain(Thread& th) {
  const World& w = *gWorld;
  const Args& a = *gArgs;
  th.gpus.resize(w.nGpus);
  size_t maxSend = 0, maxRegion = 0;
  for (const TypeInfo* t : a.types) {
    CollSizes s;
    gColl->sizes(a.maxBytes, t->bytes, w.nranks, &s);
    maxSend = std::max(maxSend, s.sendCount * t->bytes);
    maxRegion = std::max({maxRegion, s.sendCount * t->bytes, s.recvCount * t->bytes});
  }
  auto roundUp = [](size_t x) { return (x + kGuard - 1) / kGuard * kGuard; };
  for (int g = 0; g < w.nGpus; g++) {
    Gpu& gpu = th.gpus[g];
    gpu.dev = deviceOf(w, th.index, g);
    gpu.rank = rankOf(w, th.index, g);
    RTCHECK(benchSetDevice(gpu.dev));
    RTCHECK(benchStreamCreate(&gpu.stream));
    gpu.sendOff = kGuard;
    gpu.recvOff = gpu.sendOff + roundUp(maxSend) + kGuard;
    gpu.allocBytes = gpu.recvOff + roundUp(maxRegion) + kGuard;
    void* p = nullptr;
    // Registered buffers come from ncclMemAlloc (memory peers can map), as nccl-tests' -R.
    if (a.registration > 0) NCCLCHECK(ncclMemAlloc(&p, gpu.allocBytes));
    else RTCHECK(benchMalloc(&p, gpu.allocBytes));
    gpu.alloc = static_cast<char*>(p);
    RTCHECK(benchMalloc(&p, 3 * kSlots * sizeof(double)));
    gpu.scratch = static_cast<double*>(p);
    gpu.host.reset(new char[std::max(maxSend, maxRegion) + 4 * kGuard]);
  }
  RTCHECK(benchSetDevice(th.gpus[0].dev));
  RTCHECK(benchEventCreate(&th.start));
  RTCHECK(benchEventCreate(&th.stop));

  NCCLCHECK(ncclGroupStart());
  for (Gpu& gpu : th.gpus) {
    RTCHECK(benchSetDevice(gpu.dev));
    NCCLCHECK(ncclCommInitRank(&gpu.comm, w.nranks, w.id, gpu.rank));
  }
  NCCLCHECK(ncclGroupEnd());
  // -R: register the whole allocation (send and receive regions) with every
  // comm; windows are collective, so one group over this thread's ranks.
  if (a.registration == 1) {
    for (Gpu& gpu : th.gpus) NCCLCHECK(ncclCommRegister(gpu.comm, gpu.alloc, gpu.allocBytes, &gpu.regHandle));
  } else if (a.registration == 2) {
    NCCLCHECK(ncclGroupStart());
    for (Gpu& gpu : th.gpus)
      NCCLCHECK(ncclCommWindowRegister(gpu.comm, gpu.alloc, gpu.allocBytes, &gpu.window, NCCL_WIN_COLL_SYMMETRIC));
    NCCLCHECK(ncclGroupEnd());
  }

  std::vector<int> roots{0};
  if (gColl->hasRoot) {
    if (a.root >= w.nranks) fatal("-r %d: root must be below the number of ranks (%d)", a.root, w.nranks);
    roots.assign(1, a.root);
    if (a.root < 0) {
      roots.clear();
      for (int r = 0; r < w.nranks; r++) roots.push_back(r);
    }
  }
  const std::vector<size_t> sizes = sweepSizes(a);
  for (const TypeInfo* t : a.types) {
    for (Op op : a.ops) {
      setOp(th, *t, op);
      for (int root : roots)
        for (size_t bytes : sizes) runRow(th, *t, op, root, bytes);
      clearOp(th);
    }
  }

  for (Gpu& gpu : th.gpus) {
    RTCHECK(benchSetDevice(gpu.dev));
    if (gpu.regHandle != nullptr) NCCLCHECK(ncclCommDeregister(gpu.comm, gpu.regHandle));
    if (gpu.window != nullptr) NCCLCHECK(ncclCommWindowDeregister(gpu.comm, gpu.window));
    NCCLCHECK(ncclCommDestroy(gpu.comm));
    if (a.registration > 0) NCCLCHECK(ncclMemFree(gpu.alloc));
    else RTCHECK(benchFree(gpu.alloc));
    RTCHECK(benchFree(gpu.scratch));
    RTCHECK(benchStreamDestroy(gpu.stream));
  }
  RTCHECK(benchEventDestroy(th.start));
  RTCHECK(benchEventDestroy(th.stop));
}

void printHeader(const World& w, const Args& a, const std::vector<std::string>& devices) {
  int version = 0;
  NCCLCHECK(ncclGetVersion(&version));
  const char* mode = w.mode == Mode::Mpi ? "mpi" : w.mode == Mode::Env ? "env" : "single";
  // The file the library was loaded from: uniccl's drop-in and the vendor's
  // library share a name and a version code, and only the path tells a
  // comparison run that went to the wrong one.
  Dl_info lib{};
  const char* libPath = dladdr(reinterpret_cast<void*>(&ncclGetVersion), &lib) != 0 && lib.dli_fname != nullptr
                            ? lib.dli_fname
                            : "(unknown)";
  printf("# %s: %s, library version code %d (%s), %s runtime, launch %s\n", gColl->tool, gColl->name, version,
         libPath, BENCH_RT_NAME, mode);
  if (a.registration > 0)
    printf("# buffers: ncclMemAlloc, %s (-R %d)\n",
           a.registration == 1 ? "ncclCommRegister" : "symmetric window (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC)",
           a.registration);
  if (w.ranksPerGpu > 1) {
    printf("# nranks %d = %d process(es) x nThread %d x nGpus %d x %d ranks per GPU (-P)\n", w.nranks, w.nprocs,
           w.nThreads, w.nGpus / w.ranksPerGpu, w.ranksPerGpu);
    printf("# NOTE: %d ranks share each GPU (UNICCL_RANKS_PER_GPU): the bandwidth below is that of ranks moving data "
           "through one GPU's memory and SMs, not of NVLink or any link between GPUs\n", w.ranksPerGpu);
  } else {
    printf("# nranks %d = %d process(es) x nThread %d x nGpus %d\n", w.nranks, w.nprocs, w.nThreads, w.nGpus);
  }
  printf("# minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d agg iters: %d validation: %d "
         "graph: %d blocking: %d average: %d\n",
         a.minBytes, a.maxBytes,
         a.stepFactor > 1 ? (std::to_string(a.stepFactor) + "(factor)").c_str()
                          : (std::to_string(a.stepBytes) + "(bytes)").c_str(),
         a.warmup, a.iters, a.aggIters, a.check, a.graphLaunches, a.blocking, a.average);
  printf("# data seed 0x%llx (UNICCL_BENCH_SEED); check: exact, except floating avg: "
         "|err| <= (n+2)*2^-(m+1)*sum|terms/n| (m = mantissa bits)\n", (unsigned long long)gBaseSeed);
  printf("#\n# Using devices\n");
  for (const auto& l : devices) printf("%s\n", l.c_str());
  printf("#\n%s", tableHeader(a.reportCpu).c_str());
  fflush(stdout);
}

}  // namespace

int benchMain(int argc, char** argv, const CollSpec& coll) {
  gColl = &coll;
  Args args;
  bool self = false;
  if (!parseArgs(argc, argv, coll, &args, &self)) return 1;
  if (self) return selfTest();
  gArgs = &args;
  if (const char* s = getenv("UNICCL_BENCH_SEED")) gBaseSeed = strtoull(s, nullptr, 0);

  if (args.ranksPerGpu > 1) {
#if defined(UNICCL_VERSION_CODE)
    // uniccl's opt-in for ranks sharing a GPU, and a host-to-GPU work queue
    // per rank (a kernel queued behind another rank's waiting kernel never
    // starts): both before the first runtime call.
    setenv("UNICCL_RANKS_PER_GPU", std::to_string(args.ranksPerGpu).c_str(), 1);
    setenv(BENCH_RT_QUEUES_ENV, "32", 0);
#else
    fatal("-P %d: several ranks on one GPU is a uniccl feature (UNICCL_RANKS_PER_GPU); this build uses NCCL/RCCL, "
          "which refuses two ranks on one GPU (duplicate GPU)", args.ranksPerGpu);
#endif
  }

  World w;
  setupWorld(&argc, &argv, &w);
  w.nThreads = args.nThreads;
  w.ranksPerGpu = args.ranksPerGpu;
  w.nGpus = args.nGpus * args.ranksPerGpu;
  w.nranks = w.nprocs * w.nThreads * w.nGpus;
  gWorld = &w;
  int visible = 0;
  RTCHECK(benchGetDeviceCount(&visible));
  const int needed = deviceOf(w, w.nThreads - 1, w.nGpus - 1) + 1;
  const int first = deviceOf(w, 0, 0);
  if (needed > visible)
    fatal("local process %d needs GPUs %d..%d (-t %d x -g %d) but only %d are visible", w.localProc, first,
          needed - 1, w.nThreads, args.nGpus, visible);
  setHostWorkers(int(std::max(1u, std::thread::hardware_concurrency())) / std::max(1, w.localProcs * w.nThreads));
  const std::vector<std::string> devices = allDeviceLines(w);
  setupUniqueId(&w);

  Shared shared(w.nThreads);
  gShared = &shared;
  if (w.proc == 0) {
    printHeader(w, args, devices);
    if (!args.jsonPath.empty()) {
      shared.json = fopen(args.jsonPath.c_str(), "w");
      if (!shared.json) fatal("cannot write -J %s: %s", args.jsonPath.c_str(), strerror(errno));
      fprintf(shared.json, "[\n");
    }
  }

  std::vector<Thread> threads(w.nThreads);
  std::vector<std::thread> workers;
  for (int t = 0; t < w.nThreads; t++) {
    threads[t].index = t;
    workers.emplace_back(threadMain, std::ref(threads[t]));
  }
  for (auto& th : workers) th.join();

  if (w.proc == 0) {
    if (shared.json) {
      fprintf(shared.json, "\n]\n");
      fclose(shared.json);
    }
    printf("# Out of bounds values : %lld %s\n", shared.totalOob, shared.totalOob ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", shared.bwCount ? shared.bwSum / shared.bwCount : 0.0);
    if (shared.totalWrong) printf("# FAILED: %lld wrong values\n", shared.totalWrong);
  }
  // The totals were combined over all ranks, so every process returns the same code.
  const int rc = (shared.totalWrong || shared.totalOob) ? 1 : 0;
#if defined(UNICCL_BENCH_MPI)
  if (w.mode == Mode::Mpi) MPI_Finalize();
#endif
  fflush(stdout);
  return rc;
}

}  // namespace bench
