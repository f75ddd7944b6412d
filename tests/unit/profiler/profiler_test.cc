// The profiler plugin layer without a GPU: the loader's lookup rules (path,
// name, STATIC_PLUGIN, default library, none), v5 and v4 plugins, a failing
// init, finalize + dlclose, activation-mask filtering, parent handles, the
// thread's GroupApi state and the KernelCh rings (a CPU thread plays the GPU).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/profiler/kernel_ch.h"
#include "common/profiler/kernel_ch_poller.h"
#include "common/profiler/profiler.h"
#include "gpu_stamp.h"
#include "test_sink.h"

using namespace uniccl;

namespace {

std::mutex gMutex;
std::vector<ProfTestCall> gCalls;

std::vector<ProfTestCall> calls() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gCalls;
}

std::string buildDir() {
  const char* d = getenv("UNICCL_TEST_PROF_DIR");
  return d ? d : ".";
}

bool libraryLoaded(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

ProfilerCommInfo commInfo(int rank = 3) {
  ProfilerCommInfo info;
  info.commId = 0x1234abcd5678ef00ULL;
  info.commName = "trainer";
  info.nNodes = 2;
  info.nRanks = 8;
  info.rank = rank;
  return info;
}

class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::lock_guard<std::mutex> lock(gMutex);
    gCalls.clear();
    unsetenv("UNICCL_TEST_PROFILER_MASK");
  }
  void TearDown() override { unsetenv("NCCL_PROFILER_PLUGIN"); }

  const ProfTestCall* findStart(void* handle) {
    snapshot_ = calls();
    for (const ProfTestCall& c : snapshot_)
      if (c.op == kOpStart && c.handle == handle) return &c;
    return nullptr;
  }
  int count(int op, uint64_t type = 0) {
    int n = 0;
    for (const ProfTestCall& c : calls())
      if (c.op == op && (type == 0 || c.descr.type == type)) n++;
    return n;
  }
  std::vector<ProfTestCall> snapshot_;
};

}  // namespace

// For the other test files of this program (proxy_events_test.cc).
std::vector<ProfTestCall> profilerTestCalls() { return calls(); }
void profilerTestClearCalls() {
  std::lock_guard<std::mutex> lock(gMutex);
  gCalls.clear();
}

// The test program reports plugin calls here and exports a v5 table itself
// (test_plugin.cc compiled in) for NCCL_PROFILER_PLUGIN=STATIC_PLUGIN.
extern "C" __attribute__((visibility("default"))) void uniccl_profiler_test_sink(const ProfTestCall* c) {
  std::lock_guard<std::mutex> lock(gMutex);
  gCalls.push_back(*c);
}

TEST_F(ProfilerTest, ByPathCallsInitWithTheCommunicatorAndFinalizeUnloads) {
  std::string path = buildDir() + "/libnccl-profiler-testprof.so";
  setenv("NCCL_PROFILER_PLUGIN", path.c_str(), 1);
  auto ctx = profilerInit(commInfo());
  ASSERT_NE(ctx, nullptr);
  EXPECT_STREQ(ctx->pluginName(), "test-v5");
  EXPECT_EQ(ctx->pluginVersion(), 5);
  EXPECT_TRUE(libraryLoaded(path));
  auto c = calls();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].op, kOpInit);
  EXPECT_EQ(c[0].commId, 0x1234abcd5678ef00ULL);
  EXPECT_STREQ(c[0].commName, "trainer");
  EXPECT_EQ(c[0].nNodes, 2);
  EXPECT_EQ(c[0].nRanks, 8);
  EXPECT_EQ(c[0].rank, 3);
  EXPECT_EQ(ctx->mask(), 0xfff);
  void* ctxSeen = c[0].context;
  profilerFinalize(ctx);
  EXPECT_EQ(ctx, nullptr);
  c = calls();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].op, kOpFinalize);
  EXPECT_EQ(c[1].context, ctxSeen);
  EXPECT_FALSE(libraryLoaded(path)) << "the last context must dlclose the plugin";
}

TEST_F(ProfilerTest, ByNameLoadsLibncclProfilerName) {
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);  // -> libnccl-profiler-testprof.so on LD_LIBRARY_PATH
  auto ctx = profilerInit(commInfo());
  ASSERT_NE(ctx, nullptr);
  EXPECT_STREQ(ctx->pluginName(), "test-v5");
}

TEST_F(ProfilerTest, UnsetLoadsLibncclProfilerSo) {
  unsetenv("NCCL_PROFILER_PLUGIN");
  auto ctx = profilerInit(commInfo());
  ASSERT_NE(ctx, nullptr) << "libnccl-profiler.so is on LD_LIBRARY_PATH in this test";
  EXPECT_STREQ(ctx->pluginName(), "test-default");
}

TEST_F(ProfilerTest, StaticPluginIsFoundInTheProgram) {
  setenv("NCCL_PROFILER_PLUGIN", "STATIC_PLUGIN", 1);
  auto ctx = profilerInit(commInfo());
  ASSERT_NE(ctx, nullptr);
  EXPECT_STREQ(ctx->pluginName(), "test-static");
}

TEST_F(ProfilerTest, NoneAndMissingPluginsMeanNoProfiling) {
  setenv("NCCL_PROFILER_PLUGIN", "none", 1);
  EXPECT_EQ(profilerInit(commInfo()), nullptr);
  setenv("NCCL_PROFILER_PLUGIN", "doesnotexist", 1);
  EXPECT_EQ(profilerInit(commInfo()), nullptr);
  EXPECT_EQ(count(kOpInit), 0);
}

TEST_F(ProfilerTest, FailingInitDisablesThePluginAndTheCallerCarriesOn) {
  GroupApiEvents api;   // the group of this thread
  std::string path = buildDir() + "/libnccl-profiler-testfail.so";
  setenv("NCCL_PROFILER_PLUGIN", path.c_str(), 1);
  auto ctx = profilerInit(commInfo());
  EXPECT_EQ(ctx, nullptr);
  EXPECT_EQ(count(kOpInit), 1);
  EXPECT_EQ(count(kOpFinalize), 0) << "no finalize for a context whose init failed";
  EXPECT_FALSE(libraryLoaded(path));
  // Every helper is a no-op on the null context.
  EXPECT_EQ(profilerStartGroupApi(&api, nullptr, 1, false), nullptr);
  EXPECT_EQ(profilerStartCollApi(nullptr, nullptr, "AllReduce", 1, ncclFloat32, 0, nullptr, false), nullptr);
  profilerStop(nullptr, nullptr);
  profilerStopGroupApi(&api);
  // A later communicator with a working plugin profiles normally.
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);
  auto ok = profilerInit(commInfo());
  ASSERT_NE(ok, nullptr);
  EXPECT_NE(profilerStartGroup(ok.get()), nullptr);
}

TEST_F(ProfilerTest, ContextsShareOneLoadAndTheLastOneCloses) {
  std::string path = buildDir() + "/libnccl-profiler-testprof.so";
  setenv("NCCL_PROFILER_PLUGIN", path.c_str(), 1);
  auto a = profilerInit(commInfo(0));
  auto b = profilerInit(commInfo(1));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  profilerFinalize(a);
  EXPECT_TRUE(libraryLoaded(path));
  profilerFinalize(b);
  EXPECT_FALSE(libraryLoaded(path));
  EXPECT_EQ(count(kOpFinalize), 2);
}

TEST_F(ProfilerTest, ActivationMaskFiltersEvents) {
  GroupApiEvents api;   // the group of this thread
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);
  setenv("UNICCL_TEST_PROFILER_MASK", "0", 1);
  {
    auto ctx = profilerInit(commInfo());
    ASSERT_NE(ctx, nullptr);
    ProfilerContext* p = ctx.get();
    EXPECT_EQ(profilerStartGroupApi(&api, p, 1, false), nullptr);
    EXPECT_EQ(profilerStartGroup(p), nullptr);
    EXPECT_EQ(profilerStartProxyCtrl(p), nullptr);
    EXPECT_EQ(profilerStartKernelCh(p, nullptr, 0, 1), nullptr);
    profilerStopGroupApi(&api);
    EXPECT_EQ(count(kOpStart), 0);
  }
  // Coll asks for its ancestors too (so it has parents) but not for siblings.
  setenv("UNICCL_TEST_PROFILER_MASK", "2", 1);  // ncclProfileColl
  auto ctx = profilerInit(commInfo());
  ProfilerContext* p = ctx.get();
  void* gapi = profilerStartGroupApi(&api, p, 1, false);
  EXPECT_NE(gapi, nullptr);
  EXPECT_NE(profilerStartCollApi(p, gapi, "AllReduce", 4, ncclFloat32, 0, nullptr, false), nullptr);
  EXPECT_EQ(profilerStartP2pApi(p, gapi, "Send", 4, ncclFloat32, nullptr, false), nullptr);
  EXPECT_EQ(profilerStartKernelLaunch(p, profilerCurrentGroupApi(&api, p), nullptr), nullptr);
  void* group = profilerStartGroup(p);
  EXPECT_NE(group, nullptr);
  ProfilerCollInfo ci{};
  ci.func = "AllReduce";
  EXPECT_NE(profilerStartColl(p, nullptr, group, ci), nullptr);
  ProfilerP2pInfo pi{};
  pi.func = "Send";
  EXPECT_EQ(profilerStartP2p(p, nullptr, group, pi), nullptr);
  EXPECT_EQ(profilerStartProxyOp(p, nullptr, 0, 1, 4, 1024, true), nullptr);
  EXPECT_EQ(profilerStartProxyStep(p, nullptr, 0), nullptr);
  EXPECT_EQ(profilerStartProxyCtrl(p), nullptr);
  EXPECT_EQ(profilerStartKernelCh(p, nullptr, 0, 1), nullptr);
  EXPECT_EQ(profilerStartNetPlugin(p, nullptr, NCCL_PROFILER_NET_TYPE_SOCK | 1, nullptr), nullptr);
  profilerStopGroupApi(&api);
  // ProxyCtrl alone: nothing else.
  ctx.reset();
  setenv("UNICCL_TEST_PROFILER_MASK", "0x20", 1);
  ctx = profilerInit(commInfo());
  EXPECT_EQ(profilerStartGroupApi(&api, ctx.get(), 1, false), nullptr);
  EXPECT_NE(profilerStartProxyCtrl(ctx.get()), nullptr);
}

TEST_F(ProfilerTest, EventsCarryTheirParentsAndStates) {
  GroupApiEvents api;   // the group of this thread
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);
  auto ctx = profilerInit(commInfo(5));
  ProfilerContext* p = ctx.get();
  int stream;
  void* gapi = profilerStartGroupApi(&api, p, 2, true);
  ASSERT_NE(gapi, nullptr);
  EXPECT_EQ(profilerStartGroupApi(&api, p, 2, true), gapi) << "one GroupApi per outermost group and thread";
  EXPECT_EQ(profilerCurrentGroupApi(&api, p), gapi);
  void* capi = profilerStartCollApi(p, gapi, "AllReduce", 1000, ncclBfloat16, 0, &stream, true);
  profilerStop(p, capi);
  profilerRecordGroupEndApi(&api);
  void* launch = profilerStartKernelLaunch(p, profilerCurrentGroupApi(&api, p), &stream);
  void* group = profilerStartGroup(p);
  ProfilerCollInfo ci{7, "AllReduce", &stream, &stream, 1000, 0, ncclBfloat16, 4, 16, "Ring", "Simple"};
  void* coll = profilerStartColl(p, capi, group, ci);
  void* op = profilerStartProxyOp(p, coll, 3, 6, 8, 4096, true);
  void* step = profilerStartProxyStep(p, op, 0);
  profilerRecordProxyStep(p, step, ncclProfilerProxyStepSendGPUWait, 4096);
  profilerStop(p, step);
  profilerStop(p, op);
  void* kch = profilerStartKernelCh(p, coll, 3, 111);
  profilerStopKernelCh(p, kch, 222);
  profilerStop(p, coll);
  profilerStop(p, group);
  profilerStop(p, launch);
  profilerStopGroupApi(&api);
  EXPECT_EQ(profilerCurrentGroupApi(&api, p), nullptr);

  const ProfTestCall* c = findStart(gapi);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->descr.type, (uint64_t)ncclProfileGroupApi);
  EXPECT_EQ(c->descr.rank, 5);
  EXPECT_EQ(c->descr.groupApi.groupDepth, 2);
  EXPECT_TRUE(c->descr.groupApi.graphCaptured);
  c = findStart(capi);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->descr.parentObj, gapi);
  EXPECT_STREQ(c->descr.collApi.func, "AllReduce");
  EXPECT_STREQ(c->descr.collApi.datatype, "ncclBfloat16");
  EXPECT_EQ(c->descr.collApi.count, 1000u);
  EXPECT_EQ(c->descr.collApi.stream, &stream);
  c = findStart(launch);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->descr.parentObj, gapi);
  c = findStart(group);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->descr.parentObj, nullptr);
  c = findStart(coll);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->descr.parentObj, capi);
  EXPECT_EQ(c->descr.coll.parentGroup, group);
  EXPECT_EQ(c->descr.coll.seqNumber, 7u);
  EXPECT_EQ(c->descr.coll.nChannels, 4);
  EXPECT_STREQ(c->descr.coll.proto, "Simple");
  c = findStart(op);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->descr.parentObj, coll);
  EXPECT_EQ(c->descr.proxyOp.pid, getpid());
  EXPECT_EQ(c->descr.proxyOp.channelId, 3);
  EXPECT_EQ(c->descr.proxyOp.peer, 6);
  EXPECT_EQ(c->descr.proxyOp.isSend, 1);
  c = findStart(step);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->descr.parentObj, op);
  c = findStart(kch);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->descr.parentObj, coll);
  EXPECT_EQ(c->descr.kernelCh.pTimer, 111u);

  // States, in order: GroupStartApiStop, GroupEndApiStart, SendGPUWait(4096), KernelChStop(222).
  std::vector<ProfTestCall> rec;
  for (const ProfTestCall& x : calls())
    if (x.op == kOpRecord) rec.push_back(x);
  ASSERT_EQ(rec.size(), 4u);
  EXPECT_EQ(rec[0].handle, gapi);
  EXPECT_EQ(rec[0].state, ncclProfilerGroupStartApiStop);
  EXPECT_EQ(rec[1].handle, gapi);
  EXPECT_EQ(rec[1].state, ncclProfilerGroupEndApiStart);
  EXPECT_EQ(rec[2].handle, step);
  EXPECT_EQ(rec[2].args.proxyStep.transSize, 4096u);
  EXPECT_EQ(rec[3].handle, kch);
  EXPECT_EQ(rec[3].state, ncclProfilerKernelChStop);
  EXPECT_EQ(rec[3].args.kernelCh.pTimer, 222u);
  EXPECT_EQ(count(kOpStart), count(kOpStop)) << "every started event is stopped";
}

TEST_F(ProfilerTest, GroupApiStateIsPerThread) {
  GroupApiEvents api;   // the group of this thread
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);
  auto ctx = profilerInit(commInfo());
  void* mine = profilerStartGroupApi(&api, ctx.get(), 1, false);
  void* theirs = nullptr;
  std::thread t([&] {
    GroupApiEvents theirApi;   // the other thread's group
    theirs = profilerStartGroupApi(&theirApi, ctx.get(), 1, false);
    profilerStopGroupApi(&theirApi);
  });
  t.join();
  EXPECT_NE(mine, nullptr);
  EXPECT_NE(theirs, nullptr);
  EXPECT_NE(mine, theirs);
  EXPECT_EQ(profilerCurrentGroupApi(&api, ctx.get()), mine);
  profilerStopGroupApi(&api);
}

TEST_F(ProfilerTest, V4PluginRunsBehindTheAdapter) {
  GroupApiEvents api;   // the group of this thread
  setenv("NCCL_PROFILER_PLUGIN", "testv4", 1);
  auto ctx = profilerInit(commInfo());
  ASSERT_NE(ctx, nullptr);
  ProfilerContext* p = ctx.get();
  EXPECT_EQ(ctx->pluginVersion(), 4);
  EXPECT_STREQ(ctx->pluginName(), "test-v4");
  EXPECT_EQ(ctx->mask(), 0xff) << "v5-only event bits are cleared for a v4 plugin";
  EXPECT_EQ(count(kOpInit), 1);
  EXPECT_EQ(calls()[0].commId, 0x1234abcd5678ef00ULL) << "v4 init takes commName before the id";
  void* gapi = profilerStartGroupApi(&api, p, 1, false);
  EXPECT_EQ(gapi, nullptr) << "v4 has no GroupApi event";
  void* group = profilerStartGroup(p);
  ASSERT_NE(group, nullptr);
  ProfilerCollInfo ci{1, "AllGather", nullptr, nullptr, 64, 0, ncclInt32, 2, 16, "Ring", "LL"};
  int fakeApi;
  void* coll = profilerStartColl(p, &fakeApi, group, ci);
  ASSERT_NE(coll, nullptr);
  const ProfTestCall* c = findStart(coll);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->descr.parentObj, group) << "a v4 Coll's parent is the Group";
  EXPECT_STREQ(c->descr.coll.func, "AllGather");
  EXPECT_STREQ(c->descr.coll.datatype, "ncclInt32");
  EXPECT_STREQ(c->descr.coll.proto, "LL");
  void* kch = profilerStartKernelCh(p, coll, 1, 99);
  profilerStopKernelCh(p, kch, 100);
  profilerStop(p, coll);
  profilerStop(p, group);
  profilerStopGroupApi(&api);
  EXPECT_EQ(count(kOpStart), 3);
  EXPECT_EQ(count(kOpRecord), 1);
}

// ------------------------------------------------------------------ KernelCh
TEST_F(ProfilerTest, KernelChEventsComeFromTheRings) {
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);
  auto ctx = profilerInit(commInfo());
  ProfilerContext* p = ctx.get();
  std::vector<KernelChRing> rings(2);
  memset(rings.data(), 0, rings.size() * sizeof(KernelChRing));
  KernelChTracker tracker(p, rings.data(), 2);
  int parentA, parentB;
  uint64_t a1 = tracker.expect(0, &parentA);
  uint64_t a2 = tracker.expect(0, &parentB);
  uint64_t b1 = tracker.expect(1, &parentB);
  EXPECT_EQ(a1, 1u);
  EXPECT_EQ(a2, 2u);
  EXPECT_EQ(b1, 1u);
  EXPECT_EQ(tracker.expect(7, &parentA), 0u) << "no such channel";
  EXPECT_EQ(tracker.poll(), 3);
  gpuStamp(&rings[0].start[a1 % kKernelChSlots], a1, 1000);
  EXPECT_EQ(tracker.poll(), 3);
  // Reported once both stamps are in (the poller then calls the plugin
  // outside the lock that expect() takes).
  EXPECT_EQ(count(kOpStart, ncclProfileKernelCh), 0);
  gpuStamp(&rings[0].stop[a1 % kKernelChSlots], a1, 1500);
  gpuStamp(&rings[0].start[a2 % kKernelChSlots], a2, 1600);
  gpuStamp(&rings[0].stop[a2 % kKernelChSlots], a2, 1900);
  gpuStamp(&rings[1].start[b1 % kKernelChSlots], b1, 1100);
  EXPECT_EQ(tracker.poll(), 1);
  std::vector<ProfTestCall> starts, stops;
  for (const ProfTestCall& c : calls()) {
    if (c.op == kOpStart) starts.push_back(c);
    if (c.op == kOpRecord) stops.push_back(c);
  }
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0].descr.parentObj, &parentA);
  EXPECT_EQ(starts[0].descr.kernelCh.pTimer, 1000u);
  EXPECT_EQ(starts[1].descr.parentObj, &parentB);
  EXPECT_EQ(starts[1].descr.kernelCh.pTimer, 1600u);
  ASSERT_EQ(stops.size(), 2u);
  EXPECT_EQ(stops[0].args.kernelCh.pTimer, 1500u);
  EXPECT_EQ(stops[1].args.kernelCh.pTimer, 1900u);
  tracker.flush();  // channel 1's item started but never stopped: reported with a 0 stop timer
  EXPECT_EQ(count(kOpStart, ncclProfileKernelCh), 3);
  EXPECT_EQ(count(kOpStart), count(kOpStop));
  EXPECT_EQ(tracker.poll(), 0);
}

// A GPU whose timer is not in nanoseconds (AMD's 100 MHz wall clock): the
// tracker hands the profiler nanoseconds (the plugin contract).
TEST_F(ProfilerTest, KernelChTimerTicksBecomeNanoseconds) {
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);
  auto ctx = profilerInit(commInfo());
  std::vector<KernelChRing> rings(1);
  memset(rings.data(), 0, rings.size() * sizeof(KernelChRing));
  KernelChTracker tracker(ctx.get(), rings.data(), 1, 100000);   // 100 MHz
  int parent;
  const uint64_t c = tracker.expect(0, &parent);
  gpuStamp(&rings[0].start[c % kKernelChSlots], c, 123456789012ull);
  gpuStamp(&rings[0].stop[c % kKernelChSlots], c, 123456789112ull);
  EXPECT_EQ(tracker.poll(), 0);
  std::vector<ProfTestCall> starts, stops;
  for (const ProfTestCall& x : calls()) {
    if (x.op == kOpStart && x.descr.type == ncclProfileKernelCh) starts.push_back(x);
    if (x.op == kOpRecord) stops.push_back(x);
  }
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(starts[0].descr.kernelCh.pTimer, 1234567890120ull);
  EXPECT_EQ(stops[0].args.kernelCh.pTimer - starts[0].descr.kernelCh.pTimer, 1000u);   // 100 ticks = 1 us
}

// The process-wide poller thread reports KernelCh events of registered
// trackers (also after it fell asleep: a kick wakes it) and is joined when
// the last tracker goes.
TEST_F(ProfilerTest, KernelChPollerThreadReportsAndStops) {
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);
  setenv("UNICCL_TEST_PROFILER_MASK", "0x40", 1);
  auto ctx = profilerInit(commInfo());
  std::vector<KernelChRing> rings(1);
  memset(rings.data(), 0, sizeof(KernelChRing));
  KernelChTracker tracker(ctx.get(), rings.data(), 1);
  EXPECT_FALSE(kernel_ch_poller::threadRunning());
  kernel_ch_poller::add(&tracker);
  EXPECT_TRUE(kernel_ch_poller::threadRunning());
  for (int round = 0; round < 3; round++) {
    if (round == 2) std::this_thread::sleep_for(std::chrono::milliseconds(30));   // idle: the thread sleeps
    const uint64_t c = tracker.expect(0, nullptr);
    ASSERT_NE(c, 0u);
    kernel_ch_poller::kick();
    gpuStamp(&rings[0].start[c % kKernelChSlots], c, 100 * c);
    gpuStamp(&rings[0].stop[c % kKernelChSlots], c, 100 * c + 50);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (count(kOpStart, ncclProfileKernelCh) < round + 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    EXPECT_EQ(count(kOpStart, ncclProfileKernelCh), round + 1) << "round " << round;
  }
  kernel_ch_poller::remove(&tracker);
  EXPECT_FALSE(kernel_ch_poller::threadRunning());
  EXPECT_EQ(count(kOpStart), count(kOpStop));
}

TEST_F(ProfilerTest, KernelChRingNeverOverfills) {
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);
  auto ctx = profilerInit(commInfo());
  std::vector<KernelChRing> rings(1);
  memset(rings.data(), 0, sizeof(KernelChRing));
  KernelChTracker tracker(ctx.get(), rings.data(), 1);
  for (int i = 1; i <= kKernelChSlots; i++) EXPECT_EQ(tracker.expect(0, nullptr), (uint64_t)i);
  EXPECT_EQ(tracker.expect(0, nullptr), 0u) << "65th pending item would reuse a slot";
  gpuStamp(&rings[0].start[1], 1, 10);
  gpuStamp(&rings[0].stop[1], 1, 20);
  EXPECT_EQ(tracker.poll(), kKernelChSlots - 1);
  EXPECT_EQ(tracker.expect(0, nullptr), (uint64_t)kKernelChSlots + 1);
}

TEST_F(ProfilerTest, KernelChWithConcurrentGpuAndPoller) {
  setenv("NCCL_PROFILER_PLUGIN", "testprof", 1);
  setenv("UNICCL_TEST_PROFILER_MASK", "0x40", 1);
  auto ctx = profilerInit(commInfo());
  constexpr int kChannels = 4, kItems = 2000;
  std::vector<KernelChRing> rings(kChannels);
  memset(rings.data(), 0, rings.size() * sizeof(KernelChRing));
  KernelChTracker tracker(ctx.get(), rings.data(), kChannels);
  // The "launch thread" hands counters to the "GPU" through a queue, the
  // poller reports; the ring limit makes the launcher retry when full.
  std::mutex qm;
  std::vector<std::pair<int, uint64_t>> queue;
  std::atomic<bool> launched{false};
  std::thread gpu([&] {
    size_t next = 0;
    uint64_t t = 1;
    for (;;) {
      std::pair<int, uint64_t> item{-1, 0};
      bool finished = false;
      {
        std::lock_guard<std::mutex> l(qm);
        if (next < queue.size())
          item = queue[next++];
        else
          finished = launched.load();
      }
      if (item.first < 0) {
        if (finished) break;
        std::this_thread::yield();
        continue;
      }
      KernelChRing& r = rings[item.first];
      gpuStamp(&r.start[item.second % kKernelChSlots], item.second, t++);
      gpuStamp(&r.stop[item.second % kKernelChSlots], item.second, t++);
    }
  });
  std::atomic<bool> done{false};
  std::thread poller([&] {
    while (!done.load()) tracker.poll();
  });
  for (int i = 0; i < kItems; i++) {
    int ch = i % kChannels;
    uint64_t c;
    while ((c = tracker.expect(ch, nullptr)) == 0) std::this_thread::yield();
    std::lock_guard<std::mutex> l(qm);
    queue.emplace_back(ch, c);
  }
  {
    std::lock_guard<std::mutex> l(qm);
    launched.store(true);
  }
  gpu.join();
  while (tracker.poll() != 0) std::this_thread::yield();
  done.store(true);
  poller.join();
  EXPECT_EQ(count(kOpStart, ncclProfileKernelCh), kItems);
  EXPECT_EQ(count(kOpStop), kItems);
}
