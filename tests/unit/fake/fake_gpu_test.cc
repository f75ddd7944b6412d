// The scripted fake itself: the watchdog and graph-tracker tests will lean on
// these behaviours (event states, capture and replay, user objects, leak
// accounting, injected failures), so they are pinned down here.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "fake_gpu.h"

namespace uniccl {
namespace {

class FakeGpu : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
  void TearDown() override { fake::reset(); }
};

TEST_F(FakeGpu, EventStatesFollowTheScript) {
  gpu::Event a, b;
  ASSERT_EQ(gpu::eventCreate(&a), ncclSuccess);
  ASSERT_EQ(gpu::eventCreate(&b), ncclSuccess);
  EXPECT_EQ(fake::eventState(a), fake::EventState::NotRecorded);
  EXPECT_EQ(gpu::eventQuery(a), ncclSuccess);  // never recorded counts as complete, as in CUDA
  ASSERT_EQ(gpu::eventRecord(a, nullptr), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(b, nullptr), ncclSuccess);
  EXPECT_EQ(fake::eventSerial(a), 1u);
  EXPECT_EQ(fake::eventSerial(b), 2u);
  EXPECT_EQ(gpu::eventQuery(a), ncclInProgress);
  EXPECT_EQ(fake::completeEventsUpTo(1), 1u);
  EXPECT_EQ(gpu::eventQuery(a), ncclSuccess);
  EXPECT_EQ(gpu::eventQuery(b), ncclInProgress);
  fake::setEventState(b, fake::EventState::Failed);
  EXPECT_EQ(gpu::eventQuery(b), ncclUnhandledCudaError);
  fake::setAutoComplete(true);
  ASSERT_EQ(gpu::eventRecord(b, nullptr), ncclSuccess);
  EXPECT_EQ(gpu::eventQuery(b), ncclSuccess);
  EXPECT_EQ(fake::live().events, 2u);
  ASSERT_EQ(gpu::eventDestroy(a), ncclSuccess);
  ASSERT_EQ(gpu::eventDestroy(b), ncclSuccess);
  EXPECT_EQ(fake::live().events, 0u);
  EXPECT_NE(gpu::eventDestroy(b), ncclSuccess);
}

TEST_F(FakeGpu, SynchronizeWaitsForAnotherThread) {
  gpu::Event e;
  ASSERT_EQ(gpu::eventCreate(&e), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(e, nullptr), ncclSuccess);
  std::thread t([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    fake::completeOldest();
  });
  EXPECT_EQ(gpu::eventSynchronize(e), ncclSuccess);
  t.join();
  ASSERT_EQ(gpu::eventDestroy(e), ncclSuccess);
}

TEST_F(FakeGpu, InjectedFailuresAndCallCounts) {
  fake::failNext("deviceAlloc", ncclUnhandledCudaError, 2);
  void* p = nullptr;
  EXPECT_EQ(gpu::deviceAlloc(&p, 64), ncclUnhandledCudaError);
  EXPECT_EQ(gpu::deviceAlloc(&p, 64), ncclUnhandledCudaError);
  ASSERT_EQ(gpu::deviceAlloc(&p, 64), ncclSuccess);
  EXPECT_EQ(fake::callCount("deviceAlloc"), 3u);
  EXPECT_EQ(fake::live().deviceAllocs, 1u);
  gpu::PointerInfo info;
  ASSERT_EQ(gpu::pointerGetInfo(static_cast<char*>(p) + 10, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Device);
  void* base;
  size_t size;
  ASSERT_EQ(gpu::memGetAddressRange(static_cast<char*>(p) + 10, &base, &size), ncclSuccess);
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, 64u);
  gpu::IpcMemHandle h;
  ASSERT_EQ(gpu::ipcGetMemHandle(&h, p), ncclSuccess);
  void* opened = nullptr;
  ASSERT_EQ(gpu::ipcOpenMemHandle(&opened, h), ncclSuccess);
  EXPECT_EQ(opened, p);
  EXPECT_EQ(fake::live().ipcOpens, 1u);
  ASSERT_EQ(gpu::ipcCloseMemHandle(opened), ncclSuccess);
  EXPECT_NE(gpu::hostFree(p), ncclSuccess);  // wrong free function
  ASSERT_EQ(gpu::deviceFree(p), ncclSuccess);
  EXPECT_EQ(fake::live().deviceAllocs, 0u);
}

// Virtual memory is real host memory: two maps of one allocation share
// bytes, a mapping keeps the memory after the last handle, reset() undoes
// everything, and setVmm switches support off.
TEST_F(FakeGpu, VirtualMemory) {
  fake::setDeviceCount(2);
  gpu::VmmInfo vmm{};
  ASSERT_EQ(gpu::vmmQuery(1, &vmm), ncclSuccess);
  ASSERT_TRUE(vmm.supported);
  EXPECT_TRUE(vmm.fdExport);
  const size_t g = vmm.granularity;
  gpu::MemHandle h = 0;
  EXPECT_NE(gpu::memCreate(&h, g + 1, 1), ncclSuccess);
  ASSERT_EQ(gpu::memCreate(&h, 2 * g, 1), ncclSuccess);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(gpu::addressReserve(&a, 2 * g, 0), ncclSuccess);
  ASSERT_EQ(gpu::addressReserve(&b, 4 * g, 0), ncclSuccess);
  EXPECT_NE(gpu::memMap(a, g, h, 0), ncclSuccess);   // all of the allocation or nothing
  ASSERT_EQ(gpu::memMap(a, 2 * g, h, 0), ncclSuccess);
  ASSERT_EQ(gpu::memMap(static_cast<char*>(b) + g, 2 * g, h, 0), ncclSuccess);
  EXPECT_NE(gpu::memMap(b, 2 * g, h, 0), ncclSuccess);   // overlaps
  std::memset(a, 0x3d, 2 * g);
  EXPECT_EQ(static_cast<unsigned char*>(b)[g + 2 * g - 1], 0x3d);
  gpu::PointerInfo info;
  ASSERT_EQ(gpu::pointerGetInfo(static_cast<char*>(b) + g + 5, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Device);
  EXPECT_EQ(info.device, 1);
  void* base = nullptr;
  size_t size = 0;
  ASSERT_EQ(gpu::memGetAddressRange(static_cast<char*>(a) + g, &base, &size), ncclSuccess);
  EXPECT_EQ(base, a);
  EXPECT_EQ(size, 2 * g);
  EXPECT_EQ(fake::live().mappings, 2u);
  EXPECT_EQ(gpu::memSetAccess(a, 2 * g, 1), ncclSuccess);
  EXPECT_NE(gpu::memSetAccess(a, g, 1), ncclSuccess);   // not the whole mapping
  ASSERT_EQ(gpu::memRelease(h), ncclSuccess);
  EXPECT_EQ(fake::live().physAllocs, 1u);   // the mappings hold it
  EXPECT_NE(gpu::memRelease(h), ncclSuccess);
  EXPECT_NE(gpu::addressFree(a, 2 * g), ncclSuccess);   // still mapped
  ASSERT_EQ(gpu::memUnmap(a, 2 * g), ncclSuccess);
  ASSERT_EQ(gpu::addressFree(a, 2 * g), ncclSuccess);
  EXPECT_EQ(static_cast<unsigned char*>(b)[g], 0x3d);
  fake::reset();   // unmaps, frees and closes what is left
  const fake::Live l = fake::live();
  EXPECT_EQ(l.physAllocs + l.mappings + l.reservations, 0u);

  fake::setVmm(false);
  ASSERT_EQ(gpu::vmmQuery(0, &vmm), ncclSuccess);
  EXPECT_FALSE(vmm.supported);
  EXPECT_NE(vmm.why, nullptr);
  EXPECT_NE(gpu::memCreate(&h, vmm.granularity, 0), ncclSuccess);
}

std::atomic<int> gDestroyed{0};
void destroyed(void*) { ++gDestroyed; }

TEST_F(FakeGpu, CaptureReplayAndUserObjects) {
  gpu::Stream s;
  ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
  gpu::Graph g = fake::beginCapture(s);
  ASSERT_NE(g, nullptr);
  gpu::CaptureInfo info;
  ASSERT_EQ(gpu::streamGetCaptureInfo(s, &info), ncclSuccess);
  EXPECT_EQ(info.status, gpu::CaptureStatus::Active);
  EXPECT_NE(info.graphId, 0u);
  EXPECT_EQ(info.graph, g);
  gDestroyed = 0;
  ASSERT_EQ(gpu::graphRetainNewUserObject(g, destroyed, nullptr), ncclSuccess);
  gpu::LaunchConfig cfg;
  cfg.stream = s;
  static int kernelStandIn;
  ASSERT_EQ(gpu::launchKernel(&kernelStandIn, cfg, nullptr, nullptr), ncclSuccess);
  EXPECT_EQ(fake::endCapture(s), g);
  EXPECT_EQ(fake::launchCount(), 0u);
  for (int i = 0; i < 3; ++i) fake::replayGraph(g);
  EXPECT_EQ(fake::launchCount(), 3u);
  EXPECT_TRUE(fake::launches()[0].captured);
  EXPECT_EQ(fake::live().userObjects, 1u);
  EXPECT_EQ(gDestroyed.load(), 0);
  fake::destroyGraph(g);
  EXPECT_EQ(gDestroyed.load(), 1);
  EXPECT_EQ(fake::live().graphs, 0u);
  // Ownership passes even when retaining fails.
  EXPECT_NE(gpu::graphRetainNewUserObject(g, destroyed, nullptr), ncclSuccess);
  EXPECT_EQ(gDestroyed.load(), 2);
  ASSERT_EQ(gpu::streamDestroy(s), ncclSuccess);
  EXPECT_EQ(fake::live().streams, 0u);
}

}  // namespace
}  // namespace uniccl
