// The emulated GPU backend against the contract of src/common/gpu.h: stream
// order, cross-stream waits, events and timing, launches through a runner,
// the default stream's synchronous semantics, memory kinds, virtual memory
// (maps of one allocation, a forked importer), per-thread devices, IPC,
// errors, and many threads at once (also run under TSan).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/gpu.h"
#include "device/dev_types.h"
#include "emu_gpu.h"

namespace uniccl {
namespace {

using namespace std::chrono_literals;

// Holds a stream at a point of its queue until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<bool> reached{false};
  static void hold(void* p) {
    auto* g = static_cast<Gate*>(p);
    g->reached = true;
    std::unique_lock<std::mutex> lk(g->mu);
    g->cv.wait(lk, [g] { return g->open; });
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
};

struct Stream {
  gpu::Stream s = nullptr;
  Stream() { EXPECT_EQ(gpu::streamCreate(&s), ncclSuccess); }
  ~Stream() {
    if (s) {
      EXPECT_EQ(gpu::streamDestroy(s), ncclSuccess);
    }
  }
};

struct Event {
  gpu::Event e = nullptr;
  explicit Event(unsigned flags = gpu::kEventDisableTiming) { EXPECT_EQ(gpu::eventCreate(&e, flags), ncclSuccess); }
  ~Event() {
    if (e) {
      EXPECT_EQ(gpu::eventDestroy(e), ncclSuccess);
    }
  }
};

std::vector<unsigned char> randomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// Every test starts on device 0 with no runner and leaves nothing alive.
class EmuGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
    emu::setKernelRunner(nullptr);
    before_ = emu::usage();
  }
  void TearDown() override {
    emu::setKernelRunner(nullptr);
    emu::Usage u = emu::usage();
    EXPECT_EQ(u.deviceAllocs, before_.deviceAllocs);
    EXPECT_EQ(u.hostAllocs, before_.hostAllocs);
    EXPECT_EQ(u.registrations, before_.registrations);
    EXPECT_EQ(u.streams, before_.streams);
    EXPECT_EQ(u.events, before_.events);
    EXPECT_EQ(u.ipcOpens, before_.ipcOpens);
    EXPECT_EQ(u.physAllocs, before_.physAllocs);
    EXPECT_EQ(u.physBytes, before_.physBytes);
    EXPECT_EQ(u.mappings, before_.mappings);
    EXPECT_EQ(u.reservations, before_.reservations);
    (void)gpu::setDevice(0);
  }
  emu::Usage before_{};
};

// ------------------------------------------------------------------ devices
TEST_F(EmuGpu, DevicesBusIdsAndPeers) {
  int n = 0;
  ASSERT_EQ(gpu::getDeviceCount(&n), ncclSuccess);
  if (std::getenv("UNICCL_EMU_DEVICES") == nullptr) {
    EXPECT_EQ(n, 2);  // the default
  }
  ASSERT_GE(n, 2) << "the tests need two emulated devices";
  gpu::DeviceProps p0, p1;
  ASSERT_EQ(gpu::getDeviceProps(0, &p0), ncclSuccess);
  ASSERT_EQ(gpu::getDeviceProps(1, &p1), ncclSuccess);
  EXPECT_STRNE(p0.busId, p1.busId);
  EXPECT_STREQ(p0.busId, "0000:01:00.0");
  EXPECT_STREQ(p1.busId, "0000:02:00.0");
  EXPECT_EQ(p1.pciBus, 2);
  EXPECT_EQ(p0.warpSize, 32);
  EXPECT_GT(p0.multiProcessorCount, 0);
  EXPECT_GT(p0.totalGlobalMem, 0u);
  EXPECT_GT(std::strlen(p0.name), 0u);
  for (int d = 0; d < n; ++d) {
    gpu::DeviceProps p;
    ASSERT_EQ(gpu::getDeviceProps(d, &p), ncclSuccess);
    int back = -1;
    ASSERT_EQ(gpu::deviceGetByBusId(p.busId, &back), ncclSuccess);
    EXPECT_EQ(back, d);
  }
  int dev = -1;
  EXPECT_EQ(gpu::deviceGetByBusId("0000:02:00.0", &dev), ncclSuccess);
  EXPECT_EQ(dev, 1);
  EXPECT_EQ(gpu::deviceGetByBusId("02:00.0", &dev), ncclSuccess);  // short form, as CUDA accepts
  EXPECT_EQ(dev, 1);
  EXPECT_EQ(gpu::deviceGetByBusId("0000:ff:00.0", &dev), ncclInvalidArgument);  // not visible here
  EXPECT_EQ(gpu::deviceGetByBusId("0000:01:00.1", &dev), ncclInvalidArgument);
  EXPECT_EQ(gpu::deviceGetByBusId("garbage", &dev), ncclInvalidArgument);
  EXPECT_NE(gpu::getDeviceProps(n, &p0), ncclSuccess);

  bool can = false;
  ASSERT_EQ(gpu::canAccessPeer(0, 1, &can), ncclSuccess);
  EXPECT_TRUE(can);
  ASSERT_EQ(gpu::canAccessPeer(1, 0, &can), ncclSuccess);
  EXPECT_TRUE(can);
  EXPECT_EQ(gpu::enablePeerAccess(1), ncclSuccess);
  EXPECT_EQ(gpu::enablePeerAccess(1), ncclSuccess);  // already enabled is success
  EXPECT_NE(gpu::enablePeerAccess(0), ncclSuccess);  // itself, as CUDA refuses
  EXPECT_NE(gpu::enablePeerAccess(n), ncclSuccess);
}

TEST_F(EmuGpu, CurrentDeviceIsPerThread) {
  ASSERT_EQ(gpu::setDevice(1), ncclSuccess);
  int other = -1;
  std::thread t([&] {
    (void)gpu::getDevice(&other);  // a new thread starts on device 0
    EXPECT_EQ(gpu::setDevice(0), ncclSuccess);
  });
  t.join();
  EXPECT_EQ(other, 0);
  int dev = -1;
  ASSERT_EQ(gpu::getDevice(&dev), ncclSuccess);
  EXPECT_EQ(dev, 1);  // the other thread's setDevice did not move this one

  // Objects belong to the device current at creation.
  Stream st;
  int sdev = -1;
  ASSERT_EQ(emu::streamGetDevice(st.s, &sdev), ncclSuccess);
  EXPECT_EQ(sdev, 1);
  ASSERT_EQ(emu::streamGetDevice(nullptr, &sdev), ncclSuccess);
  EXPECT_EQ(sdev, 1);
  void* d = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&d, 1000), ncclSuccess);
  gpu::PointerInfo info;
  ASSERT_EQ(gpu::pointerGetInfo(d, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Device);
  EXPECT_EQ(info.device, 1);
  // An event of device 1 cannot be recorded on a stream of device 0.
  Event ev;
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  Stream st0;
  EXPECT_EQ(gpu::eventRecord(ev.e, st0.s), ncclUnhandledCudaError);
  EXPECT_EQ(gpu::eventRecord(ev.e, st.s), ncclSuccess);  // the stream's device is what counts
  EXPECT_EQ(gpu::eventSynchronize(ev.e), ncclSuccess);
  EXPECT_EQ(gpu::deviceFree(d), ncclSuccess);  // from another current device: fine

  EXPECT_EQ(gpu::setDevice(-1), ncclUnhandledCudaError);
  int n = 0;
  ASSERT_EQ(gpu::getDeviceCount(&n), ncclSuccess);
  EXPECT_EQ(gpu::setDevice(n), ncclUnhandledCudaError);
  ASSERT_EQ(gpu::getDevice(&dev), ncclSuccess);
  EXPECT_EQ(dev, 0);  // a failed setDevice leaves it alone
}

// ------------------------------------------------------------------ streams
struct Check {
  const unsigned char* data;
  std::vector<unsigned char> expected;
  bool ok = false;
  bool ran = false;
};
void checkData(void* p) {
  auto* c = static_cast<Check*>(p);
  c->ok = std::memcmp(c->data, c->expected.data(), c->expected.size()) == 0;
  c->ran = true;
}

TEST_F(EmuGpu, MemcpyAsyncThenHostFuncSeesTheData) {
  constexpr size_t kBytes = 1 << 20;
  auto src = randomBytes(kBytes, 7);
  void* d = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&d, kBytes), ncclSuccess);
  Stream st;
  Gate gate;
  // Held first, so the copy and the check surely run later, on the worker.
  ASSERT_EQ(emu::launchHostFunc(st.s, Gate::hold, &gate), ncclSuccess);
  ASSERT_EQ(gpu::memcpyAsync(d, src.data(), kBytes, st.s), ncclSuccess);
  ASSERT_EQ(emu::memsetAsync(static_cast<char*>(d) + 100, 0x3c, 50, st.s), ncclSuccess);
  Check check{static_cast<unsigned char*>(d), src};
  std::memset(check.expected.data() + 100, 0x3c, 50);
  ASSERT_EQ(emu::launchHostFunc(st.s, checkData, &check), ncclSuccess);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(check.ran);
  gate.release();
  ASSERT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
  EXPECT_TRUE(check.ran);
  EXPECT_TRUE(check.ok);
  ASSERT_EQ(gpu::deviceFree(d), ncclSuccess);
}

struct Slot {
  std::atomic<int> value{0};
  int seen = -1;
};
void writeSlot(void* p) {
  std::this_thread::sleep_for(30ms);  // slow producer: a missing wait would read 0
  static_cast<Slot*>(p)->value.store(12345, std::memory_order_relaxed);
}
void readSlot(void* p) {
  auto* s = static_cast<Slot*>(p);
  s->seen = s->value.load(std::memory_order_relaxed);
}

TEST_F(EmuGpu, StreamWaitEventOrdersTwoStreams) {
  Stream a, b;
  Event ev;
  Slot slot;
  ASSERT_EQ(emu::launchHostFunc(a.s, writeSlot, &slot), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(ev.e, a.s), ncclSuccess);
  ASSERT_EQ(gpu::streamWaitEvent(b.s, ev.e), ncclSuccess);
  ASSERT_EQ(emu::launchHostFunc(b.s, readSlot, &slot), ncclSuccess);
  ASSERT_EQ(gpu::streamSynchronize(b.s), ncclSuccess);
  EXPECT_EQ(slot.seen, 12345);
  ASSERT_EQ(gpu::streamSynchronize(a.s), ncclSuccess);
}

TEST_F(EmuGpu, StreamWaitEventWaitsForTheRecordCurrentAtEnqueue) {
  Stream a, b;
  Event ev;
  Gate first, second;
  ASSERT_EQ(emu::launchHostFunc(a.s, Gate::hold, &first), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(ev.e, a.s), ncclSuccess);   // record 1: behind `first`
  ASSERT_EQ(gpu::streamWaitEvent(b.s, ev.e), ncclSuccess);
  ASSERT_EQ(emu::launchHostFunc(a.s, Gate::hold, &second), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(ev.e, a.s), ncclSuccess);   // record 2: behind `second`
  Gate bDone;
  bDone.open = true;
  ASSERT_EQ(emu::launchHostFunc(b.s, Gate::hold, &bDone), ncclSuccess);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(bDone.reached.load());  // b waits for record 1
  first.release();
  // b only needs record 1: it finishes while record 2 is still held.
  ASSERT_EQ(gpu::streamSynchronize(b.s), ncclSuccess);
  EXPECT_TRUE(bDone.reached.load());
  EXPECT_EQ(gpu::eventQuery(ev.e), ncclInProgress);
  second.release();
  ASSERT_EQ(gpu::eventSynchronize(ev.e), ncclSuccess);
  EXPECT_EQ(gpu::eventQuery(ev.e), ncclSuccess);
}

TEST_F(EmuGpu, WaitOnANeverRecordedEventIsANoOp) {
  Stream st;
  Event ev;
  EXPECT_EQ(gpu::eventQuery(ev.e), ncclSuccess);  // as CUDA: never recorded counts as complete
  EXPECT_EQ(gpu::eventSynchronize(ev.e), ncclSuccess);
  ASSERT_EQ(gpu::streamWaitEvent(st.s, ev.e), ncclSuccess);
  ASSERT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
}

TEST_F(EmuGpu, EventQueryNotReadyThenReady) {
  Stream st;
  Event ev;
  Gate gate;
  ASSERT_EQ(emu::launchHostFunc(st.s, Gate::hold, &gate), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(ev.e, st.s), ncclSuccess);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(gpu::eventQuery(ev.e), ncclInProgress);
    std::this_thread::sleep_for(5ms);
  }
  std::atomic<bool> synced{false};
  std::thread waiter([&] {
    EXPECT_EQ(gpu::eventSynchronize(ev.e), ncclSuccess);
    synced = true;
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(synced.load());
  gate.release();
  waiter.join();
  EXPECT_TRUE(synced.load());
  EXPECT_EQ(gpu::eventQuery(ev.e), ncclSuccess);
  // Re-recording makes it pending again.
  Gate again;
  ASSERT_EQ(emu::launchHostFunc(st.s, Gate::hold, &again), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(ev.e, st.s), ncclSuccess);
  EXPECT_EQ(gpu::eventQuery(ev.e), ncclInProgress);
  again.release();
  ASSERT_EQ(gpu::eventSynchronize(ev.e), ncclSuccess);
  EXPECT_EQ(gpu::eventQuery(ev.e), ncclSuccess);
}

void sleep40(void*) { std::this_thread::sleep_for(40ms); }

TEST_F(EmuGpu, ElapsedTime) {
  Stream st;
  Event a(gpu::kEventDefault), b(gpu::kEventDefault);
  float ms = -1;
  EXPECT_EQ(emu::eventElapsedMs(a.e, b.e, &ms), ncclUnhandledCudaError);  // never recorded
  Gate gate;
  ASSERT_EQ(gpu::eventRecord(a.e, st.s), ncclSuccess);
  ASSERT_EQ(emu::launchHostFunc(st.s, sleep40, nullptr), ncclSuccess);
  ASSERT_EQ(emu::launchHostFunc(st.s, Gate::hold, &gate), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(b.e, st.s), ncclSuccess);
  EXPECT_EQ(emu::eventElapsedMs(a.e, b.e, &ms), ncclUnhandledCudaError);  // b not ready
  gate.release();
  ASSERT_EQ(gpu::eventSynchronize(b.e), ncclSuccess);
  ASSERT_EQ(emu::eventElapsedMs(a.e, b.e, &ms), ncclSuccess);
  EXPECT_GE(ms, 39.0f);
  EXPECT_LT(ms, 5000.0f);
  float back = 0;
  ASSERT_EQ(emu::eventElapsedMs(b.e, a.e, &back), ncclSuccess);
  EXPECT_FLOAT_EQ(back, -ms);

  Event c, d;  // timing disabled (the default flavour)
  ASSERT_EQ(gpu::eventRecord(c.e, st.s), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(d.e, st.s), ncclSuccess);
  ASSERT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
  emu::clearLastError();
  EXPECT_EQ(emu::eventElapsedMs(c.e, d.e, &ms), ncclUnhandledCudaError);
  EXPECT_NE(std::strstr(emu::lastErrorString(), "timing disabled"), nullptr) << emu::lastErrorString();
  EXPECT_EQ(emu::eventElapsedMs(a.e, d.e, &ms), ncclUnhandledCudaError);

  gpu::Event bad = nullptr;
  EXPECT_EQ(gpu::eventCreate(&bad, gpu::kEventInterprocess), ncclUnhandledCudaError);  // needs timing disabled
  ASSERT_EQ(gpu::eventCreate(&bad, gpu::kEventInterprocess | gpu::kEventDisableTiming), ncclSuccess);
  ASSERT_EQ(gpu::eventDestroy(bad), ncclSuccess);
}

TEST_F(EmuGpu, DestroyingAStreamDrainsItAndAnEventOutlivesItsRecordsQueue) {
  Slot slot;
  gpu::Stream s = nullptr;
  ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
  ASSERT_EQ(emu::launchHostFunc(s, writeSlot, &slot), ncclSuccess);
  gpu::Event ev = nullptr;
  ASSERT_EQ(gpu::eventCreate(&ev), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(ev, s), ncclSuccess);
  ASSERT_EQ(gpu::eventDestroy(ev), ncclSuccess);  // its record is still pending: allowed
  ASSERT_EQ(gpu::streamDestroy(s), ncclSuccess);
  EXPECT_EQ(slot.value.load(), 12345);            // the queued work ran before destroy returned
  EXPECT_EQ(gpu::streamSynchronize(s), ncclUnhandledCudaError);  // gone
  EXPECT_EQ(gpu::eventQuery(ev), ncclUnhandledCudaError);
  EXPECT_EQ(gpu::streamDestroy(nullptr), ncclUnhandledCudaError);
}

TEST_F(EmuGpu, DeviceSynchronizeWaitsForEveryStreamOfTheCurrentDeviceOnly) {
  Stream a, b;
  ASSERT_EQ(gpu::setDevice(1), ncclSuccess);
  Stream other;
  Gate held;
  ASSERT_EQ(emu::launchHostFunc(other.s, Gate::hold, &held), ncclSuccess);  // device 1 stays busy
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  Slot s1, s2, s3;
  ASSERT_EQ(emu::launchHostFunc(a.s, writeSlot, &s1), ncclSuccess);
  ASSERT_EQ(emu::launchHostFunc(b.s, writeSlot, &s2), ncclSuccess);
  ASSERT_EQ(emu::launchHostFunc(nullptr, writeSlot, &s3), ncclSuccess);
  ASSERT_EQ(emu::deviceSynchronize(), ncclSuccess);
  EXPECT_EQ(s1.value.load(), 12345);
  EXPECT_EQ(s2.value.load(), 12345);
  EXPECT_EQ(s3.value.load(), 12345);
  held.release();
}

// Waiters that hold a stream being destroyed neither miss its drain nor touch it once freed.
TEST_F(EmuGpu, DeviceSynchronizeRacesAStreamDestroy) {
  for (int round = 0; round < 20; ++round) {
    gpu::Stream s = nullptr;
    ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
    Gate gate;
    Slot slot;
    ASSERT_EQ(emu::launchHostFunc(s, Gate::hold, &gate), ncclSuccess);
    ASSERT_EQ(emu::launchHostFunc(s, writeSlot, &slot), ncclSuccess);
    std::atomic<int> returned{0};
    int seenBySync = -1;
    std::thread destroyer([&] {
      EXPECT_EQ(gpu::streamDestroy(s), ncclSuccess);
      returned.fetch_add(1);
    });
    std::thread syncer([&] {
      EXPECT_EQ(emu::deviceSynchronize(), ncclSuccess);
      seenBySync = slot.value.load();
      returned.fetch_add(1);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 3));
    EXPECT_EQ(returned.load(), 0);
    gate.release();
    destroyer.join();
    syncer.join();
    EXPECT_EQ(seenBySync, 12345);  // the draining stream still counted
  }
}

// The synchronous memcpy/memset wait for the default stream (work queued
// there before them), not for the non-blocking streams.
TEST_F(EmuGpu, SynchronousCopiesFollowTheDefaultStream) {
  constexpr size_t kBytes = 4096;
  void* d = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&d, kBytes), ncclSuccess);
  Gate gate;
  ASSERT_EQ(emu::launchHostFunc(nullptr, Gate::hold, &gate), ncclSuccess);
  ASSERT_EQ(emu::memsetAsync(d, 0x77, kBytes, nullptr), ncclSuccess);
  std::vector<unsigned char> back(kBytes, 0);
  std::atomic<bool> copied{false};
  std::thread reader([&] {
    EXPECT_EQ(gpu::memcpy(back.data(), d, kBytes), ncclSuccess);  // thread starts on device 0 too
    copied = true;
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(copied.load());
  gate.release();
  reader.join();
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(back[i], 0x77) << i;

  // A held non-blocking stream does not hold synchronous copies back.
  Stream st;
  Gate held;
  ASSERT_EQ(emu::launchHostFunc(st.s, Gate::hold, &held), ncclSuccess);
  auto src = randomBytes(kBytes, 3);
  ASSERT_EQ(gpu::memcpy(d, src.data(), kBytes), ncclSuccess);
  ASSERT_EQ(gpu::memset(d, 0x11, 8), ncclSuccess);
  ASSERT_EQ(gpu::memcpy(back.data(), d, kBytes), ncclSuccess);
  std::memset(src.data(), 0x11, 8);
  EXPECT_EQ(back, src);
  held.release();
  ASSERT_EQ(gpu::deviceFree(d), ncclSuccess);
}

TEST_F(EmuGpu, DeviceFreeWaitsForTheDevicesQueuedWork) {
  constexpr size_t kBytes = 256;
  void* d = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&d, kBytes), ncclSuccess);
  Stream st;
  Gate gate;
  std::vector<unsigned char> back(kBytes, 0);
  ASSERT_EQ(emu::launchHostFunc(st.s, Gate::hold, &gate), ncclSuccess);
  ASSERT_EQ(emu::memsetAsync(d, 0x42, kBytes, st.s), ncclSuccess);
  ASSERT_EQ(gpu::memcpyAsync(back.data(), d, kBytes, st.s), ncclSuccess);
  std::atomic<bool> freed{false};
  std::thread freer([&] {
    EXPECT_EQ(gpu::deviceFree(d), ncclSuccess);
    freed = true;
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(freed.load());
  gate.release();
  freer.join();
  EXPECT_EQ(back, std::vector<unsigned char>(kBytes, 0x42));
}

// ------------------------------------------------------------------- memory
TEST_F(EmuGpu, MemoryKindsAndRanges) {
  gpu::PointerInfo info;
  ASSERT_EQ(gpu::setDevice(1), ncclSuccess);
  void* d = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&d, 1000), ncclSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 256, 0u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(static_cast<unsigned char*>(d)[i], 0xCD) << "fresh memory is never zeros";
  ASSERT_EQ(gpu::pointerGetInfo(static_cast<char*>(d) + 999, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Device);
  EXPECT_EQ(info.device, 1);
  void* base = nullptr;
  size_t size = 0;
  ASSERT_EQ(gpu::memGetAddressRange(static_cast<char*>(d) + 500, &base, &size), ncclSuccess);
  EXPECT_EQ(base, d);
  EXPECT_EQ(size, 1000u);
  EXPECT_EQ(gpu::memGetAddressRange(static_cast<char*>(d) + 1000 + 4096, &base, &size), ncclUnhandledCudaError);
  EXPECT_EQ(gpu::deviceFree(static_cast<char*>(d) + 8), ncclUnhandledCudaError);  // not the base
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);

  void* pinned = nullptr;
  ASSERT_EQ(emu::hostAllocPinned(&pinned, 100), ncclSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pinned) % 4096, 0u);
  EXPECT_EQ(static_cast<unsigned char*>(pinned)[99], 0xCD);
  ASSERT_EQ(gpu::pointerGetInfo(pinned, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Host);
  EXPECT_EQ(info.device, -1);
  EXPECT_EQ(gpu::memGetAddressRange(pinned, &base, &size), ncclUnhandledCudaError);

  void *mh = nullptr, *md = nullptr;
  ASSERT_EQ(gpu::hostAllocMapped(&mh, &md, 3 * 4096 + 1), ncclSuccess);
  EXPECT_EQ(mh, md);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mh) % 4096, 0u);
  ASSERT_EQ(gpu::pointerGetInfo(static_cast<char*>(md) + 3 * 4096, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Host);

  void* page = nullptr;
  ASSERT_EQ(posix_memalign(&page, 4096, 1 << 16), 0);
  ASSERT_EQ(gpu::pointerGetInfo(page, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Unregistered);
  void* pageDev = nullptr;
  ASSERT_EQ(gpu::hostRegister(page, 1 << 16, &pageDev), ncclSuccess);
  EXPECT_EQ(pageDev, page);
  ASSERT_EQ(gpu::pointerGetInfo(static_cast<char*>(page) + 100, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Host);
  void* again = nullptr;
  EXPECT_EQ(gpu::hostRegister(static_cast<char*>(page) + 4096, 4096, &again), ncclUnhandledCudaError);  // overlap
  EXPECT_EQ(gpu::hostUnregister(static_cast<char*>(page) + 4096), ncclUnhandledCudaError);
  ASSERT_EQ(gpu::hostUnregister(page), ncclSuccess);
  EXPECT_EQ(gpu::hostUnregister(page), ncclUnhandledCudaError);
  ASSERT_EQ(gpu::pointerGetInfo(page, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Unregistered);
  std::free(page);

  EXPECT_EQ(gpu::hostFree(d), ncclUnhandledCudaError);    // device memory is not host memory
  EXPECT_EQ(gpu::deviceFree(pinned), ncclUnhandledCudaError);
  ASSERT_EQ(gpu::hostFree(pinned), ncclSuccess);
  ASSERT_EQ(gpu::hostFree(mh), ncclSuccess);
  ASSERT_EQ(gpu::deviceFree(d), ncclSuccess);
  ASSERT_EQ(gpu::pointerGetInfo(d, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Unregistered);
  EXPECT_EQ(gpu::deviceFree(nullptr), ncclSuccess);
  EXPECT_EQ(gpu::hostFree(nullptr), ncclSuccess);

  void* huge = nullptr;
  gpu::DeviceProps p;
  ASSERT_EQ(gpu::getDeviceProps(0, &p), ncclSuccess);
  EXPECT_EQ(gpu::deviceAlloc(&huge, p.totalGlobalMem + 1), ncclUnhandledCudaError);
  EXPECT_EQ(huge, nullptr);
}

// --------------------------------------------------------------- launches
struct LaunchLog {
  std::mutex mu;
  std::vector<std::vector<unsigned char>> args;
  std::vector<unsigned> grids, blocks;
  std::vector<const void*> kernels;
  std::vector<int> devices;
  std::vector<int> order;
  Gate* gate = nullptr;
};
LaunchLog* gLog = nullptr;

void recordingRunner(const void* kernel, unsigned gridX, unsigned blockX, const void* argBytes) {
  if (gLog->gate) Gate::hold(gLog->gate);
  int dev = -1;
  (void)gpu::getDevice(&dev);
  std::lock_guard<std::mutex> lk(gLog->mu);
  const auto* b = static_cast<const unsigned char*>(argBytes);
  gLog->args.emplace_back(b, b + sizeof(dev::KernelArgs));
  gLog->grids.push_back(gridX);
  gLog->blocks.push_back(blockX);
  gLog->kernels.push_back(kernel);
  gLog->devices.push_back(dev);
  gLog->order.push_back(static_cast<int>(gLog->order.size()));
}

int kernelA, kernelB;  // stand-ins for __global__ functions: only their addresses matter

TEST_F(EmuGpu, LaunchRunsTheRunnerWithACopyOfTheArguments) {
  dev::KernelArgs args;
  auto bytes = randomBytes(sizeof(args), 11);
  std::memcpy(&args, bytes.data(), sizeof(args));
  void* argv[] = {&args};
  gpu::LaunchConfig cfg;
  cfg.gridX = 3;
  cfg.blockX = 512;
  EXPECT_EQ(gpu::launchKernel(&kernelA, cfg, argv, nullptr), ncclInvalidUsage);  // no runner yet
  EXPECT_NE(std::strstr(emu::lastErrorString(), "setKernelRunner"), nullptr) << emu::lastErrorString();

  LaunchLog log;
  Gate gate;
  log.gate = &gate;
  gLog = &log;
  emu::setKernelRunner(recordingRunner);
  ASSERT_EQ(gpu::setDevice(1), ncclSuccess);
  Stream st;
  Event done;
  cfg.stream = st.s;
  ASSERT_EQ(gpu::launchKernel(&kernelA, cfg, argv, done.e), ncclSuccess);
  std::memset(&args, 0, sizeof(args));  // the launch copied them already
  EXPECT_EQ(gpu::eventQuery(done.e), ncclInProgress);
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(gpu::eventQuery(done.e), ncclInProgress);  // held inside the "kernel"
  gate.release();
  ASSERT_EQ(gpu::eventSynchronize(done.e), ncclSuccess);
  {
    std::lock_guard<std::mutex> lk(log.mu);
    ASSERT_EQ(log.args.size(), 1u);
    EXPECT_EQ(log.args[0], bytes);
    EXPECT_EQ(log.grids[0], 3u);
    EXPECT_EQ(log.blocks[0], 512u);
    EXPECT_EQ(log.kernels[0], &kernelA);
    EXPECT_EQ(log.devices[0], 1);  // the worker runs on the stream's device
  }
  // In order with the other work of the stream; no done event is fine.
  log.gate = nullptr;
  Slot slot;
  ASSERT_EQ(emu::launchHostFunc(st.s, writeSlot, &slot), ncclSuccess);
  std::memcpy(&args, bytes.data(), sizeof(args));
  cfg.gridX = 1;
  cfg.blockX = 64;
  ASSERT_EQ(gpu::launchKernel(&kernelB, cfg, argv, nullptr), ncclSuccess);
  ASSERT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
  EXPECT_EQ(slot.value.load(), 12345);
  {
    std::lock_guard<std::mutex> lk(log.mu);
    ASSERT_EQ(log.kernels.size(), 2u);
    EXPECT_EQ(log.kernels[1], &kernelB);
    EXPECT_EQ(log.args[1], bytes);
  }

  // Launch-time checks of a real runtime.
  cfg.blockX = 2048;
  EXPECT_EQ(gpu::launchKernel(&kernelA, cfg, argv, nullptr), ncclUnhandledCudaError);
  cfg.blockX = 64;
  cfg.gridX = 0;
  EXPECT_EQ(gpu::launchKernel(&kernelA, cfg, argv, nullptr), ncclUnhandledCudaError);
  cfg.gridX = 1;
  cfg.sharedMemBytes = 100 << 10;
  EXPECT_EQ(gpu::launchKernel(&kernelA, cfg, argv, nullptr), ncclUnhandledCudaError);
  ASSERT_EQ(emu::setKernelMaxDynamicShared(&kernelA, 100 << 10), ncclSuccess);
  ASSERT_EQ(gpu::launchKernel(&kernelA, cfg, argv, nullptr), ncclSuccess);
  EXPECT_EQ(emu::setKernelMaxDynamicShared(&kernelA, 1 << 20), ncclUnhandledCudaError);
  EXPECT_EQ(gpu::preloadKernel(&kernelA), ncclSuccess);
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  Event dev0;
  EXPECT_EQ(gpu::launchKernel(&kernelA, cfg, argv, dev0.e), ncclUnhandledCudaError);  // other device's event
  ASSERT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
  {
    std::lock_guard<std::mutex> lk(log.mu);
    EXPECT_EQ(log.kernels.size(), 3u);  // failed launches did not run
  }
  emu::setKernelRunner(nullptr);
  gLog = nullptr;
}

// ------------------------------------------------------------ graphs, errors
int gDestroyed = 0;
void markDestroyed(void* p) { ++*static_cast<int*>(p); }
void noop(void*) {}

TEST_F(EmuGpu, CaptureIsNotEmulatedAndErrorsAreKeptPerThread) {
  Stream st;
  gpu::CaptureInfo info{gpu::CaptureStatus::Active, 7, &info};
  ASSERT_EQ(gpu::streamGetCaptureInfo(st.s, &info), ncclSuccess);
  EXPECT_EQ(info.status, gpu::CaptureStatus::None);
  EXPECT_EQ(info.graphId, 0u);
  EXPECT_EQ(info.graph, nullptr);
  ASSERT_EQ(gpu::streamGetCaptureInfo(nullptr, &info), ncclSuccess);
  EXPECT_EQ(info.status, gpu::CaptureStatus::None);

  emu::clearLastError();
  EXPECT_STREQ(emu::lastErrorString(), "no error");
  gDestroyed = 0;
  EXPECT_EQ(gpu::graphRetainNewUserObject(nullptr, markDestroyed, &gDestroyed), ncclInvalidUsage);
  EXPECT_NE(std::strstr(emu::lastErrorString(), "graph capture is not emulated"), nullptr) << emu::lastErrorString();
  EXPECT_EQ(gDestroyed, 1);  // ownership passed: destroyed exactly once
  std::string other;
  std::thread t([&] { other = emu::lastErrorString(); });
  t.join();
  EXPECT_EQ(other, "no error");  // another thread's error is not this one's
  emu::clearLastError();
  EXPECT_STREQ(emu::lastErrorString(), "no error");

  int notAStream = 0;
  EXPECT_EQ(gpu::streamSynchronize(&notAStream), ncclUnhandledCudaError);
  EXPECT_EQ(emu::launchHostFunc(&notAStream, noop, nullptr), ncclUnhandledCudaError);
  EXPECT_EQ(gpu::eventQuery(&notAStream), ncclUnhandledCudaError);
  EXPECT_NE(std::strstr(emu::lastErrorString(), "invalid resource handle"), nullptr) << emu::lastErrorString();
}

// --------------------------------------------------------------------- IPC
TEST_F(EmuGpu, IpcInTheSameProcess) {
  void* d = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&d, 8192), ncclSuccess);
  gpu::IpcMemHandle h;
  ASSERT_EQ(gpu::ipcGetMemHandle(&h, static_cast<char*>(d) + 256), ncclSuccess);  // names the whole allocation
  void* opened = nullptr;
  ASSERT_EQ(gpu::ipcOpenMemHandle(&opened, h), ncclSuccess);
  EXPECT_EQ(opened, d);
  EXPECT_EQ(emu::usage().ipcOpens, before_.ipcOpens + 1);
  ASSERT_EQ(gpu::ipcCloseMemHandle(opened), ncclSuccess);
  EXPECT_EQ(gpu::ipcCloseMemHandle(opened), ncclUnhandledCudaError);  // closed twice

  gpu::IpcMemHandle junk{};
  EXPECT_EQ(gpu::ipcOpenMemHandle(&opened, junk), ncclUnhandledCudaError);
  void* host = nullptr;
  ASSERT_EQ(emu::hostAllocPinned(&host, 64), ncclSuccess);
  EXPECT_EQ(gpu::ipcGetMemHandle(&h, host), ncclUnhandledCudaError);  // not device memory
  ASSERT_EQ(gpu::hostFree(host), ncclSuccess);
  ASSERT_EQ(gpu::ipcGetMemHandle(&h, d), ncclSuccess);
  ASSERT_EQ(gpu::deviceFree(d), ncclSuccess);
  EXPECT_EQ(gpu::ipcOpenMemHandle(&opened, h), ncclUnhandledCudaError);  // allocation gone
}

// A forked child cannot open the parent's handles, and gets a working fresh
// runtime. (Excluded under TSan: no new threads after a multi-threaded fork.)
TEST_F(EmuGpu, ForkedChildRefusesForeignIpcAndStartsFresh) {
  void* d = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&d, 4096), ncclSuccess);
  gpu::IpcMemHandle h;
  ASSERT_EQ(gpu::ipcGetMemHandle(&h, d), ncclSuccess);
  Stream busy;  // the parent has worker threads at fork time
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    void* opened = nullptr;
    if (gpu::ipcOpenMemHandle(&opened, h) != ncclInvalidUsage) code |= 1;
    if (std::strstr(emu::lastErrorString(), "IPC across processes is not emulated") == nullptr) code |= 2;
    gpu::Stream s = nullptr;
    unsigned char v[16];
    unsigned char src[16];
    std::memset(src, 0x5e, sizeof(src));
    if (gpu::streamCreate(&s) != ncclSuccess || gpu::memcpyAsync(v, src, sizeof(v), s) != ncclSuccess ||
        gpu::streamSynchronize(s) != ncclSuccess || gpu::streamDestroy(s) != ncclSuccess)
      code |= 4;
    else if (std::memcmp(v, src, sizeof(v)) != 0)
      code |= 8;
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_EQ(gpu::deviceFree(d), ncclSuccess);
}

// ---------------------------------------------------------- virtual memory
// Counts this process's open file descriptors (memfds and their exports).
int openFds() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

// A reservation of `n` granules with a mapping of `h` at its start.
struct View {
  void* va = nullptr;
  size_t reserved = 0, mapped = 0;
  View(gpu::MemHandle h, size_t bytes, size_t reserve, int dev) : reserved(reserve) {
    EXPECT_EQ(gpu::addressReserve(&va, reserve, 0), ncclSuccess);
    if (va != nullptr && gpu::memMap(va, bytes, h, dev) == ncclSuccess) mapped = bytes;
  }
  ~View() {
    if (mapped != 0) {
      EXPECT_EQ(gpu::memUnmap(va, mapped), ncclSuccess);
    }
    if (va != nullptr) {
      EXPECT_EQ(gpu::addressFree(va, reserved), ncclSuccess);
    }
  }
  unsigned char* bytes() const { return static_cast<unsigned char*>(va); }
};

TEST_F(EmuGpu, VmmTwoMappingsOfOneAllocationShareTheBytes) {
  gpu::VmmInfo vmm{};
  ASSERT_EQ(gpu::vmmQuery(1, &vmm), ncclSuccess);
  ASSERT_TRUE(vmm.supported);
  EXPECT_TRUE(vmm.fdExport);
  const size_t g = vmm.granularity;
  ASSERT_EQ(g, size_t(64) << 10);
  const size_t bytes = 3 * g;
  gpu::MemHandle h = 0;
  ASSERT_EQ(gpu::memCreate(&h, bytes, 1), ncclSuccess);
  EXPECT_EQ(emu::usage().physAllocs, before_.physAllocs + 1);
  EXPECT_EQ(emu::usage().physBytes, before_.physBytes + bytes);   // device memory in use
  {
    View a(h, bytes, bytes, 0);
    ASSERT_EQ(a.mapped, bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.va) % g, 0u);
    EXPECT_EQ(a.bytes()[bytes - 1], 0xCD) << "fresh memory is never zeros";
    // Export, import (this process: the same allocation, one more reference)
    // and map again further into a larger reservation.
    int fd = -1;
    ASSERT_EQ(gpu::memExportFd(h, &fd), ncclSuccess);
    gpu::MemHandle imported = 0;
    ASSERT_EQ(gpu::memImportFd(fd, &imported), ncclSuccess);
    EXPECT_EQ(imported, h);
    ASSERT_EQ(close(fd), 0);
    void* big = nullptr;
    ASSERT_EQ(gpu::addressReserve(&big, 2 * bytes, 4 * g), ncclSuccess);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % (4 * g), 0u);
    unsigned char* b = static_cast<unsigned char*>(big) + g;
    ASSERT_EQ(gpu::memMap(b, bytes, imported, 0), ncclSuccess);
    EXPECT_EQ(emu::usage().mappings, before_.mappings + 2);
    auto pattern = randomBytes(bytes, 3);
    std::memcpy(a.bytes(), pattern.data(), bytes);
    EXPECT_EQ(std::memcmp(b, pattern.data(), bytes), 0);
    b[7] = 0x11;
    EXPECT_EQ(a.bytes()[7], 0x11);
    ASSERT_EQ(gpu::memSetAccess(b, bytes, 1), ncclSuccess);   // one more device may use it
    EXPECT_EQ(gpu::memSetAccess(b, g, 1), ncclUnhandledCudaError);   // not the whole mapping
    EXPECT_EQ(gpu::memSetAccess(b, bytes, 9), ncclUnhandledCudaError);

    // Device memory of the allocation's device; the range is the mapping.
    gpu::PointerInfo info;
    ASSERT_EQ(gpu::pointerGetInfo(b + bytes - 1, &info), ncclSuccess);
    EXPECT_EQ(info.kind, gpu::MemoryKind::Device);
    EXPECT_EQ(info.device, 1);
    void* base = nullptr;
    size_t size = 0;
    ASSERT_EQ(gpu::memGetAddressRange(b + 12345, &base, &size), ncclSuccess);
    EXPECT_EQ(base, b);
    EXPECT_EQ(size, bytes);
    ASSERT_EQ(gpu::pointerGetInfo(static_cast<char*>(big) + 10, &info), ncclSuccess);   // reserved, not mapped
    EXPECT_EQ(info.kind, gpu::MemoryKind::Unregistered);

    // Retain from an interior address: the handle, the mapping.
    gpu::MemHandle r = 0;
    void* mapBase = nullptr;
    size_t mapBytes = 0;
    ASSERT_EQ(gpu::memRetainFromAddress(a.bytes() + g + 17, &r, &mapBase, &mapBytes), ncclSuccess);
    EXPECT_EQ(r, h);
    EXPECT_EQ(mapBase, a.va);
    EXPECT_EQ(mapBytes, bytes);
    ASSERT_EQ(gpu::memRelease(r), ncclSuccess);
    // Ordinary device memory is no VMM mapping: an answer, not a logged failure.
    void* d = nullptr;
    ASSERT_EQ(gpu::deviceAlloc(&d, 4096), ncclSuccess);
    emu::clearLastError();
    EXPECT_EQ(gpu::memRetainFromAddress(d, &r, &mapBase, &mapBytes), ncclInvalidArgument);
    EXPECT_EQ(gpu::memRetainFromAddress(&r, &r, &mapBase, &mapBytes), ncclInvalidArgument);
    EXPECT_STREQ(emu::lastErrorString(), "no error");
    ASSERT_EQ(gpu::deviceFree(d), ncclSuccess);

    // Neither cudaFree nor CUDA IPC takes VMM memory.
    EXPECT_EQ(gpu::deviceFree(b), ncclUnhandledCudaError);
    gpu::IpcMemHandle ipc;
    EXPECT_EQ(gpu::ipcGetMemHandle(&ipc, b), ncclUnhandledCudaError);

    ASSERT_EQ(gpu::memUnmap(b, bytes), ncclSuccess);
    ASSERT_EQ(gpu::addressFree(big, 2 * bytes), ncclSuccess);
    ASSERT_EQ(gpu::memRelease(imported), ncclSuccess);
  }
  // The mapping held the memory; the last handle goes with it.
  EXPECT_EQ(emu::usage().physAllocs, before_.physAllocs + 1);
  ASSERT_EQ(gpu::memRelease(h), ncclSuccess);
  EXPECT_EQ(gpu::memRelease(h), ncclUnhandledCudaError);   // released twice
}

TEST_F(EmuGpu, VmmMemoryLivesUntilTheLastHandleAndMappingGo) {
  const size_t g = size_t(64) << 10;
  gpu::MemHandle h = 0;
  ASSERT_EQ(gpu::memCreate(&h, g, 0), ncclSuccess);
  {
    View v(h, g, 2 * g, 0);
    ASSERT_EQ(v.mapped, g);
    v.bytes()[5] = 42;
    ASSERT_EQ(gpu::memRelease(h), ncclSuccess);   // the mapping still holds it
    EXPECT_EQ(emu::usage().physAllocs, before_.physAllocs + 1);
    EXPECT_EQ(v.bytes()[5], 42);
    EXPECT_EQ(gpu::memMap(v.bytes() + g, g, h, 0), ncclUnhandledCudaError);   // the handle is gone
    int fd = -1;
    EXPECT_EQ(gpu::memExportFd(h, &fd), ncclUnhandledCudaError);
    gpu::MemHandle again = 0;
    void* mapBase = nullptr;
    size_t mapBytes = 0;
    ASSERT_EQ(gpu::memRetainFromAddress(v.bytes() + 9, &again, &mapBase, &mapBytes), ncclSuccess);
    EXPECT_EQ(again, h);
    ASSERT_EQ(gpu::memRelease(again), ncclSuccess);
  }
  EXPECT_EQ(emu::usage().physAllocs, before_.physAllocs);
  EXPECT_EQ(emu::usage().physBytes, before_.physBytes);
}

TEST_F(EmuGpu, VmmRefusesWhatCudaRefuses) {
  const size_t g = size_t(64) << 10;
  gpu::MemHandle h = 0;
  EXPECT_EQ(gpu::memCreate(&h, g + 4096, 0), ncclUnhandledCudaError);   // not a multiple of the granularity
  EXPECT_EQ(gpu::memCreate(&h, 0, 0), ncclUnhandledCudaError);
  EXPECT_EQ(gpu::memCreate(&h, g, 99), ncclUnhandledCudaError);
  gpu::DeviceProps p;
  ASSERT_EQ(gpu::getDeviceProps(0, &p), ncclSuccess);
  EXPECT_EQ(gpu::memCreate(&h, (p.totalGlobalMem / g + 1) * g, 0), ncclUnhandledCudaError);   // out of memory
  EXPECT_NE(std::strstr(emu::lastErrorString(), "out of memory"), nullptr) << emu::lastErrorString();
  void* va = nullptr;
  EXPECT_EQ(gpu::addressReserve(&va, g + 1, 0), ncclUnhandledCudaError);
  EXPECT_EQ(gpu::addressReserve(&va, g, 3 * g), ncclUnhandledCudaError);   // alignment not a power of two

  ASSERT_EQ(gpu::memCreate(&h, 2 * g, 0), ncclSuccess);
  ASSERT_EQ(gpu::addressReserve(&va, 4 * g, 0), ncclSuccess);
  char* c = static_cast<char*>(va);
  EXPECT_EQ(gpu::memMap(c, g, h, 0), ncclUnhandledCudaError);              // part of the allocation
  EXPECT_EQ(gpu::memMap(c + 3 * g, 2 * g, h, 0), ncclUnhandledCudaError);  // past the reservation
  EXPECT_EQ(gpu::memMap(c + 4096, 2 * g, h, 0), ncclUnhandledCudaError);   // not aligned
  EXPECT_EQ(gpu::memMap(c, 2 * g, h, 7), ncclUnhandledCudaError);          // no such device
  int local = 0;
  EXPECT_EQ(gpu::memMap(&local, 2 * g, h, 0), ncclUnhandledCudaError);     // not reserved
  ASSERT_EQ(gpu::memMap(c + g, 2 * g, h, 0), ncclSuccess);
  EXPECT_EQ(gpu::memMap(c, 2 * g, h, 0), ncclUnhandledCudaError);          // overlaps the mapping
  EXPECT_EQ(gpu::addressFree(va, 4 * g), ncclUnhandledCudaError);          // still mapped
  EXPECT_NE(std::strstr(emu::lastErrorString(), "memUnmap first"), nullptr) << emu::lastErrorString();
  EXPECT_EQ(gpu::addressFree(va, 2 * g), ncclUnhandledCudaError);          // not the whole reservation
  EXPECT_EQ(gpu::memUnmap(c + g, g), ncclUnhandledCudaError);              // not the whole mapping
  ASSERT_EQ(gpu::memUnmap(c + g, 2 * g), ncclSuccess);
  EXPECT_EQ(gpu::memUnmap(c + g, 2 * g), ncclUnhandledCudaError);          // twice
  ASSERT_EQ(gpu::addressFree(va, 4 * g), ncclSuccess);

  // Only the emulator's own allocations import.
  int pipeFds[2];
  ASSERT_EQ(pipe(pipeFds), 0);
  gpu::MemHandle bad = 0;
  EXPECT_EQ(gpu::memImportFd(pipeFds[0], &bad), ncclUnhandledCudaError);
  close(pipeFds[0]);
  close(pipeFds[1]);
  EXPECT_EQ(gpu::memImportFd(-1, &bad), ncclUnhandledCudaError);
  ASSERT_EQ(gpu::memRelease(h), ncclSuccess);
}

// Kernels (host threads of the stream's worker) read and write mappings.
void writingRunner(const void*, unsigned, unsigned, const void* argBytes) {
  unsigned char* p = nullptr;
  std::memcpy(&p, argBytes, sizeof(p));
  for (int i = 0; i < 256; ++i) p[i] = static_cast<unsigned char>(p[i + 256] + 1);
}

TEST_F(EmuGpu, VmmKernelsUseMappedMemory) {
  const size_t g = size_t(64) << 10;
  gpu::MemHandle h = 0;
  ASSERT_EQ(gpu::memCreate(&h, g, 1), ncclSuccess);
  {
    View a(h, g, g, 1), b(h, g, g, 0);
    ASSERT_EQ(a.mapped, g);
    ASSERT_EQ(b.mapped, g);
    for (int i = 0; i < 256; ++i) a.bytes()[256 + i] = static_cast<unsigned char>(i);
    emu::setKernelRunner(writingRunner);
    ASSERT_EQ(gpu::setDevice(1), ncclSuccess);
    Stream st;
    dev::KernelArgs args;
    std::memset(&args, 0, sizeof(args));
    unsigned char* target = a.bytes();
    static_assert(sizeof(args) >= sizeof(target), "the pointer travels in the arguments");
    std::memcpy(&args, &target, sizeof(target));
    void* argv[] = {&args};
    gpu::LaunchConfig cfg;
    cfg.stream = st.s;
    ASSERT_EQ(gpu::launchKernel(&kernelA, cfg, argv, nullptr), ncclSuccess);
    ASSERT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(b.bytes()[i], static_cast<unsigned char>(i + 1)) << i;
    emu::setKernelRunner(nullptr);
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  }
  ASSERT_EQ(gpu::memRelease(h), ncclSuccess);
}

TEST_F(EmuGpu, VmmThousandCyclesLeakNothing) {
  const size_t g = size_t(64) << 10;
  const int fds = openFds();
  for (int i = 0; i < 1000; ++i) {
    gpu::MemHandle h = 0, imported = 0;
    ASSERT_EQ(gpu::memCreate(&h, g, i % 2), ncclSuccess);
    int fd = -1;
    ASSERT_EQ(gpu::memExportFd(h, &fd), ncclSuccess);
    ASSERT_EQ(gpu::memImportFd(fd, &imported), ncclSuccess);
    ASSERT_EQ(close(fd), 0);
    void* va = nullptr;
    ASSERT_EQ(gpu::addressReserve(&va, g, 0), ncclSuccess);
    ASSERT_EQ(gpu::memMap(va, g, imported, i % 2), ncclSuccess);
    static_cast<unsigned char*>(va)[i] = 1;
    ASSERT_EQ(gpu::memRelease(imported), ncclSuccess);
    ASSERT_EQ(gpu::memRelease(h), ncclSuccess);
    ASSERT_EQ(gpu::memUnmap(va, g), ncclSuccess);
    ASSERT_EQ(gpu::addressFree(va, g), ncclSuccess);
  }
  EXPECT_EQ(openFds(), fds);
  emu::Usage u = emu::usage();
  EXPECT_EQ(u.physAllocs, before_.physAllocs);
  EXPECT_EQ(u.physBytes, before_.physBytes);
  EXPECT_EQ(u.mappings, before_.mappings);
  EXPECT_EQ(u.reservations, before_.reservations);
}

// Threads mapping and unmapping at once (run under TSan too).
TEST_F(EmuGpu, VmmManyThreads) {
  const size_t g = size_t(64) << 10;
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  gpu::MemHandle shared = 0;
  ASSERT_EQ(gpu::memCreate(&shared, g, 0), ncclSuccess);
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        gpu::MemHandle h = 0;
        void* va = nullptr;
        bool ok = gpu::memCreate(&h, g, t % 2) == ncclSuccess && gpu::addressReserve(&va, 2 * g, 0) == ncclSuccess &&
                  gpu::memMap(va, g, h, t % 2) == ncclSuccess &&
                  gpu::memMap(static_cast<char*>(va) + g, g, shared, t % 2) == ncclSuccess;
        if (ok) {
          static_cast<unsigned char*>(va)[g + t] = static_cast<unsigned char>(i);
          gpu::MemHandle r = 0;
          void* base = nullptr;
          size_t bytes = 0;
          ok = gpu::memRetainFromAddress(static_cast<char*>(va) + g + 1, &r, &base, &bytes) == ncclSuccess &&
               r == shared && gpu::memRelease(r) == ncclSuccess &&
               gpu::memUnmap(static_cast<char*>(va) + g, g) == ncclSuccess && gpu::memUnmap(va, g) == ncclSuccess &&
               gpu::addressFree(va, 2 * g) == ncclSuccess && gpu::memRelease(h) == ncclSuccess;
        }
        if (!ok) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_EQ(gpu::memRelease(shared), ncclSuccess);
}

// A forked child (a fresh runtime) imports an exported allocation, maps it
// and writes through its own mapping; the parent sees the bytes. (Excluded
// under TSan with the other fork test.)
TEST_F(EmuGpu, VmmForkedChildMapsAnExportedAllocation) {
  const size_t g = size_t(64) << 10;
  gpu::MemHandle h = 0;
  ASSERT_EQ(gpu::memCreate(&h, 2 * g, 1), ncclSuccess);
  int fd = -1;
  ASSERT_EQ(gpu::memExportFd(h, &fd), ncclSuccess);
  {
    View v(h, 2 * g, 2 * g, 1);
    ASSERT_EQ(v.mapped, 2 * g);
    std::memset(v.bytes(), 0x21, 2 * g);
    Stream busy;   // the parent has worker threads at fork time
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      gpu::MemHandle mine = 0;
      void* va = nullptr;
      gpu::PointerInfo info{};
      if (gpu::memImportFd(fd, &mine) != ncclSuccess) _exit(1);
      if (gpu::addressReserve(&va, 2 * g, 0) != ncclSuccess || gpu::memMap(va, 2 * g, mine, 0) != ncclSuccess) _exit(2);
      auto* p = static_cast<unsigned char*>(va);
      if (p[0] != 0x21 || p[2 * g - 1] != 0x21) code |= 4;           // the parent's bytes
      if (gpu::pointerGetInfo(p + 3, &info) != ncclSuccess || info.kind != gpu::MemoryKind::Device || info.device != 1)
        code |= 8;                                                    // the device came with the fd
      for (size_t i = 0; i < 2 * g; ++i) p[i] = static_cast<unsigned char>(i * 7);
      if (gpu::memUnmap(va, 2 * g) != ncclSuccess || gpu::addressFree(va, 2 * g) != ncclSuccess ||
          gpu::memRelease(mine) != ncclSuccess)
        code |= 16;
      if (emu::usage().physAllocs != 0 || emu::usage().physBytes != 0) code |= 32;   // the child created nothing
      _exit(code);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    for (size_t i = 0; i < 2 * g; ++i) ASSERT_EQ(v.bytes()[i], static_cast<unsigned char>(i * 7)) << i;
  }
  ASSERT_EQ(close(fd), 0);
  ASSERT_EQ(gpu::memRelease(h), ncclSuccess);
}

// ------------------------------------------------------------- concurrency
// One host thread per device (like ncclCommInitAll's init threads), each with
// its own streams, all crossing over with events: checks data and leaves TSan
// something to look at.
struct Counter {
  std::atomic<int> n{0};
};
void bump(void* p) { static_cast<Counter*>(p)->n.fetch_add(1); }

TEST_F(EmuGpu, ManyThreadsManyStreams) {
  constexpr int kThreads = 4, kRounds = 60;
  constexpr size_t kBytes = 4096;
  std::vector<gpu::Event> shared(kThreads, nullptr);
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  std::vector<std::thread> ts;
  std::vector<int> failures(kThreads, 0);
  Counter counter;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      auto check = [&](bool ok) { failures[t] += ok ? 0 : 1; };
      check(gpu::setDevice(t % 2) == ncclSuccess);
      gpu::Stream a = nullptr, b = nullptr;
      check(gpu::streamCreate(&a) == ncclSuccess);
      check(gpu::streamCreate(&b) == ncclSuccess);
      gpu::Event ev = nullptr;
      check(gpu::eventCreate(&ev) == ncclSuccess);
      void *d1 = nullptr, *d2 = nullptr;
      check(gpu::deviceAlloc(&d1, kBytes) == ncclSuccess);
      check(gpu::deviceAlloc(&d2, kBytes) == ncclSuccess);
      std::vector<unsigned char> out(kBytes);
      for (int r = 0; r < kRounds; ++r) {
        auto src = randomBytes(kBytes, 100 * t + r);
        check(gpu::memcpyAsync(d1, src.data(), kBytes, a) == ncclSuccess);
        check(gpu::eventRecord(ev, a) == ncclSuccess);
        check(gpu::streamWaitEvent(b, ev) == ncclSuccess);
        check(gpu::memcpyAsync(d2, d1, kBytes, b) == ncclSuccess);
        check(emu::launchHostFunc(b, bump, &counter) == ncclSuccess);
        check(gpu::memcpyAsync(out.data(), d2, kBytes, b) == ncclSuccess);
        if (r % 3 == 0) {
          check(gpu::eventQuery(ev) != ncclUnhandledCudaError);
          gpu::PointerInfo info;
          check(gpu::pointerGetInfo(d2, &info) == ncclSuccess && info.kind == gpu::MemoryKind::Device);
        }
        check(gpu::streamSynchronize(b) == ncclSuccess);
        check(out == src);
        // a must not overwrite d1 before b copied it: b is synchronized, so fine.
      }
      check(emu::deviceSynchronize() == ncclSuccess);
      check(gpu::deviceFree(d1) == ncclSuccess);
      check(gpu::deviceFree(d2) == ncclSuccess);
      check(gpu::eventDestroy(ev) == ncclSuccess);
      check(gpu::streamDestroy(a) == ncclSuccess);
      check(gpu::streamDestroy(b) == ncclSuccess);
    });
  }
  for (auto& t : ts) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(counter.n.load(), kThreads * kRounds);
}

}  // namespace
}  // namespace uniccl
