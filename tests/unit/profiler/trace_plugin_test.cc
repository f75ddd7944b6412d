// The shipped trace plugin (plugins/trace) loaded through the loader like any
// NCCL profiler plugin: an AllReduce-shaped and a grouped send/recv-shaped
// event sequence from an API thread, a proxy thread and a "GPU" (CPU thread
// stamping the KernelCh rings with the host's Unix-epoch clock, as NVIDIA's
// global timer counts), then the JSON is checked by check_trace.py.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/profiler/kernel_ch.h"
#include "common/profiler/profiler.h"
#include "gpu_stamp.h"

using namespace uniccl;

namespace {

uint64_t epochNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

std::string tempPrefix() {
  char dir[] = "/tmp/uniccl_trace_testXXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return std::string(dir) + "/trace";
}

void removeTrace(const std::string& file, const std::string& prefix) {
  remove(file.c_str());
  rmdir(prefix.substr(0, prefix.rfind('/')).c_str());
}

}  // namespace

TEST(TraceProfiler, WritesNestedMonotonicChromeTracePerRank) {
  GroupApiEvents api;   // the group of this thread
  const char* plugin = getenv("UNICCL_TEST_TRACE_PLUGIN");
  const char* checker = getenv("UNICCL_TEST_TRACE_CHECKER");
  if (plugin == nullptr || checker == nullptr) GTEST_SKIP() << "run through meson test";
  if (system("python3 -c 'import json' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not available";
  std::string prefix = tempPrefix();
  setenv("NCCL_PROFILER_PLUGIN", plugin, 1);
  setenv("UNICCL_PROFILER_TRACE_FILE", prefix.c_str(), 1);
  setenv("UNICCL_PROFILER_TRACE_MASK", "0xfff", 1);
  // The "GPU" and proxy threads may be scheduled long after they stamp (a
  // loaded machine, a sanitizer): a window longer than the test keeps every
  // event in time order, which the checker requires (trace_writer_test.cc
  // covers the window itself).
  setenv("UNICCL_PROFILER_TRACE_REORDER_MS", "600000", 1);
  ProfilerCommInfo info;
  info.commId = 0xfeedf00d12345678ULL;
  info.commName = "trace \"test\"";  // must come out escaped
  info.nNodes = 1;
  info.nRanks = 2;
  info.rank = 1;
  auto ctx = profilerInit(info);
  ASSERT_NE(ctx, nullptr);
  ProfilerContext* p = ctx.get();
  EXPECT_STREQ(p->pluginName(), "uniccl-trace");

  constexpr int kChannels = 2;
  std::vector<KernelChRing> rings(kChannels);
  memset(rings.data(), 0, rings.size() * sizeof(KernelChRing));
  KernelChTracker tracker(p, rings.data(), kChannels);
  int stream;

  // --- ncclAllReduce outside a group
  void* gapi = profilerStartGroupApi(&api, p, 1, false);
  void* capi = profilerStartCollApi(p, gapi, "AllReduce", 262144, ncclFloat32, 0, &stream, false);
  profilerStop(p, capi);
  profilerRecordGroupEndApi(&api);
  void* group = profilerStartGroup(p);
  ProfilerCollInfo ci{0, "AllReduce", &stream, &stream, 262144, 0, ncclFloat32, kChannels, 16, "Ring", "Simple"};
  void* coll = profilerStartColl(p, capi, group, ci);
  void* launch = profilerStartKernelLaunch(p, profilerCurrentGroupApi(&api, p), &stream);
  uint64_t counters[kChannels];
  for (int c = 0; c < kChannels; c++) counters[c] = tracker.expect(c, coll);
  profilerStop(p, launch);
  profilerStop(p, coll);
  profilerStop(p, group);
  profilerStopGroupApi(&api);

  // The proxy thread works on the collective meanwhile.
  std::thread proxy([&] {
    void* ctrl = profilerStartProxyCtrl(p);
    profilerRecordState(p, ctrl, ncclProfilerProxyCtrlActive);
    profilerStop(p, ctrl);
    void* op = profilerStartProxyOp(p, coll, 0, 0, 4, 65536, true);
    for (int s = 0; s < 4; s++) {
      void* step = profilerStartProxyStep(p, op, s);
      profilerRecordProxyStep(p, step, ncclProfilerProxyStepSendGPUWait, 65536);
      profilerRecordProxyStep(p, step, ncclProfilerProxyStepSendWait, 65536);
      profilerStop(p, step);
    }
    profilerStop(p, op);
  });
  // The "GPU" runs both channels.
  std::thread gpu([&] {
    for (int c = 0; c < kChannels; c++) {
      uint64_t t0 = epochNs();
      gpuStamp(&rings[c].start[counters[c] % kKernelChSlots], counters[c], t0);
      usleep(200);
      gpuStamp(&rings[c].stop[counters[c] % kKernelChSlots], counters[c], epochNs());
    }
  });
  gpu.join();
  proxy.join();
  while (tracker.poll() != 0) std::this_thread::yield();

  // --- grouped send/recv
  void* gapi2 = profilerStartGroupApi(&api, p, 1, false);
  void* sapi = profilerStartP2pApi(p, gapi2, "Send", 1024, ncclFloat32, &stream, false);
  profilerStop(p, sapi);
  void* rapi = profilerStartP2pApi(p, gapi2, "Recv", 1024, ncclFloat32, &stream, false);
  profilerStop(p, rapi);
  profilerRecordGroupEndApi(&api);
  void* group2 = profilerStartGroup(p);
  void* send = profilerStartP2p(p, sapi, group2, ProfilerP2pInfo{"Send", &stream, 1024, ncclFloat32, 0, 1});
  void* recv = profilerStartP2p(p, rapi, group2, ProfilerP2pInfo{"Recv", &stream, 1024, ncclFloat32, 0, 1});
  void* launch2 = profilerStartKernelLaunch(p, profilerCurrentGroupApi(&api, p), &stream);
  uint64_t c2 = tracker.expect(0, send);
  profilerStop(p, launch2);
  profilerStop(p, recv);
  profilerStop(p, send);
  profilerStop(p, group2);
  profilerStopGroupApi(&api);
  uint64_t t0 = epochNs();
  gpuStamp(&rings[0].start[c2 % kKernelChSlots], c2, t0);
  gpuStamp(&rings[0].stop[c2 % kKernelChSlots], c2, t0 + 5000);
  EXPECT_EQ(tracker.poll(), 0);

  profilerFinalize(ctx);
  std::string file = prefix + ".feedf00d12345678.rank1.json";
  ASSERT_EQ(access(file.c_str(), R_OK), 0) << file;
  std::string cmd = std::string("python3 '") + checker + "' '" + file +
                    "' --gpu-clock --expect GroupApi:* --expect CollApi:AllReduce --expect Coll:AllReduce"
                    " --expect Group:Group --expect KernelLaunch:* --expect KernelCh:* --expect ProxyOp:ProxySend"
                    " --expect ProxyStep:* --expect ProxyCtrl:* --expect P2pApi:Send --expect P2pApi:Recv"
                    " --expect P2p:Send --expect P2p:Recv";
  EXPECT_EQ(system(cmd.c_str()), 0) << cmd;
  removeTrace(file, prefix);
  unsetenv("NCCL_PROFILER_PLUGIN");
  unsetenv("UNICCL_PROFILER_TRACE_REORDER_MS");
}

TEST(TraceProfiler, ConcurrentThreadsAndAnUnwritablePath) {
  const char* plugin = getenv("UNICCL_TEST_TRACE_PLUGIN");
  const char* checker = getenv("UNICCL_TEST_TRACE_CHECKER");
  if (plugin == nullptr || checker == nullptr) GTEST_SKIP() << "run through meson test";
  setenv("NCCL_PROFILER_PLUGIN", plugin, 1);
  // A path that cannot be written fails init: the communicator goes on unprofiled.
  setenv("UNICCL_PROFILER_TRACE_FILE", "/nonexistent-dir/x/trace", 1);
  ProfilerCommInfo info;
  EXPECT_EQ(profilerInit(info), nullptr);

  std::string prefix = tempPrefix();
  setenv("UNICCL_PROFILER_TRACE_FILE", prefix.c_str(), 1);
  setenv("UNICCL_PROFILER_TRACE_MASK", "0xfff", 1);
  setenv("UNICCL_PROFILER_TRACE_MAX_EVENTS", "3000", 1);
  info.commId = 7;
  auto ctx = profilerInit(info);
  ASSERT_NE(ctx, nullptr);
  ProfilerContext* p = ctx.get();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([p, t] {
      GroupApiEvents api;   // each thread's own groups
      for (int i = 0; i < 500; i++) {
        void* g = profilerStartGroupApi(&api, p, 1, false);
        void* a = profilerStartCollApi(p, g, "AllReduce", i, ncclFloat32, 0, nullptr, false);
        profilerStop(p, a);
        profilerStopGroupApi(&api);
        void* ctrl = profilerStartProxyCtrl(p);
        profilerRecordState(p, ctrl, (t & 1) ? ncclProfilerProxyCtrlSleep : ncclProfilerProxyCtrlIdle);
        profilerStop(p, ctrl);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  unsetenv("UNICCL_PROFILER_TRACE_MAX_EVENTS");
  profilerFinalize(ctx);
  std::string file = prefix + ".0000000000000007.rank0.json";
  FILE* f = fopen(file.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  fclose(f);
  EXPECT_NE(text.find("\"dropped\":3000"), std::string::npos) << "6000 events started, 3000 kept";
  std::string cmd = std::string("python3 '") + checker + "' '" + file + "' --expect CollApi:AllReduce";
  EXPECT_EQ(system(cmd.c_str()), 0) << cmd;
  removeTrace(file, prefix);
  unsetenv("NCCL_PROFILER_PLUGIN");
}
