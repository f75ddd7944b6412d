// The GPU backend on a real device: done events, the event-callback queue and
// the work FIFO end to end, and the rest of src/common/gpu.h (device
// properties, peer access, memory kinds, IPC handles, virtual memory (two
// maps of one allocation, peers, another process importing an fd), stream
// capture, graph user objects, host functions). Exits 77 (skipped)
// where no GPU is present.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/enqueue/event_callback_queue.h"
#include "common/enqueue/event_pool.h"
#include "common/enqueue/work_fifo.h"
#include "common/gpu.h"
#include "common/memory/mem_alloc.h"
#include "common/util/fd_passing.h"
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

// ---------------------------------------------------------- virtual memory
// A reservation of `reserve` bytes with all of `h` mapped at its start.
struct VmmView {
  void* va = nullptr;
  size_t reserved = 0, mapped = 0;
  VmmView(gpu::MemHandle h, size_t bytes, size_t reserve, int dev) : reserved(reserve) {
    EXPECT_EQ(gpu::addressReserve(&va, reserve, 0), ncclSuccess);
    if (va != nullptr && gpu::memMap(va, bytes, h, dev) == ncclSuccess) mapped = bytes;
  }
  ~VmmView() {
    if (mapped != 0) {
      EXPECT_EQ(gpu::memUnmap(va, mapped), ncclSuccess);
    }
    if (va != nullptr) {
      EXPECT_EQ(gpu::addressFree(va, reserved), ncclSuccess);
    }
  }
  char* at(size_t off) const { return static_cast<char*>(va) + off; }
};

bool vmmSupported(int dev, gpu::VmmInfo* vmm) {
  EXPECT_EQ(gpu::vmmQuery(dev, vmm), ncclSuccess);
  if (!vmm->supported) std::printf("virtual memory unsupported on GPU %d: %s\n", dev, vmm->why);
  return vmm->supported;
}

TEST(GpuBackend, VirtualMemoryTwoMapsOfOneAllocation) {
  int dev = 0;
  ASSERT_EQ(gpu::getDevice(&dev), ncclSuccess);
  gpu::VmmInfo vmm{};
  if (!vmmSupported(dev, &vmm)) GTEST_SKIP() << vmm.why;
  std::printf("GPU %d: granularity %zu, fd export %d\n", dev, vmm.granularity, (int)vmm.fdExport);
  const size_t g = vmm.granularity, bytes = 2 * g;
  gpu::MemHandle h = 0;
  ASSERT_EQ(gpu::memCreate(&h, bytes, dev), ncclSuccess);
  {
    VmmView a(h, bytes, bytes, dev), b(h, bytes, 2 * bytes, dev);
    ASSERT_EQ(a.mapped, bytes);
    ASSERT_EQ(b.mapped, bytes);
    ASSERT_EQ(gpu::memset(a.va, 0, bytes), ncclSuccess);
    ASSERT_EQ(gpu::memset(a.at(g), 0x11, 16), ncclSuccess);
    // A kernel increments through one map; the other shows it.
    Stream st;
    void* counter = b.at(64);
    void* args[] = {&counter};
    gpu::LaunchConfig cfg;
    cfg.stream = st.s;
    ASSERT_EQ(gpu::launchKernel(gputest::incrementKernel(), cfg, args, nullptr), ncclSuccess);
    ASSERT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
    int v = 0;
    ASSERT_EQ(gpu::memcpy(&v, a.at(64), sizeof(v)), ncclSuccess);
    EXPECT_EQ(v, 1);
    unsigned char c = 0;
    ASSERT_EQ(gpu::memcpy(&c, b.at(g + 15), 1), ncclSuccess);
    EXPECT_EQ(c, 0x11);

    gpu::PointerInfo info;
    ASSERT_EQ(gpu::pointerGetInfo(b.at(bytes - 1), &info), ncclSuccess);
    EXPECT_EQ(info.kind, gpu::MemoryKind::Device);
    EXPECT_EQ(info.device, dev);
    void* base = nullptr;
    size_t size = 0;
    ASSERT_EQ(gpu::memGetAddressRange(b.at(g + 3), &base, &size), ncclSuccess);
    EXPECT_EQ(base, b.va);
    EXPECT_EQ(size, bytes);

    gpu::MemHandle r = 0;
    void* mapBase = nullptr;
    size_t mapBytes = 0;
    ASSERT_EQ(gpu::memRetainFromAddress(a.at(g + 5), &r, &mapBase, &mapBytes), ncclSuccess);
    EXPECT_EQ(mapBase, a.va);
    EXPECT_EQ(mapBytes, bytes);
    ASSERT_EQ(gpu::memRelease(r), ncclSuccess);
    void* d = nullptr;
    ASSERT_EQ(gpu::deviceAlloc(&d, 1 << 20), ncclSuccess);
    EXPECT_EQ(gpu::memRetainFromAddress(d, &r, &mapBase, &mapBytes), ncclInvalidArgument);   // not VMM memory
    ASSERT_EQ(gpu::deviceFree(d), ncclSuccess);

    if (vmm.fdExport) {
      int fd = -1;
      ASSERT_EQ(gpu::memExportFd(h, &fd), ncclSuccess);
      gpu::MemHandle imported = 0;
      ASSERT_EQ(gpu::memImportFd(fd, &imported), ncclSuccess);
      close(fd);
      {
        VmmView c(imported, bytes, bytes, dev);
        ASSERT_EQ(c.mapped, bytes);
        ASSERT_EQ(gpu::memcpy(&v, c.at(64), sizeof(v)), ncclSuccess);
        EXPECT_EQ(v, 1);
      }
      ASSERT_EQ(gpu::memRelease(imported), ncclSuccess);
    }
  }
  ASSERT_EQ(gpu::memRelease(h), ncclSuccess);
}

// ncclMemAlloc's buffers on two GPUs: a peer copy between them (the copy
// engine path of core/copy_engine.h), and a kernel on one GPU through a
// mapping of the other's allocation with access given to it.
TEST(GpuBackend, VirtualMemoryPeers) {
  int n = 0;
  ASSERT_EQ(gpu::getDeviceCount(&n), ncclSuccess);
  if (n < 2) GTEST_SKIP() << "needs 2 GPUs";
  gpu::VmmInfo vmm{};
  if (!vmmSupported(0, &vmm) || !vmmSupported(1, &vmm)) GTEST_SKIP() << vmm.why;
  bool can = false;
  ASSERT_EQ(gpu::canAccessPeer(0, 1, &can), ncclSuccess);
  if (!can) GTEST_SKIP() << "GPUs 0 and 1 are no peers";
  const size_t bytes = 3 << 20;
  void *p0 = nullptr, *p1 = nullptr;
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  ASSERT_EQ(memAlloc(&p0, bytes), ncclSuccess);
  ASSERT_EQ(gpu::setDevice(1), ncclSuccess);
  ASSERT_EQ(memAlloc(&p1, bytes), ncclSuccess);
  std::vector<unsigned char> src(bytes), back(bytes, 0);
  std::mt19937 rng(5);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  // Each buffer is written and read with its own GPU current (only that GPU
  // has access); the copy between them runs on GPU 0's stream, as the copy
  // engine path does for the sending rank.
  ASSERT_EQ(gpu::memset(p1, 0, bytes), ncclSuccess);
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  ASSERT_EQ(gpu::memcpy(p0, src.data(), bytes), ncclSuccess);
  {
    Stream st;
    ASSERT_EQ(gpu::memcpyAsync(p1, p0, bytes, st.s), ncclSuccess);
    ASSERT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
  }
  ASSERT_EQ(gpu::setDevice(1), ncclSuccess);
  ASSERT_EQ(gpu::memcpy(back.data(), p1, bytes), ncclSuccess);
  EXPECT_TRUE(back == src) << "peer copy between two ncclMemAlloc buffers";

  // GPU 1 maps GPU 0's allocation (access for GPU 1) and increments in it.
  MemAllocInfo info{};
  ASSERT_TRUE(memAllocFind(p0, &info));
  ASSERT_TRUE(info.vmm);
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  ASSERT_EQ(gpu::memset(p0, 0, 64), ncclSuccess);
  ASSERT_EQ(gpu::setDevice(1), ncclSuccess);
  {
    VmmView peer(info.handle, info.bytes, info.bytes, 1);
    ASSERT_EQ(peer.mapped, info.bytes);
    Stream st;
    void* counter = peer.va;
    void* args[] = {&counter};
    gpu::LaunchConfig cfg;
    cfg.stream = st.s;
    ASSERT_EQ(gpu::launchKernel(gputest::incrementKernel(), cfg, args, nullptr), ncclSuccess);
    ASSERT_EQ(gpu::streamSynchronize(st.s), ncclSuccess);
  }
  ASSERT_EQ(memFree(p1), ncclSuccess);
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  int v = 0;
  ASSERT_EQ(gpu::memcpy(&v, p0, sizeof(v)), ncclSuccess);
  EXPECT_EQ(v, 1);
  ASSERT_EQ(memFree(p0), ncclSuccess);
}

// Another process (this program again, exec'd: CUDA cannot continue in a
// forked child) receives the allocation's fd over util/fd_passing.h, maps
// it, checks the parent's bytes and writes its own.
struct VmmChildMsg {
  uint64_t bytes;
  int32_t dev;
};
constexpr unsigned char kParentByte = 0x21, kChildByte = 0x42;

int vmmChild(const char* name) {
  FdSocket s;
  if (s.connect(name, deadlineAfterMs(30000)) != ncclSuccess) return 10;
  UniqueFd fd;
  VmmChildMsg m{};
  if (recvFds(s, &fd, 1, &m, sizeof(m), deadlineAfterMs(30000)) != ncclSuccess) return 11;
  if (gpu::setDevice(m.dev) != ncclSuccess) return 12;
  gpu::MemHandle h = 0;
  if (gpu::memImportFd(fd.get(), &h) != ncclSuccess) return 13;
  void* va = nullptr;
  if (gpu::addressReserve(&va, m.bytes, 0) != ncclSuccess || gpu::memMap(va, m.bytes, h, m.dev) != ncclSuccess)
    return 14;
  std::vector<unsigned char> host(m.bytes);
  if (gpu::memcpy(host.data(), va, m.bytes) != ncclSuccess) return 15;
  for (unsigned char c : host)
    if (c != kParentByte) return 16;
  if (gpu::memset(va, kChildByte, m.bytes) != ncclSuccess) return 17;
  if (gpu::memUnmap(va, m.bytes) != ncclSuccess || gpu::addressFree(va, m.bytes) != ncclSuccess ||
      gpu::memRelease(h) != ncclSuccess)
    return 18;
  const char done = 1;
  if (sendFds(s, nullptr, 0, &done, 1, deadlineAfterMs(30000)) != ncclSuccess) return 19;
  return 0;
}

TEST(GpuBackend, VirtualMemoryAcrossProcesses) {
  int dev = 0;
  ASSERT_EQ(gpu::getDevice(&dev), ncclSuccess);
  gpu::VmmInfo vmm{};
  if (!vmmSupported(dev, &vmm)) GTEST_SKIP() << vmm.why;
  if (!vmm.fdExport) GTEST_SKIP() << vmm.why;
  const size_t bytes = 2 * vmm.granularity;
  gpu::MemHandle h = 0;
  ASSERT_EQ(gpu::memCreate(&h, bytes, dev), ncclSuccess);
  {
    VmmView v(h, bytes, bytes, dev);
    ASSERT_EQ(v.mapped, bytes);
    ASSERT_EQ(gpu::memset(v.va, kParentByte, bytes), ncclSuccess);
    const std::string name = "uniccl-gpu-backend-vmm-" + std::to_string(getpid());
    FdSocket listener;
    ASSERT_EQ(listener.listen(name), ncclSuccess);
    const std::string arg = "--vmm-child=" + name;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      char* argv[] = {const_cast<char*>("gpu_backend_test"), const_cast<char*>(arg.c_str()), nullptr};
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    FdSocket conn;
    ASSERT_EQ(listener.accept(&conn, deadlineAfterMs(60000)), ncclSuccess);
    int fd = -1;
    ASSERT_EQ(gpu::memExportFd(h, &fd), ncclSuccess);
    const VmmChildMsg m{bytes, dev};
    ASSERT_EQ(sendFds(conn, &fd, 1, &m, sizeof(m), deadlineAfterMs(30000)), ncclSuccess);
    close(fd);
    char done = 0;
    EXPECT_EQ(recvFds(conn, nullptr, 0, &done, 1, deadlineAfterMs(60000)), ncclSuccess);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's step that failed (10..19)";
    std::vector<unsigned char> host(bytes);
    ASSERT_EQ(gpu::memcpy(host.data(), v.va, bytes), ncclSuccess);
    size_t bad = 0;
    for (unsigned char c : host) bad += c != kChildByte;
    EXPECT_EQ(bad, 0u) << "bytes the child's writes did not reach";
  }
  ASSERT_EQ(gpu::memRelease(h), ncclSuccess);
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
  if (argc > 1 && std::strncmp(argv[1], "--vmm-child=", 12) == 0) return uniccl::vmmChild(argv[1] + 12);
  int n = 0;
  if (uniccl::gpu::getDeviceCount(&n) != ncclSuccess || n == 0) {
    std::printf("SKIP: no GPU (getDeviceCount reported %d devices or failed)\n", n);
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
