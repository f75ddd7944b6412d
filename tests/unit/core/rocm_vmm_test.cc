// ROCm's virtual-memory semantics on the fake GPU (fake::setRocmVmmSemantics):
// asking the runtime for the allocation handle of memory it did not map with
// hipMemMap crashes the process there, so every core path that wonders
// whether a buffer is a VMM mapping (window registration, direct receives)
// must decide it without that call for ordinary device memory. With the
// semantics on, the fake aborts the process on such a call: these tests die
// if a path regresses. Also: the HIP backend's choice of how to pass a file
// descriptor to hipMemImportFromShareableHandle, against models of how each
// ROCm release reads it; and ROCm 6.0 / 6.1, whose virtual memory stays in
// one process (fake::setVmm(true, false)): windows with a peer in another
// process are refused with the reason, and direct receives from one fall
// back to the slots without trying an export.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "common/core/comm.h"
#include "common/core/comm_transport.h"
#include "common/core/direct_recv.h"
#include "common/memory/mem_alloc.h"
#include "common/symmetric/handle_exchange.h"
#include "fake_gpu.h"
#include "hip/vmm_abi.h"
#include "uniccl.h"

namespace uniccl {
namespace {

// How the runtimes read the handle argument (CLR's ImportShareableHSAHandle):
// ROCm 6.2 - 7.0 dereference it as an int*, 7.1 and later take the value.
int rocm62Reads(void* arg) { return *static_cast<int*>(arg); }
int rocm71Reads(void* arg) { return static_cast<int>(reinterpret_cast<uintptr_t>(arg)); }

TEST(RocmVmmAbi, ImportGetsTheDescriptorAsEachRuntimeReadsIt) {
  for (int version : {60200000, 60201000, 60400000, 60403000, 70000000, 70002000}) {
    int fd = 37;
    EXPECT_EQ(rocm62Reads(hipabi::shareableFdArgument(version, &fd)), 37) << version;
  }
  for (int version : {70100000, 70101000, 70200000, 80000000}) {
    int fd = 37;
    EXPECT_EQ(rocm71Reads(hipabi::shareableFdArgument(version, &fd)), 37) << version;
  }
}

TEST(RocmVmmFake, RetainOutsideAMappingAborts) {
  fake::reset();
  fake::setRocmVmmSemantics(true);
  EXPECT_FALSE(gpu::memRetainAnyAddress());
  void* p = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&p, 4096), ncclSuccess);
  gpu::MemHandle h{};
  void* base = nullptr;
  size_t bytes = 0;
  EXPECT_DEATH((void)gpu::memRetainFromAddress(p, &h, &base, &bytes), "outside every VMM mapping");
  fake::reset();
  EXPECT_TRUE(gpu::memRetainAnyAddress());   // CUDA's answer by default
}

class RocmVmm : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setDeviceCount(2);
    fake::setAutoComplete(true);
    fake::setRocmVmmSemantics(true);
  }
  void TearDown() override {
    EXPECT_EQ(memAllocLive(), 0u);
    fake::reset();
  }
};

TEST_F(RocmVmm, MemRetainMappingAsksOnlyAboutOwnMappings) {
  void* plain = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&plain, 1 << 20), ncclSuccess);
  void* vmm = nullptr;
  ASSERT_EQ(ncclMemAlloc(&vmm, 1 << 20), ncclSuccess);
  gpu::MemHandle h{};
  void* base = nullptr;
  size_t bytes = 0;
  EXPECT_EQ(memRetainMapping(plain, &h, &base, &bytes), ncclInvalidArgument);
  EXPECT_EQ(memRetainMapping(static_cast<char*>(plain) + 100, &h, &base, &bytes), ncclInvalidArgument);
  ASSERT_EQ(memRetainMapping(static_cast<char*>(vmm) + 100, &h, &base, &bytes), ncclSuccess);
  EXPECT_EQ(base, vmm);
  EXPECT_GE(bytes, size_t(1) << 20);
  EXPECT_EQ(gpu::memRelease(h), ncclSuccess);
  EXPECT_EQ(ncclMemFree(vmm), ncclSuccess);
  EXPECT_EQ(gpu::deviceFree(plain), ncclSuccess);
  // Without VMM, ncclMemAlloc's memory is plain too: never asked about.
  fake::setVmm(false);
  ASSERT_EQ(ncclMemAlloc(&vmm, 4096), ncclSuccess);
  EXPECT_EQ(memRetainMapping(vmm, &h, &base, &bytes), ncclInvalidArgument);
  EXPECT_EQ(ncclMemFree(vmm), ncclSuccess);
}

// Runs fn(rank) on two threads: window registration is collective.
template <typename F>
void onBoth(F fn) {
  std::thread t([&] { fn(1); });
  fn(0);
  t.join();
}

TEST_F(RocmVmm, WindowOnOrdinaryMemoryIsRefusedWithoutACrash) {
  ncclComm_t comms[2] = {nullptr, nullptr};
  const int devs[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
  void* plain[2] = {nullptr, nullptr};
  void* vmm[2] = {nullptr, nullptr};
  ncclResult_t res[2] = {ncclSuccess, ncclSuccess};
  ncclWindow_t win[2] = {nullptr, nullptr};
  onBoth([&](int r) {
    EXPECT_EQ(gpu::setDevice(r), ncclSuccess);
    EXPECT_EQ(gpu::deviceAlloc(&plain[r], 1 << 20), ncclSuccess);
    res[r] = ncclCommWindowRegister(comms[r], plain[r], 1 << 20, &win[r], NCCL_WIN_DEFAULT);
  });
  for (int r = 0; r < 2; r++) EXPECT_EQ(res[r], ncclInvalidArgument) << r;
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclMemAlloc"), std::string::npos)
      << ncclGetLastError(nullptr);
  // ncclMemAlloc's memory registers as before.
  onBoth([&](int r) {
    EXPECT_EQ(gpu::setDevice(r), ncclSuccess);
    ncclMemAlloc(&vmm[r], 1 << 20);
    res[r] = ncclCommWindowRegister(comms[r], vmm[r], 1 << 20, &win[r], NCCL_WIN_DEFAULT);
  });
  for (int r = 0; r < 2; r++) ASSERT_EQ(res[r], ncclSuccess) << r << ": " << ncclGetLastError(nullptr);
  onBoth([&](int r) { res[r] = ncclCommWindowDeregister(comms[r], win[r]); });
  for (int r = 0; r < 2; r++) EXPECT_EQ(res[r], ncclSuccess) << r;
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(ncclMemFree(vmm[r]), ncclSuccess);
    EXPECT_EQ(gpu::deviceFree(plain[r]), ncclSuccess);
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// A registered hipMalloc-style buffer as a direct-receive target (PyTorch's
// allocator hook registers its segments): the path decides the memory is
// ordinary without asking the runtime.
TEST_F(RocmVmm, DirectReceiveIntoOrdinaryMemoryAsksNothing) {
  ncclComm_t comms[2] = {nullptr, nullptr};
  const int devs[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
  if (transportBetween(comms[0], 0, 1) != TransportKind::P2p)
    GTEST_SKIP() << "the fake's two GPUs are not connected over P2P";
  const size_t bytes = size_t(64) << 20;
  void* buf = nullptr;
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  ASSERT_EQ(gpu::deviceAlloc(&buf, bytes), ncclSuccess);
  void* handle = nullptr;
  ASSERT_EQ(ncclCommRegister(comms[0], buf, bytes, &handle), ncclSuccess);
  const uint64_t before = fake::callCount("memRetainFromAddress");
  // Same process: the peer's GPU stores at this address (peer access).
  EXPECT_EQ(directRecvTarget(comms[0], 1, buf, bytes), reinterpret_cast<uintptr_t>(buf));
  EXPECT_EQ(fake::callCount("memRetainFromAddress"), before);
  EXPECT_EQ(ncclCommDeregister(comms[0], handle), ncclSuccess);
  EXPECT_EQ(gpu::deviceFree(buf), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// ROCm 6.0 / 6.1: a window whose LSA peer is in another process cannot get
// that peer's allocation (no fd export). Both ranks refuse before any
// exchange, with the reason; a peer in this process still works (its handle
// is used as it is).
TEST_F(RocmVmm, Rocm60WindowWithAPeerInAnotherProcessIsRefused) {
  fake::setVmm(true, /*fdExport=*/false);
  gpu::VmmInfo vmm{};
  ASSERT_EQ(gpu::vmmQuery(0, &vmm), ncclSuccess);
  ASSERT_FALSE(vmm.fdExport);
  for (int rank = 0; rank < 2; rank++) {
    WindowComm comm;   // hand-built: no bootstrap, which a refusal must not need
    comm.rank = rank;
    comm.nRanks = 2;
    comm.gpuDev = rank;
    comm.processHash = {100, 101};   // two processes
    comm.lsa = LsaPlace{2, rank};
    std::vector<WindowAnnounce> all(2);
    for (int r = 0; r < 2; r++) {
      all[r].fdExport = vmm.fdExport ? 1 : 0;
      all[r].handle = 7 + r;
    }
    std::vector<gpu::MemHandle> handles;
    std::vector<bool> imported;
    const uint64_t exports = fake::callCount("memExportFd");
    EXPECT_EQ(peerHandles(comm, all, 0, &handles, &imported), ncclInvalidUsage) << rank;
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("file descriptor"), std::string::npos)
        << ncclGetLastError(nullptr);
    EXPECT_EQ(fake::callCount("memExportFd"), exports);
    for (bool i : imported) EXPECT_FALSE(i);
    // The same ranks in one process: the handles as they are.
    comm.processHash[1 - rank] = comm.processHash[rank];
    ASSERT_EQ(peerHandles(comm, all, 1, &handles, &imported), ncclSuccess) << rank;
    EXPECT_EQ(handles[1 - rank], all[1 - rank].handle);
  }
}

// ROCm 6.0 / 6.1: a receive from a peer of another process into a
// registered ncclMemAlloc buffer goes through the slots; no export is tried
// (it could only fail) and nothing is asked about the memory.
TEST_F(RocmVmm, Rocm60DirectReceiveFromAnotherProcessUsesTheSlots) {
  fake::setVmm(true, /*fdExport=*/false);
  ncclComm_t comms[2] = {nullptr, nullptr};
  const int devs[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
  if (transportBetween(comms[0], 0, 1) != TransportKind::P2p)
    GTEST_SKIP() << "the fake's two GPUs are not connected over P2P";
  const size_t bytes = size_t(64) << 20;
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  void* buf = nullptr;
  ASSERT_EQ(ncclMemAlloc(&buf, bytes), ncclSuccess);
  void* handle = nullptr;
  ASSERT_EQ(ncclCommRegister(comms[0], buf, bytes, &handle), ncclSuccess);
  // Same process: the peer stores at this address.
  EXPECT_EQ(directRecvTarget(comms[0], 1, buf, bytes), reinterpret_cast<uintptr_t>(buf));
  // The peer in another process: slots.
  const uint64_t savedHash = comms[0]->peers[1].processHash;
  comms[0]->peers[1].processHash = savedHash + 1;
  const uint64_t exports = fake::callCount("memExportFd");
  EXPECT_EQ(directRecvTarget(comms[0], 1, buf, bytes), 0u);
  EXPECT_EQ(directRecvTarget(comms[0], 1, buf, bytes), 0u);   // decided once, then remembered
  EXPECT_EQ(fake::callCount("memExportFd"), exports);
  comms[0]->peers[1].processHash = savedHash;
  EXPECT_EQ(ncclCommDeregister(comms[0], handle), ncclSuccess);
  EXPECT_EQ(ncclMemFree(buf), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
}  // namespace uniccl
