// What a profiler plugin costs the threads that report events: drives a
// plugin through its exported ncclProfiler_v5 table as uniccl does (the
// launching thread's API / launch events, the KernelCh poller's start,
// KernelChStop, stop, the proxy thread's ProxyOp and ProxySteps with their
// states) and prints the time per start+stop pair (the states the library
// records between them included) on the calling thread. A benchmark, not a
// test: it prints figures and checks nothing but that the plugin loads.
//
//   trace_plugin_bench [--plugin PATH|null] [--threads 1,2,4] [--bursts N] [--burst-events N]
//                      [--pause-us N] [--keep-trace]
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

// The trace's size and "dropped" count (-1: none found), from the file's
// first and last few KiB (where plugins put their metadata).
struct TraceFacts {
  long bytes = 0;
  long dropped = -1;
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
  const size_t at = text.rfind("\"dropped\":");
  if (at != std::string::npos) t.dropped = strtol(text.c_str() + at + 10, nullptr, 10);
  return t;
}

// CPU time of the whole process and of the calling thread, ns.
int64_t cpuNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
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
  if (table->init(&ctx, commId, &mask, "bench", 1, 1, 0, logNothing) != ncclSuccess) {
    fprintf(stderr, "trace_plugin_bench: init failed (is %s writable?)\n", dir.c_str());
    return 1;
  }
  Driver drv{table, ctx};
  // The collective the KernelCh and proxy events belong to (as in the
  // library, it stopped when its kernel was launched, before they come).
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
  drv.coll = drv.start(d);
  drv.stop(drv.coll);
  drv.stop(group);

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
  const int64_t f0 = nowNs();
  table->finalize(ctx);
  const double finalizeMs = (double)(nowNs() - f0) / 1e6;
  char name[64];
  snprintf(name, sizeof(name), "/trace.%016llx.rank0.json", (unsigned long long)commId);
  const std::string path = dir + name;
  const TraceFacts facts = traceFacts(path);
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
    else if (a == "--keep-trace") o.keepTrace = true;
    else {
      fprintf(stderr,
              "usage: %s [--plugin PATH|null] [--threads 1,2,4] [--bursts N] [--burst-events N] [--pause-us N]"
              " [--keep-trace]\n",
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
  printf("plugin %s (%s): %d bursts of %d events per thread, %d us apart\n", o.plugin.c_str(), table->name,
         o.bursts, o.burstEvents, o.pauseUs);
  printf("threads  kind        ns/pair     first 10%%   last 10%%    pairs\n");
  int rc = 0;
  uint64_t commId = 0xbe4c000000000001ull;
  for (int n : o.threads) rc |= benchmark(table, n, o, dir, commId++);
  if (!o.keepTrace) rmdir(dir);
  return rc;
}
