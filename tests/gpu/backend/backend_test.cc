// The GPU backend on a real device: done events, the event-callback queue and
// the work FIFO end to end, and the rest of src/common/gpu.h (device
// properties, peer access, memory kinds, IPC handles, stream capture, graph
// user objects, host functions). Exits 77 (skipped)
// where no GPU is present.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/enqueue/event_callback_queue.h"
#include "common/enqueue/event_pool.h"
#include "common/enqueue/work_fifo.h"
#include "common/gpu.h"
#include "test_kernels.h"

namespace uniccl {
namespace {

// A host-mapped buffer, freed at scope exit.
struct Mapped {
  void* host = nullptr;
  void* dev = nullptr;
  explicit Mapped(size_t bytes) {
    EXPECT_EQ(gpu::hostAllocMapped(&host, &dev, bytes), ncclSuccess);
    if (host) std::memset(host, 0, bytes);
  }
  ~Mapped() { if (host) (void)gpu::hostFree(host); }
};

struct Stream {
  gpu::Stream s = nullptr;
  Stream() { EXPECT_EQ(gpu::streamCreate(&s), ncclSuccess); }
  ~Stream() { if (s) (void)gpu::streamDestroy(s); }
};

constexpr long long kMaxSpins = 200LL * 1000 * 1000;  // ~seconds of polling host memory: never hang

struct SpinCheck {
  volatile int* result;
  int expected;
  int seen = 0;
  bool ran = false;
};
void checkResult(void* arg, uint64_t) {
  auto* c = static_cast<SpinCheck*>(arg);
  c->seen = *c->result;
  c->ran = true;
}

TEST(GpuBackend, DoneEventFiresAfterTheKernelAndTheCallbackSeesItsResult) {
  Mapped flag(sizeof(int)), result(sizeof(int));
  Stream st;
  EventPool pool;
  EventCallbackQueue q(&pool);
  gpu::Event done;
  ASSERT_EQ(pool.get(&done), ncclSuccess);

  std::mt19937 rng(std::random_device{}());
  int value = static_cast<int>(rng() % 1000000) + 1;
  void* flagDev = flag.dev;
  void* resultDev = result.dev;
  long long maxSpins = kMaxSpins;
  void* args[] = {&flagDev, &resultDev, &value, &maxSpins};
  gpu::LaunchConfig cfg;
  cfg.stream = st.s;
  ASSERT_EQ(gpu::launchKernel(gputest::spinKernel(), cfg, args, done), ncclSuccess);
  SpinCheck check{static_cast<volatile int*>(result.host), value};
  ASSERT_EQ(q.push(done, checkResult, &check, 0), ncclSuccess);

  // The kernel is held: its done event is pending and the callback waits.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(gpu::eventQuery(done), ncclInProgress);
  ASSERT_EQ(q.poll(false), ncclSuccess);
  EXPECT_FALSE(check.ran);
  EXPECT_EQ(q.size(), 1u);

  *static_cast<volatile int*>(flag.host) = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ASSERT_EQ(q.poll(true), ncclSuccess);
  EXPECT_TRUE(check.ran);
  EXPECT_EQ(check.seen, value) << "callback ran before the kernel's write was visible (or the kernel timed out: -1)";
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(gpu::eventQuery(done), ncclSuccess);
  EXPECT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
}

struct FifoWork {
  WorkFifo* fifo;
  uint32_t offset, bytes;
  volatile unsigned long long* out;
  unsigned long long expected;
  int* bad;
  int* done;
};
void fifoWorkDone(void* arg, uint64_t) {
  auto* w = static_cast<FifoWork*>(arg);
  if (*w->out != w->expected) ++*w->bad;
  ++*w->done;
  w->fifo->markConsumed(w->offset + w->bytes);
}

TEST(GpuBackend, WorkFifoRoundTrip) {
  EventPool pool;
  EventCallbackQueue q(&pool);
  WorkFifo fifo;
  ASSERT_EQ(fifo.init(4096, &q), ncclSuccess);
  fifo.setCountersForTesting(0u - 4096u - 1024u);  // the round trip crosses both the ring end and 2^32
  Stream st;
  constexpr int kWorks = 64;
  Mapped sums(kWorks * sizeof(unsigned long long));
  std::vector<FifoWork> works(kWorks);
  int bad = 0, done = 0;
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < kWorks; ++i) {
    const uint32_t bytes = 64u * (1 + rng() % 12);
    uint32_t off;
    ASSERT_EQ(fifo.reserve(bytes, &off), ncclSuccess);
    std::vector<uint32_t> words(bytes / 4);
    for (auto& w : words) w = static_cast<uint32_t>(rng()) | 1u;
    fifo.write(off, words.data(), bytes);
    auto* outDev = static_cast<unsigned long long*>(sums.dev) + i;
    works[i] = FifoWork{&fifo, off, bytes, static_cast<volatile unsigned long long*>(sums.host) + i,
                        gputest::checksumHost(words.data(), bytes / 4), &bad, &done};
    const void* base = fifo.devBase();
    uint32_t mask = fifo.mask();
    void* args[] = {&base, &mask, &off, const_cast<uint32_t*>(&bytes), &outDev};
    gpu::Event ev;
    ASSERT_EQ(pool.get(&ev), ncclSuccess);
    gpu::LaunchConfig cfg;
    cfg.stream = st.s;
    cfg.blockX = 64;
    ASSERT_EQ(gpu::launchKernel(gputest::checksumKernel(), cfg, args, ev), ncclSuccess);
    ASSERT_EQ(q.push(ev, fifoWorkDone, &works[i], i), ncclSuccess);
    ASSERT_EQ(q.poll(false), ncclSuccess);
  }
  ASSERT_EQ(q.drain(), ncclSuccess);
  EXPECT_EQ(done, kWorks);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(fifo.consumed(), fifo.produced());
  EXPECT_LT(fifo.produced(), 0u - 4096u - 1024u);  // wrapped
}

TEST(GpuBackend, DevicePropertiesAndPeers) {
  int n = 0, dev = -1;
  ASSERT_EQ(gpu::getDeviceCount(&n), ncclSuccess);
  ASSERT_EQ(gpu::getDevice(&dev), ncclSuccess);
  gpu::DeviceProps p;
  ASSERT_EQ(gpu::getDeviceProps(dev, &p), ncclSuccess);
  EXPECT_GT(std::strlen(p.name), 0u);
  EXPECT_GT(p.multiProcessorCount, 0);
  EXPECT_TRUE(p.warpSize == 32 || p.warpSize == 64);
  EXPECT_GT(p.totalGlobalMem, 0u);
  unsigned dom, bus, d, f;
  ASSERT_EQ(std::sscanf(p.busId, "%x:%x:%x.%x", &dom, &bus, &d, &f), 4) << p.busId;
  EXPECT_EQ((int)bus, p.pciBus);
  for (const char* c = p.busId; *c; ++c) EXPECT_FALSE(*c >= 'A' && *c <= 'F') << p.busId;
  if (n >= 2) {
    bool can = false;
    ASSERT_EQ(gpu::canAccessPeer(0, 1, &can), ncclSuccess);
    std::printf("devices 0 and 1: peer access %s\n", can ? "yes" : "no");
    if (can) {
      ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
      EXPECT_EQ(gpu::enablePeerAccess(1), ncclSuccess);
      EXPECT_EQ(gpu::enablePeerAccess(1), ncclSuccess);  // already enabled is success
    }
  } else {
    std::printf("one device: peer access between devices not exercised\n");
  }
  EXPECT_NE(gpu::setDevice(n + 7), ncclSuccess);  // a bad ordinal is an error, logged once
  ASSERT_EQ(gpu::setDevice(dev), ncclSuccess);
}

TEST(GpuBackend, MemoryKindsAndIpc) {
  void* d = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&d, 1 << 20), ncclSuccess);
  gpu::PointerInfo info;
  ASSERT_EQ(gpu::pointerGetInfo(static_cast<char*>(d) + 100, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Device);
  int dev;
  ASSERT_EQ(gpu::getDevice(&dev), ncclSuccess);
  EXPECT_EQ(info.device, dev);
  void* base = nullptr;
  size_t size = 0;
  ASSERT_EQ(gpu::memGetAddressRange(static_cast<char*>(d) + 4096, &base, &size), ncclSuccess);
  EXPECT_EQ(base, d);
  EXPECT_GE(size, size_t(1) << 20);

  std::vector<unsigned char> src(1 << 20), back(1 << 20);
  std::mt19937 rng(1);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  ASSERT_EQ(gpu::memcpy(d, src.data(), src.size()), ncclSuccess);
  ASSERT_EQ(gpu::memset(static_cast<char*>(d) + 10, 0x5a, 6), ncclSuccess);
  ASSERT_EQ(gpu::memcpy(back.data(), d, back.size()), ncclSuccess);
  for (int i = 10; i < 16; ++i) src[i] = 0x5a;
  EXPECT_EQ(src, back);

  gpu::IpcMemHandle h;
  ASSERT_EQ(gpu::ipcGetMemHandle(&h, d), ncclSuccess);
  bool nonzero = false;
  for (char c : h.bytes) nonzero |= c != 0;
  EXPECT_TRUE(nonzero);
  ASSERT_EQ(gpu::deviceFree(d), ncclSuccess);

  void* plain = std::malloc(4096);
  ASSERT_EQ(gpu::pointerGetInfo(plain, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Unregistered);
  void* page = nullptr;
  ASSERT_EQ(posix_memalign(&page, 4096, 1 << 16), 0);
  void* pageDev = nullptr;
  ASSERT_EQ(gpu::hostRegister(page, 1 << 16, &pageDev), ncclSuccess);
  EXPECT_NE(pageDev, nullptr);
  ASSERT_EQ(gpu::pointerGetInfo(page, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Host);
  // The device writes through the registered mapping.
  Stream st;
  *static_cast<volatile int*>(page) = 41;
  void* args[] = {&pageDev};
  gpu::LaunchConfig cfg;
  cfg.stream = st.s;
  ASSERT_EQ(gpu::launchKernel(gputest::incrementKernel(), cfg, args, nullptr), ncclSuccess);
  ASSERT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
  EXPECT_EQ(*static_cast<volatile int*>(page), 42);
  ASSERT_EQ(gpu::hostUnregister(page), ncclSuccess);
  std::free(page);
  std::free(plain);
}

std::atomic<int> gDestroyed{0};
void markDestroyed(void* arg) { static_cast<std::atomic<int>*>(arg)->fetch_add(1); }

TEST(GpuBackend, CaptureInfoAndUserObject) {
  Stream st;
  gpu::CaptureInfo info;
  ASSERT_EQ(gpu::streamGetCaptureInfo(st.s, &info), ncclSuccess);
  EXPECT_EQ(info.status, gpu::CaptureStatus::None);
  EXPECT_EQ(info.graphId, 0u);

  Mapped counter(sizeof(int));
  gpu::Event done;
  ASSERT_EQ(gpu::eventCreate(&done), ncclSuccess);
  gDestroyed = 0;

  ASSERT_EQ(gputest::beginCapture(st.s), ncclSuccess);
  ASSERT_EQ(gpu::streamGetCaptureInfo(st.s, &info), ncclSuccess);
  EXPECT_EQ(info.status, gpu::CaptureStatus::Active);
  EXPECT_NE(info.graphId, 0u);
  EXPECT_NE(info.graph, nullptr);
  const ncclResult_t uo = gpu::graphRetainNewUserObject(info.graph, markDestroyed, &gDestroyed);
  EXPECT_TRUE(uo == ncclSuccess || uo == ncclInvalidUsage);
  void* counterDev = counter.dev;
  void* args[] = {&counterDev};
  gpu::LaunchConfig cfg;
  cfg.stream = st.s;
  ASSERT_EQ(gpu::launchKernel(gputest::incrementKernel(), cfg, args, done), ncclSuccess);
  gpu::Graph graph = nullptr;
  ASSERT_EQ(gputest::endCapture(st.s, &graph), ncclSuccess);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph, info.graph);
  ASSERT_EQ(gpu::streamGetCaptureInfo(st.s, &info), ncclSuccess);
  EXPECT_EQ(info.status, gpu::CaptureStatus::None);

  ASSERT_EQ(gputest::replay(graph, st.s, 3), ncclSuccess);
  EXPECT_EQ(*static_cast<volatile int*>(counter.host), 3);
  if (uo == ncclSuccess) {
    EXPECT_EQ(gDestroyed.load(), 0);  // the graph still holds it
  }
  ASSERT_EQ(gputest::destroyGraph(graph), ncclSuccess);
  // The destructor may run asynchronously on a runtime thread.
  for (int i = 0; i < 500 && gDestroyed.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(gDestroyed.load(), 1);  // exactly once, whether supported or not
  ASSERT_EQ(gpu::eventDestroy(done), ncclSuccess);
}

TEST(GpuBackend, EventsAndErrors) {
  Stream st;
  gpu::Event a, b;
  ASSERT_EQ(gpu::eventCreate(&a, gpu::kEventDefault), ncclSuccess);
  ASSERT_EQ(gpu::eventCreate(&b, gpu::kEventDefault), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(a, st.s), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(b, st.s), ncclSuccess);
  ASSERT_EQ(gpu::eventSynchronize(b), ncclSuccess);
  EXPECT_EQ(gpu::eventQuery(a), ncclSuccess);
  ASSERT_EQ(gpu::eventDestroy(a), ncclSuccess);
  ASSERT_EQ(gpu::eventDestroy(b), ncclSuccess);
  // An error is reported and cleared: the next call is not affected.
  void* p = nullptr;
  EXPECT_NE(gpu::deviceAlloc(&p, ~size_t(0) >> 2), ncclSuccess);
  ASSERT_EQ(gpu::deviceAlloc(&p, 256), ncclSuccess);
  ASSERT_EQ(gpu::deviceFree(p), ncclSuccess);
  EXPECT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
}

}  // namespace
}  // namespace uniccl

int main(int argc, char** argv) {
  int n = 0;
  if (uniccl::gpu::getDeviceCount(&n) != ncclSuccess || n == 0) {
    std::printf("SKIP: no GPU (getDeviceCount reported %d devices or failed)\n", n);
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
