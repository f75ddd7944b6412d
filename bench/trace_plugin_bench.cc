// What a profiler plugin costs the threads that report events: drives a
// plugin through its exported ncclProfiler_v5 table as uniccl does (the
// launching thread's API / launch events, the KernelCh poller's start,
// KernelChStop, stop, the proxy thread's ProxyOp and ProxySteps with their
// states) and prints the time per start+stop pair (the states the library
// records between them included) on the calling thread. A benchmark, not a
// test: it prints figures and checks nothing but that the plugin loads.
//
//   trace_plugin_bench [--plugin PATH|null] [--threads 1,2,4] [--bursts N] [--burst-events N]
//                      [--pause-us N] [--flood N] [--keep-trace]
//
// --plugin null: a table that records nothing, for what the driving loop
// itself costs.
//
// Each thread reports events in bursts of --burst-events (default 2000),
// with --pause-us (default 3000) between bursts: a plugin that hands records
// to a writer thread is measured writing records, not dropping them because
// a loop with nothing else to do outran its writer (the trace's "dropped"
// count is printed to show it). All threads report into one communicator
// context, as a rank's launching thread, proxy thread and KernelCh poller do.
// The first and last tenth of the bursts are also shown apart: what a pair
// costs after many events were recorded.
//
// --flood N: instead, each thread reports N KernelCh events back to back
// (start, KernelChStop, stop: three records), as fast as it can, and the
// bench prints what the plugin's writer thread keeps up with: the records
// that went into the rings per second, the writer's CPU time per record
// (and the records per second one core of it moves), the starts dropped
// because a ring was full, and the time per call on the reporting threads
// (wall and CPU: on a machine shared with other work, the wall time counts
// the time the thread waited for a core).
#include <dirent.h>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "uniccl_profiler.h"

namespace {

struct Options {
  std::string plugin = TRACE_PLUGIN_DEFAULT_PATH;
  std::vector<int> threads{1, 2, 4};
  int bursts = 100;
  int burstEvents = 2000;
  int pauseUs = 3000;
  long flood = 0;   // events per thread, back to back; 0: the burst benchmark
  bool keepTrace = false;
};

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

long rssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

void logNothing(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

// --plugin null: a plugin that records nothing (its handles are only non-null).
ncclResult_t nullInit(void** ctx, uint64_t, int* mask, const char*, int, int, int, ncclDebugLogger_t) {
  static int context;
  *ctx = &context;
  *mask = 0xfff;
  return ncclSuccess;
}
ncclResult_t nullStart(void* ctx, void** h, ncclProfilerEventDescr_v5_t*) {
  *h = ctx;
  return ncclSuccess;
}
ncclResult_t nullStop(void*) { return ncclSuccess; }
ncclResult_t nullState(void*, ncclProfilerEventState_v5_t, ncclProfilerEventStateArgs_v5_t*) { return ncclSuccess; }
ncclResult_t nullFinalize(void*) { return ncclSuccess; }
const ncclProfiler_v5_t kNullPlugin = {"null", nullInit, nullStart, nullStop, nullState, nullFinalize};

// The kinds of work a thread of the library reports, each as the library
// calls the plugin for it. Each returns the start+stop pairs it made.
enum class Kind { kLaunch, kKernelCh, kProxy };
const char* kindName(Kind k) {
  switch (k) {
    case Kind::kLaunch: return "API+launch";
    case Kind::kKernelCh: return "KernelCh";
    case Kind::kProxy: return "Proxy";
  }
  return "?";
}

struct Driver {
  const ncclProfiler_v5_t* p;
  void* ctx;
  void* coll = nullptr;      // a Coll handle, parent of KernelCh events and ProxyOps
  pid_t pid = getpid();      // ProxyOp descriptors carry it
  uint64_t gpuNs = 0;        // "GPU timer" stamps: ns since the Unix epoch, as NVIDIA's (set per burst)

  void* start(ncclProfilerEventDescr_v5_t& d) {
    void* h = nullptr;
    p->startEvent(ctx, &h, &d);
    return h;
  }
  void state(void* h, ncclProfilerEventState_v5_t s, ncclProfilerEventStateArgs_v5_t* a = nullptr) {
    if (h != nullptr) p->recordEventState(h, s, a);
  }
  void stop(void* h) {
    if (h != nullptr) p->stopEvent(h);
  }

  // One ncclAllReduce outside a group: GroupApi > CollApi, Group > Coll, KernelLaunch.
  int launch(uint64_t seq) {
    static int stream;
    ncclProfilerEventDescr_v5_t d{};
    d.type = ncclProfileGroupApi;
    d.groupApi.groupDepth = 1;
    void* gapi = start(d);
    state(gapi, ncclProfilerGroupStartApiStop);
    d = {};
    d.type = ncclProfileCollApi;
    d.parentObj = gapi;
    d.collApi = {"AllReduce", 262144, "ncclFloat32", 0, &stream, false};
    void* capi = start(d);
    stop(capi);
    state(gapi, ncclProfilerGroupEndApiStart);
    d = {};
    d.type = ncclProfileGroup;
    void* group = start(d);
    d = {};
    d.type = ncclProfileColl;
    d.parentObj = capi;
    d.coll.seqNumber = seq;
    d.coll.func = "AllReduce";
    d.coll.count = 262144;
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = 2;
    d.coll.algo = "Ring";
    d.coll.proto = "Simple";
    d.coll.parentGroup = group;
    void* c = start(d);
    d = {};
    d.type = ncclProfileKernelLaunch;
    d.parentObj = gapi;
    d.kernelLaunch.stream = &stream;
    void* kl = start(d);
    stop(kl);
    stop(c);
    stop(group);
    stop(gapi);
    return 5;
  }

  // One channel's work item, as the KernelCh poller reports it.
  int kernelCh(int channel) {
    ncclProfilerEventDescr_v5_t d{};
    d.type = ncclProfileKernelCh;
    d.parentObj = coll;
    d.kernelCh.channelId = (uint8_t)channel;
    const uint64_t t = gpuNs += 100;
    d.kernelCh.pTimer = t;
    void* h = start(d);
    ncclProfilerEventStateArgs_v5_t a{};
    a.kernelCh.pTimer = t + 50;
    state(h, ncclProfilerKernelChStop, &a);
    stop(h);
    return 1;
  }

  // One network send of 4 steps, as the proxy thread reports it.
  int proxy(int channel) {
    ncclProfilerEventDescr_v5_t d{};
    d.type = ncclProfileProxyOp;
    d.parentObj = coll;
    d.proxyOp = {pid, (uint8_t)channel, 1, 4, 65536, 1};
    void* op = start(d);
    for (int s = 0; s < 4; s++) {
      d = {};
      d.type = ncclProfileProxyStep;
      d.parentObj = op;
      d.proxyStep.step = s;
      void* step = start(d);
      ncclProfilerEventStateArgs_v5_t a{};
      a.proxyStep.transSize = 65536;
      state(step, ncclProfilerProxyStepSendGPUWait, &a);
      state(step, ncclProfilerProxyStepSendWait, &a);
      stop(step);
    }
    stop(op);
    return 5;
  }

  int run(Kind k, uint64_t i) {
    switch (k) {
      case Kind::kLaunch: return launch(i);
      case Kind::kKernelCh: return kernelCh((int)(i & 1));
      case Kind::kProxy: return proxy((int)(i & 1));
    }
    return 0;
  }
};

struct ThreadResult {
  double nsPerPair = 0, firstNsPerPair = 0, lastNsPerPair = 0;
  uint64_t pairs = 0;
};

ThreadResult runThread(Driver drv, Kind kind, const Options& o) {
  std::vector<double> perBurst;
  uint64_t pairs = 0, iter = 0;
  int64_t totalNs = 0;
  for (int b = 0; b < o.bursts; b++) {
    int made = 0;
    timespec epoch;
    clock_gettime(CLOCK_REALTIME, &epoch);
    drv.gpuNs = (uint64_t)epoch.tv_sec * 1000000000ull + (uint64_t)epoch.tv_nsec;
    const int64_t t0 = nowNs();
    while (made < o.burstEvents) made += drv.run(kind, iter++);
    const int64_t t = nowNs() - t0;
    totalNs += t;
    pairs += (uint64_t)made;
    perBurst.push_back((double)t / made);
    if (o.pauseUs > 0) usleep((useconds_t)o.pauseUs);
  }
  ThreadResult r;
  r.pairs = pairs;
  r.nsPerPair = (double)totalNs / (double)pairs;
  const size_t tenth = std::max<size_t>(1, perBurst.size() / 10);
  double first = 0, last = 0;
  for (size_t i = 0; i < tenth; i++) {
    first += perBurst[i];
    last += perBurst[perBurst.size() - 1 - i];
  }
  r.firstNsPerPair = first / tenth;
  r.lastNsPerPair = last / tenth;
  return r;
}

// The collective the KernelCh and proxy events belong to (as in the
// library, it stopped when its kernel was launched, before they come): its Coll handle.
void* startParents(Driver& drv) {
  ncclProfilerEventDescr_v5_t d{};
  d.type = ncclProfileGroupApi;
  d.groupApi.groupDepth = 1;
  void* gapi = drv.start(d);
  d = {};
  d.type = ncclProfileCollApi;
  d.parentObj = gapi;
  d.collApi = {"AllReduce", 1, "ncclFloat32", 0, nullptr, false};
  void* capi = drv.start(d);
  drv.stop(capi);
  drv.stop(gapi);
  d = {};
  d.type = ncclProfileGroup;
  void* group = drv.start(d);
  d = {};
  d.type = ncclProfileColl;
  d.parentObj = capi;
  d.coll.func = "AllReduce";
  d.coll.datatype = "ncclFloat32";
  d.coll.algo = "Ring";
  d.coll.proto = "Simple";
  d.coll.parentGroup = group;
  void* coll = drv.start(d);
  drv.stop(coll);
  drv.stop(group);
  return coll;
}

// The trace's size and "dropped" count (-1: none found), from the file's
// first and last few KiB (where plugins put their metadata).
struct TraceFacts {
  long bytes = 0;
  long dropped = -1;
  long droppedRingFull = -1;
  long lostUpdates = -1;
};
TraceFacts traceFacts(const std::string& path) {
  TraceFacts t;
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return t;
  fseek(f, 0, SEEK_END);
  t.bytes = ftell(f);
  std::string text(8192, '\0');
  fseek(f, 0, SEEK_SET);
  size_t n = fread(&text[0], 1, 4096, f);
  fseek(f, t.bytes > 4096 ? t.bytes - 4096 : 0, SEEK_SET);
  n += fread(&text[n], 1, 4096, f);
  text.resize(n);
  fclose(f);
  auto number = [&](const char* key) {
    const std::string k = std::string("\"") + key + "\":";
    const size_t at = text.rfind(k);
    return at == std::string::npos ? -1 : strtol(text.c_str() + at + k.size(), nullptr, 10);
  };
  t.dropped = number("dropped");
  t.droppedRingFull = number("droppedRingFull");
  t.lostUpdates = number("lostUpdates");
  return t;
}

// The plugin's writer thread (named uniccl-trace): its id, or -1 when there
// is none after a while (it names itself once it runs).
long writerTid() {
  for (int attempt = 0; attempt < 100; attempt++) {
    DIR* tasks = opendir("/proc/self/task");
    if (tasks == nullptr) return -1;
    long tid = -1;
    while (dirent* d = readdir(tasks)) {
      if (d->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + d->d_name + "/comm");
      std::string name;
      std::getline(comm, name);
      if (name == "uniccl-trace") tid = atol(d->d_name);
    }
    closedir(tasks);
    if (tid >= 0) return tid;
    usleep(10000);
  }
  return -1;
}

// CPU time of one of the process's threads, ns; -1 when unknown.
int64_t taskCpuNs(long tid) {
  if (tid < 0) return -1;
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/schedstat");   // first field: ns on a CPU
  long long ns = -1;
  stat >> ns;
  return ns;
}

// CPU time of the whole process and of the calling thread, ns.
int64_t cpuNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

uint64_t epochNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// The trace file the plugin writes for the bench communicator.
std::string tracePath(const std::string& dir, uint64_t commId) {
  char name[64];
  snprintf(name, sizeof(name), "/trace.%016llx.rank0.json", (unsigned long long)commId);
  return dir + name;
}

// Finalizes the bench communicator's context (timed) and reads what its
// trace file says.
TraceFacts finalizeAndRead(const ncclProfiler_v5_t* table, void* ctx, const std::string& path, double* finalizeMs) {
  const int64_t f0 = nowNs();
  table->finalize(ctx);
  *finalizeMs = (double)(nowNs() - f0) / 1e6;
  return traceFacts(path);
}

// The plugin's context for one bench communicator; false (said) when its init fails.
bool initContext(const ncclProfiler_v5_t* table, uint64_t commId, const std::string& dir, void** ctx, int* mask) {
  if (table->init(ctx, commId, mask, "bench", 1, 1, 0, logNothing) == ncclSuccess) return true;
  fprintf(stderr, "trace_plugin_bench: init failed (is %s writable?)\n", dir.c_str());
  return false;
}

// --flood: nThreads threads report o.flood KernelCh events each, back to back.
int flood(const ncclProfiler_v5_t* table, int nThreads, const Options& o, const std::string& dir, uint64_t commId) {
  void* ctx = nullptr;
  int mask = 0;
  if (!initContext(table, commId, dir, &ctx, &mask)) return 1;
  Driver drv{table, ctx};
  drv.coll = startParents(drv);
  const long writer = writerTid();
  const int64_t writer0 = taskCpuNs(writer);
  std::vector<int64_t> threadWall((size_t)nThreads), threadCpu((size_t)nThreads);
  std::vector<std::thread> threads;
  const int64_t t0 = nowNs();
  for (int t = 0; t < nThreads; t++)
    threads.emplace_back([&, t] {
      Driver d = drv;
      const int64_t w0 = nowNs(), c0 = cpuNs(CLOCK_THREAD_CPUTIME_ID);
      for (long i = 0; i < o.flood; i++) {
        // The "GPU timer" follows the host's clock (KernelCh slices are placed by it).
        if ((i & 1023) == 0) d.gpuNs = epochNs();
        d.kernelCh((int)(i & 15));
      }
      threadWall[(size_t)t] = nowNs() - w0;
      threadCpu[(size_t)t] = cpuNs(CLOCK_THREAD_CPUTIME_ID) - c0;
    });
  for (std::thread& t : threads) t.join();
  const int64_t wall = nowNs() - t0;
  const int64_t writer1 = taskCpuNs(writer);
  const std::string path = tracePath(dir, commId);
  double finalizeMs = 0;
  const TraceFacts facts = finalizeAndRead(table, ctx, path, &finalizeMs);
  const double events = (double)o.flood * nThreads;
  const double dropped = facts.droppedRingFull > 0 ? (double)facts.droppedRingFull : 0;
  const double lost = facts.lostUpdates > 0 ? (double)facts.lostUpdates : 0;
  const double records = 3 * (events - dropped) - lost;   // start, KernelChStop, stop
  double callWall = 0, callCpu = 0;
  for (int t = 0; t < nThreads; t++) {
    callWall += (double)threadWall[(size_t)t] / (3.0 * (double)o.flood) / nThreads;
    callCpu += (double)threadCpu[(size_t)t] / (3.0 * (double)o.flood) / nThreads;
  }
  const double writerNs = writer0 >= 0 && writer1 >= 0 ? (double)(writer1 - writer0) : -1;
  printf("%7d  %9.0f  %8.1f  %8.1f  %12.2f  %8.2f%%  %10.1f  %10.2f  %11.1f  %9.1f\n", nThreads, events, callWall,
         callCpu, records / ((double)wall / 1e9) / 1e6, 100.0 * dropped / events,
         writerNs >= 0 ? writerNs / records : -1.0, writerNs > 0 ? records / (writerNs / 1e9) / 1e6 : -1.0,
         finalizeMs, (double)facts.bytes / (1 << 20));
  fflush(stdout);
  if (o.keepTrace) printf("         trace kept: %s\n", path.c_str());
  else remove(path.c_str());
  return 0;
}

std::vector<int> parseList(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(atoi(p));
    while (*p && *p != ',') p++;
    if (*p == ',') p++;
  }
  return v;
}

int benchmark(const ncclProfiler_v5_t* table, int nThreads, const Options& o, const std::string& dir,
              uint64_t commId) {
  void* ctx = nullptr;
  int mask = 0;
  const long rss0 = rssKiB();
  // The plugin's own threads' CPU: the process's, less this thread's and the reporting threads'.
  const int64_t processCpu0 = cpuNs(CLOCK_PROCESS_CPUTIME_ID);
  const int64_t mainCpu0 = cpuNs(CLOCK_THREAD_CPUTIME_ID);
  std::atomic<int64_t> reportingCpuNs{0};
  uint64_t totalPairs = 0;
  if (!initContext(table, commId, dir, &ctx, &mask)) return 1;
  Driver drv{table, ctx};
  drv.coll = startParents(drv);

  const Kind kinds[] = {Kind::kLaunch, Kind::kKernelCh, Kind::kProxy};
  for (Kind kind : kinds) {
    std::vector<ThreadResult> results((size_t)nThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < nThreads; t++)
      threads.emplace_back([&, t] {
        results[(size_t)t] = runThread(drv, kind, o);
        reportingCpuNs += cpuNs(CLOCK_THREAD_CPUTIME_ID);
      });
    for (std::thread& t : threads) t.join();
    double ns = 0, first = 0, last = 0;
    for (const ThreadResult& r : results) {
      ns += r.nsPerPair;
      first += r.firstNsPerPair;
      last += r.lastNsPerPair;
    }
    totalPairs += results[0].pairs * (uint64_t)nThreads;
    printf("%7d  %-10s  %10.1f  %10.1f  %10.1f  %9llu\n", nThreads, kindName(kind), ns / nThreads,
           first / nThreads, last / nThreads, (unsigned long long)(results[0].pairs * nThreads));
    fflush(stdout);
  }
  const long rss1 = rssKiB();
  const double pluginCpuMs = (double)(cpuNs(CLOCK_PROCESS_CPUTIME_ID) - processCpu0 -
                                      (cpuNs(CLOCK_THREAD_CPUTIME_ID) - mainCpu0) - reportingCpuNs.load()) / 1e6;
  const std::string path = tracePath(dir, commId);
  double finalizeMs = 0;
  const TraceFacts facts = finalizeAndRead(table, ctx, path, &finalizeMs);
  printf("         memory held before finalize %.1f MiB; CPU of the plugin's own threads %.0f ms (%.0f ns per"
         " pair); finalize %.1f ms; ",
         (double)(rss1 - rss0) / 1024.0, pluginCpuMs, pluginCpuMs * 1e6 / (double)totalPairs, finalizeMs);
  if (facts.bytes > 0) printf("trace %.1f MiB, dropped %ld\n", (double)facts.bytes / (1 << 20), facts.dropped);
  else printf("no trace file\n");
  if (o.keepTrace) printf("         trace kept: %s\n", path.c_str());
  else remove(path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--plugin") o.plugin = v, i++;
    else if (a == "--threads") o.threads = parseList(v), i++;
    else if (a == "--bursts") o.bursts = atoi(v), i++;
    else if (a == "--burst-events") o.burstEvents = atoi(v), i++;
    else if (a == "--pause-us") o.pauseUs = atoi(v), i++;
    else if (a == "--flood") o.flood = atol(v), i++;
    else if (a == "--keep-trace") o.keepTrace = true;
    else {
      fprintf(stderr,
              "usage: %s [--plugin PATH|null] [--threads 1,2,4] [--bursts N] [--burst-events N] [--pause-us N]"
              " [--flood N] [--keep-trace]\n",
              argv[0]);
      return 2;
    }
  }
  const ncclProfiler_v5_t* table = &kNullPlugin;
  if (o.plugin != "null") {
    void* lib = dlopen(o.plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      fprintf(stderr, "trace_plugin_bench: %s\n", dlerror());
      return 1;
    }
    table = static_cast<const ncclProfiler_v5_t*>(dlsym(lib, "ncclProfiler_v5"));
  }
  if (table == nullptr) {
    fprintf(stderr, "trace_plugin_bench: %s exports no ncclProfiler_v5\n", o.plugin.c_str());
    return 1;
  }
  char dir[] = "/tmp/trace_plugin_benchXXXXXX";
  if (mkdtemp(dir) == nullptr) {
    perror("mkdtemp");
    return 1;
  }
  // Every event recorded (not the plugin's default cap), into a scratch directory.
  setenv("UNICCL_PROFILER_TRACE_FILE", (std::string(dir) + "/trace").c_str(), 1);
  setenv("UNICCL_PROFILER_TRACE_MASK", "0xfff", 1);
  setenv("UNICCL_PROFILER_TRACE_MAX_EVENTS", "1000000000", 1);
  int rc = 0;
  uint64_t commId = 0xbe4c000000000001ull;
  if (o.flood > 0) {
    printf("plugin %s (%s): %ld KernelCh events per thread, back to back\n", o.plugin.c_str(), table->name, o.flood);
    printf("threads     events  ns/call  cpu-ns/call  Mrecords/s  dropped  writer-ns/rec  Mrec/s/core  finalize-ms"
           "  trace-MiB\n");
    for (int n : o.threads) rc |= flood(table, n, o, dir, commId++);
  } else {
    printf("plugin %s (%s): %d bursts of %d events per thread, %d us apart\n", o.plugin.c_str(), table->name,
           o.bursts, o.burstEvents, o.pauseUs);
    printf("threads  kind        ns/pair     first 10%%   last 10%%    pairs\n");
    for (int n : o.threads) rc |= benchmark(table, n, o, dir, commId++);
  }
  if (!o.keepTrace) rmdir(dir);
  return rc;
}
