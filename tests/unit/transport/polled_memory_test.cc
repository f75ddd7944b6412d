// Every buffer another device or the host spins on while kernels run comes
// from memory the backend marks as polled (gpu::deviceAllocPolled or
// gpu::hostAllocMapped): on HIP, plain device memory is coarse-grained and a
// peer's polling loads may never see what sits in this GPU's L2. Two real
// communicators (ncclCommInitAll) on the fake GPU, P2P between two devices
// and, separately, NET (host-mapped conn FIFOs and staging): each pointer
// the kernels poll is checked against the fake's allocation records. Then,
// over P2P, what symmetric windows and device communicators add: the
// symmetric collectives' barrier and the Device API's resources (LSA
// barriers, LL all-to-all lines), each peer's mapping of them; and where no
// polled virtual memory exists (HIP before ROCm 7.2) both are refused, never
// placed in ordinary memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/core/comm.h"
#include "common/symmetric/symmetric.h"
#include "device/dev_types.h"
#include "fake_gpu.h"
#include "nccl_device.h"
#include "uniccl.h"

namespace uniccl {
namespace {

void expectPolled(const void* p, const char* what, int rank, int c, int peer) {
  if (p == nullptr) return;   // that direction/protocol is not wired
  EXPECT_TRUE(fake::isPolledMemory(p)) << what << " of rank " << rank << ", channel " << c << ", peer " << peer
                                       << " is not polled memory";
}

void checkComm(ncclComm* comm, bool expectP2p) {
  // Host-mapped words the kernels and the host poll.
  expectPolled(comm->abortFlagDev, "the abort flag", comm->rank, -1, -1);
  int wired = 0;
  for (int c = 0; c < comm->nChannels; c++) {
    // The fake's device memory is host memory: the channel's peers can be read directly.
    const dev::Peer* peers = comm->channelsHost[c].peers;
    ASSERT_NE(peers, nullptr);
    for (int p = 0; p < comm->nRanks; p++) {
      const dev::Peer& q = peers[p];
      if (!q.connected) continue;
      wired++;
      for (int proto = 0; proto < dev::kNumProtos; proto++) {
        expectPolled(q.send.buffs[proto], "a send slot buffer", comm->rank, c, p);
        expectPolled(q.recv.buffs[proto], "a receive slot buffer", comm->rank, c, p);
      }
      expectPolled(q.send.remoteTail, "the peer's tail", comm->rank, c, p);
      expectPolled(q.send.head, "the send head", comm->rank, c, p);
      expectPolled(q.recv.tail, "the receive tail", comm->rank, c, p);
      // Direct-receive marks: words 8 .. 8 + kSteps of the tail's line (device/prims.h, directMark).
      if (q.recv.tail != nullptr)
        expectPolled(q.recv.tail + 8 + dev::kSteps - 1, "the last direct-receive mark", comm->rank, c, p);
      if (q.send.remoteTail != nullptr)
        expectPolled(q.send.remoteTail + 8 + dev::kSteps - 1, "the peer's last direct-receive mark", comm->rank, c,
                     p);
      expectPolled(q.recv.remoteHead, "the peer's head", comm->rank, c, p);
      expectPolled(q.send.fifo, "the send conn FIFO", comm->rank, c, p);
      expectPolled(q.recv.fifo, "the receive conn FIFO", comm->rank, c, p);
      if (expectP2p) {
        EXPECT_EQ(q.send.fifo, nullptr);
      }
    }
  }
  EXPECT_GT(wired, 0) << "rank " << comm->rank << " wired no connection";
}

class PolledMemory : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setDeviceCount(2);
    fake::setAutoComplete(true);
    if (!GetParam()) {
      setenv("NCCL_P2P_DISABLE", "1", 1);
      setenv("NCCL_SHM_DISABLE", "1", 1);
      setenv("NCCL_SOCKET_IFNAME", "lo", 1);
      setenv("NCCL_IB_DISABLE", "1", 1);
    }
  }
  void TearDown() override {
    unsetenv("NCCL_P2P_DISABLE");
    unsetenv("NCCL_SHM_DISABLE");
    fake::reset();
  }
};

TEST_P(PolledMemory, EveryPolledBufferIsPolledMemory) {
  ncclComm_t comms[2] = {nullptr, nullptr};
  const int devs[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
  for (ncclComm_t c : comms) checkComm(c, GetParam());
  if (GetParam()) {
    EXPECT_GT(fake::callCount("deviceAllocPolled"), 0u);
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// Runs fn(rank) for both ranks at once: window registration and device
// communicators are collective.
template <typename F>
void onBoth(F fn) {
  std::thread t([&] { fn(1); });
  fn(0);
  t.join();
}

// Every peer's mapping of an internal window (first and last byte).
void expectWindowPolled(const SymWindow* w, const char* what, int rank) {
  ASSERT_NE(w, nullptr) << what << " of rank " << rank;
  EXPECT_FALSE(w->mappings.empty()) << what;
  for (size_t p = 0; p < w->mappings.size(); p++) {
    const char* va = static_cast<const char*>(w->mappings[p].va);
    expectPolled(va, what, rank, -1, (int)p);
    expectPolled(va + w->mappings[p].bytes - 1, what, rank, -1, (int)p);
  }
}

// Windows need P2P (an LSA team): two GPUs that reach each other.
class PolledWindows : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setDeviceCount(2);
    fake::setAutoComplete(true);
  }
  void TearDown() override { fake::reset(); }
};

TEST_F(PolledWindows, SymmetricBarrierAndDeviceApiResourcesArePolledMemory) {
  ncclComm_t comms[2] = {nullptr, nullptr};
  const int devs[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
  void* buf[2] = {nullptr, nullptr};
  ncclWindow_t win[2] = {nullptr, nullptr};
  ncclDevComm_t dc[2];
  ncclResult_t res[2] = {ncclSuccess, ncclSuccess}, res2[2] = {ncclSuccess, ncclSuccess};
  onBoth([&](int r) {
    EXPECT_EQ(gpu::setDevice(r), ncclSuccess);
    ncclMemAlloc(&buf[r], 1 << 20);
    res[r] = ncclCommWindowRegister(comms[r], buf[r], 1 << 20, &win[r], NCCL_WIN_COLL_SYMMETRIC);
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 4;
    reqs.lsaLLA2ABlockCount = 2;
    reqs.lsaLLA2ASlotCount = 16;
    res2[r] = ncclDevCommCreate(comms[r], &reqs, &dc[r]);
  });
  for (int r = 0; r < 2; r++) {
    ASSERT_EQ(res[r], ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(res2[r], ncclSuccess) << ncclGetLastError(nullptr);
    SymmetricState* s = comms[r]->symmetric;
    ASSERT_NE(s, nullptr);
    expectWindowPolled(s->collBarrier, "the symmetric collectives' barrier", r);
    ASSERT_EQ(s->devComms.size(), 1u);
    expectWindowPolled(s->devComms[0].window, "the device communicator's resources", r);
  }
  onBoth([&](int r) {
    res[r] = ncclDevCommDestroy(comms[r], &dc[r]);
    res2[r] = ncclCommWindowDeregister(comms[r], win[r]);
  });
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(res[r], ncclSuccess);
    EXPECT_EQ(res2[r], ncclSuccess);
    EXPECT_EQ(ncclMemFree(buf[r]), ncclSuccess);
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// Without polled virtual memory (HIP before ROCm 7.2) the barrier and the
// resources are refused, never placed in ordinary memory: the window still
// registers (its collectives use the ring and tree kernels) and
// ncclDevCommCreate fails on both ranks with a message.
TEST_F(PolledWindows, WithoutPolledVirtualMemoryNothingPolledIsOrdinary) {
  fake::setVmmPolled(false);
  ncclComm_t comms[2] = {nullptr, nullptr};
  const int devs[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
  void* buf[2] = {nullptr, nullptr};
  ncclWindow_t win[2] = {nullptr, nullptr};
  ncclDevComm_t dc[2];
  ncclResult_t res[2] = {ncclSuccess, ncclSuccess}, res2[2] = {ncclSuccess, ncclSuccess};
  onBoth([&](int r) {
    EXPECT_EQ(gpu::setDevice(r), ncclSuccess);
    ncclMemAlloc(&buf[r], 1 << 20);
    res[r] = ncclCommWindowRegister(comms[r], buf[r], 1 << 20, &win[r], NCCL_WIN_COLL_SYMMETRIC);
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 1;
    res2[r] = ncclDevCommCreate(comms[r], &reqs, &dc[r]);
  });
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(res[r], ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(res2[r], ncclInvalidUsage);
    EXPECT_EQ(comms[r]->symmetric->collBarrier, nullptr);
    EXPECT_TRUE(comms[r]->symmetric->devComms.empty());
  }
  EXPECT_NE(std::strstr(ncclGetLastError(nullptr), "poll"), nullptr) << ncclGetLastError(nullptr);
  onBoth([&](int r) { res[r] = ncclCommWindowDeregister(comms[r], win[r]); });
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(res[r], ncclSuccess);
    EXPECT_EQ(ncclMemFree(buf[r]), ncclSuccess);
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Transports, PolledMemory, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "P2P" : "NET"; });

}  // namespace
}  // namespace uniccl
