// ncclMemAlloc / ncclMemFree (memory/mem_alloc.h) on the fake GPU, whose
// virtual memory is real host memory: granularity-backed allocations, a
// second mapping of one allocation through an exported fd, retain from an
// interior pointer, refusals, the fallback without VMM, failures that undo
// everything, no leaks over 1000 cycles, and threads (also under TSan).
#include "common/memory/mem_alloc.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

constexpr size_t kGranule = size_t(64) << 10;   // the fake's default granularity

int openFds() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

class MemAlloc : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setDeviceCount(2);
    fds_ = openFds();
  }
  void TearDown() override {
    EXPECT_EQ(memAllocLive(), 0u);
    const fake::Live l = fake::live();
    EXPECT_EQ(l.physAllocs, 0u);
    EXPECT_EQ(l.mappings, 0u);
    EXPECT_EQ(l.reservations, 0u);
    EXPECT_EQ(l.deviceAllocs, 0u);
    EXPECT_EQ(openFds(), fds_);
    fake::reset();
  }
  int fds_ = 0;
};

TEST_F(MemAlloc, VmmAllocationsAreWholeGranulesMappedForTheCurrentDevice) {
  ASSERT_EQ(gpu::setDevice(1), ncclSuccess);
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 1000), ncclSuccess);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kGranule, 0u);
  EXPECT_EQ(fake::callCount("memCreate"), 1u);
  EXPECT_EQ(fake::callCount("deviceAlloc"), 0u);
  EXPECT_EQ(fake::callCount("memSetAccess"), 1u);   // GPU 0, a peer of GPU 1, may use it too
  fake::Live l = fake::live();
  EXPECT_EQ(l.physAllocs, 1u);
  EXPECT_EQ(l.mappings, 1u);
  EXPECT_EQ(l.reservations, 1u);
  gpu::PointerInfo info;
  ASSERT_EQ(gpu::pointerGetInfo(static_cast<char*>(p) + 999, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Device);
  EXPECT_EQ(info.device, 1);
  void* base = nullptr;
  size_t size = 0;
  ASSERT_EQ(gpu::memGetAddressRange(static_cast<char*>(p) + 5000, &base, &size), ncclSuccess);
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, kGranule);   // the whole granule is there
  std::memset(p, 0x77, kGranule);
  MemAllocInfo found{};
  ASSERT_TRUE(memAllocFind(static_cast<char*>(p) + 4096, &found));
  EXPECT_EQ(found.base, p);
  EXPECT_EQ(found.bytes, kGranule);
  EXPECT_TRUE(found.vmm);
  EXPECT_EQ(found.device, 1);
  EXPECT_FALSE(memAllocFind(static_cast<char*>(p) + kGranule, &found));
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);

  // A size of several granules rounds up; a 2 MiB granularity as on the GPUs.
  fake::setVmm(true, true, size_t(2) << 20);
  ASSERT_EQ(ncclMemAlloc(&p, (size_t(3) << 20) + 1), ncclSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20), 0u);
  ASSERT_EQ(gpu::memGetAddressRange(p, &base, &size), ncclSuccess);
  EXPECT_EQ(size, size_t(4) << 20);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  // No peer reaches GPU 1: access for it alone.
  fake::setPeerAccess(false);
  const uint64_t grants = fake::callCount("memSetAccess");
  ASSERT_EQ(ncclMemAlloc(&p, 1), ncclSuccess);
  EXPECT_EQ(fake::callCount("memSetAccess"), grants);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  fake::setPeerAccess(true);
  // A granularity below NCCL_WIN_REQUIRED_ALIGNMENT: still 4096-aligned.
  fake::setVmm(true, true, 1024);
  ASSERT_EQ(ncclMemAlloc(&p, 100), ncclSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % NCCL_WIN_REQUIRED_ALIGNMENT, 0u);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
}

// What a symmetric window does with a buffer: retain its handle from an
// interior pointer, export it, import it and map it a second time.
TEST_F(MemAlloc, TwoMappingsOfOneHandleShowTheSameBytes) {
  void* p = nullptr;
  const size_t bytes = 2 * kGranule;
  ASSERT_EQ(ncclMemAlloc(&p, bytes - 100), ncclSuccess);
  gpu::MemHandle h = 0;
  void* mapBase = nullptr;
  size_t mapBytes = 0;
  ASSERT_EQ(gpu::memRetainFromAddress(static_cast<char*>(p) + kGranule + 3, &h, &mapBase, &mapBytes), ncclSuccess);
  EXPECT_EQ(mapBase, p);
  EXPECT_EQ(mapBytes, bytes);
  int fd = -1;
  ASSERT_EQ(gpu::memExportFd(h, &fd), ncclSuccess);
  gpu::MemHandle imported = 0;
  ASSERT_EQ(gpu::memImportFd(fd, &imported), ncclSuccess);
  ASSERT_EQ(close(fd), 0);
  void* va = nullptr;
  ASSERT_EQ(gpu::addressReserve(&va, bytes, 0), ncclSuccess);
  ASSERT_NE(va, p);
  ASSERT_EQ(gpu::memMap(va, bytes, imported, 0), ncclSuccess);
  for (size_t i = 0; i < bytes; i += 97) static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(i / 97);
  for (size_t i = 0; i < bytes; i += 97)
    ASSERT_EQ(static_cast<unsigned char*>(va)[i], static_cast<unsigned char>(i / 97)) << i;
  static_cast<unsigned char*>(va)[1] = 0xee;
  EXPECT_EQ(static_cast<unsigned char*>(p)[1], 0xee);
  // The second mapping is no ncclMemAlloc buffer.
  EXPECT_EQ(ncclMemFree(va), ncclInvalidArgument);
  ASSERT_EQ(gpu::memUnmap(va, bytes), ncclSuccess);
  ASSERT_EQ(gpu::addressFree(va, bytes), ncclSuccess);
  ASSERT_EQ(gpu::memRelease(imported), ncclSuccess);
  ASSERT_EQ(gpu::memRelease(h), ncclSuccess);
  EXPECT_EQ(fake::live().physAllocs, 1u);   // the allocation's own reference remains
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
}

TEST_F(MemAlloc, FreeRefusesInteriorForeignAndRepeatedPointers) {
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 3 * kGranule), ncclSuccess);
  EXPECT_EQ(ncclMemFree(static_cast<char*>(p) + 16), ncclInvalidArgument);
  EXPECT_EQ(ncclMemFree(static_cast<char*>(p) + 2 * kGranule), ncclInvalidArgument);
  void* d = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&d, 4096), ncclSuccess);
  EXPECT_EQ(ncclMemFree(d), ncclInvalidArgument);   // device memory, but not ncclMemAlloc's
  int host = 0;
  EXPECT_EQ(ncclMemFree(&host), ncclInvalidArgument);
  EXPECT_EQ(fake::live().deviceAllocs, 1u);   // nothing was freed
  EXPECT_EQ(fake::live().mappings, 1u);
  ASSERT_EQ(gpu::deviceFree(d), ncclSuccess);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  EXPECT_EQ(ncclMemFree(p), ncclInvalidArgument);   // twice
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);
  void* zero = &zero;
  EXPECT_EQ(ncclMemAlloc(&zero, 0), ncclSuccess);
  EXPECT_EQ(zero, nullptr);
  EXPECT_EQ(ncclMemAlloc(nullptr, 64), ncclInvalidArgument);
}

TEST_F(MemAlloc, WithoutVmmPlainDeviceMemory) {
  fake::setVmm(false);
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 1000), ncclSuccess);
  EXPECT_EQ(fake::callCount("memCreate"), 0u);
  EXPECT_EQ(fake::live().deviceAllocs, 1u);
  EXPECT_EQ(fake::live().physAllocs, 0u);
  MemAllocInfo found{};
  ASSERT_TRUE(memAllocFind(p, &found));
  EXPECT_FALSE(found.vmm);
  EXPECT_EQ(found.bytes, 1000u);
  EXPECT_EQ(ncclMemFree(static_cast<char*>(p) + 8), ncclInvalidArgument);
  gpu::MemHandle h = 0;
  void* mapBase = nullptr;
  size_t mapBytes = 0;
  EXPECT_EQ(gpu::memRetainFromAddress(p, &h, &mapBase, &mapBytes), ncclInvalidArgument);   // no VMM mapping
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  EXPECT_EQ(ncclMemFree(p), ncclInvalidArgument);
}

TEST_F(MemAlloc, AFailedStepUndoesTheOthers) {
  for (const char* call : {"memCreate", "addressReserve", "memMap", "memSetAccess", "canAccessPeer", "vmmQuery",
                           "getDevice"}) {
    fake::failNext(call, ncclUnhandledCudaError);
    void* p = &p;
    EXPECT_EQ(ncclMemAlloc(&p, 5000), ncclUnhandledCudaError) << call;
    EXPECT_EQ(p, &p) << call;   // untouched
    const fake::Live l = fake::live();
    EXPECT_EQ(l.physAllocs, 0u) << call;
    EXPECT_EQ(l.reservations, 0u) << call;
    EXPECT_EQ(l.mappings, 0u) << call;
  }
  EXPECT_EQ(memAllocLive(), 0u);
  // A failing free still tries every step and reports the first failure.
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 5000), ncclSuccess);
  const uint64_t frees = fake::callCount("addressFree"), releases = fake::callCount("memRelease");
  fake::failNext("memUnmap", ncclUnhandledCudaError);
  EXPECT_EQ(ncclMemFree(p), ncclUnhandledCudaError);
  EXPECT_EQ(fake::callCount("addressFree"), frees + 1);   // tried (and refused: still mapped)
  EXPECT_EQ(fake::callCount("memRelease"), releases + 1);
  EXPECT_EQ(memAllocLive(), 0u);   // forgotten: a second free is refused, never done twice
  EXPECT_EQ(ncclMemFree(p), ncclInvalidArgument);
  // What the failed free left behind, cleaned up by hand for the leak checks.
  ASSERT_EQ(gpu::memUnmap(p, kGranule), ncclSuccess);
  ASSERT_EQ(gpu::addressFree(p, kGranule), ncclSuccess);
}

TEST_F(MemAlloc, ThousandCyclesLeakNothing) {
  for (int i = 0; i < 1000; ++i) {
    void* p = nullptr;
    const size_t bytes = 1 + (size_t(i) * 7919) % (3 * kGranule);
    ASSERT_EQ(ncclMemAlloc(&p, bytes), ncclSuccess);
    static_cast<unsigned char*>(p)[bytes - 1] = 1;
    ASSERT_EQ(ncclMemFree(p), ncclSuccess);
  }
  EXPECT_EQ(fake::callCount("memCreate"), 1000u);
  EXPECT_EQ(fake::callCount("memRelease"), 1000u);
}

// Threads allocating and freeing at once, and two threads freeing the same
// buffer: exactly one succeeds.
TEST_F(MemAlloc, Threads) {
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      std::vector<void*> mine;
      for (int i = 0; i < 100; ++i) {
        void* p = nullptr;
        if (ncclMemAlloc(&p, 1000 + t * 100 + i) != ncclSuccess) failures.fetch_add(1);
        else mine.push_back(p);
        if (i % 3 == 2) {
          if (ncclMemFree(mine.front()) != ncclSuccess) failures.fetch_add(1);
          mine.erase(mine.begin());
        }
      }
      for (void* p : mine)
        if (ncclMemFree(p) != ncclSuccess) failures.fetch_add(1);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int round = 0; round < 20; ++round) {
    void* p = nullptr;
    ASSERT_EQ(ncclMemAlloc(&p, 100), ncclSuccess);
    std::atomic<int> ok{0};
    std::thread a([&] { ok += ncclMemFree(p) == ncclSuccess; });
    std::thread b([&] { ok += ncclMemFree(p) == ncclSuccess; });
    a.join();
    b.join();
    EXPECT_EQ(ok.load(), 1);
  }
}

}  // namespace
}  // namespace uniccl
