// Every buffer another device or the host spins on while kernels run comes
// from memory the backend marks as polled (gpu::deviceAllocPolled or
// gpu::hostAllocMapped): on HIP, plain device memory is coarse-grained and a
// peer's polling loads may never see what sits in this GPU's L2. Two real
// communicators (ncclCommInitAll) on the fake GPU, P2P between two devices
// and, separately, NET (host-mapped conn FIFOs and staging): each pointer
// the kernels poll is checked against the fake's allocation records.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/core/comm.h"
#include "device/dev_types.h"
#include "fake_gpu.h"
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
      expectPolled(q.recv.remoteHead, "the peer's head", comm->rank, c, p);
      expectPolled(q.send.fifo, "the send conn FIFO", comm->rank, c, p);
      expectPolled(q.recv.fifo, "the receive conn FIFO", comm->rank, c, p);
      if (expectP2p) EXPECT_EQ(q.send.fifo, nullptr);
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

INSTANTIATE_TEST_SUITE_P(Transports, PolledMemory, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "P2P" : "NET"; });

}  // namespace
}  // namespace uniccl
