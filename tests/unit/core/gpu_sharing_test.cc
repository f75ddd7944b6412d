// Several ranks on one GPU (core/gpu_sharing.h): the verdict every rank
// takes from the allgathered peer info (opt-in, virtual ids, processes and
// MPS, work queues, resident blocks), the sharing fields a rank fills from
// its GPU, and the channel count the verdict caps.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/core/comm.h"
#include "common/core/gpu_sharing.h"
#include "common/core/tuning.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

// A rank on host `host`, process `process`, GPU `bus` that accepts `limit`
// ranks per GPU, with `resident` blocks and `queues` work queues.
PeerInfo peer(uint64_t host, uint64_t process, int bus, int limit = 1, int resident = 264, int queues = 8,
              int virtualId = -1, bool mps = false) {
  PeerInfo p{};
  p.hostHash = host;
  p.processHash = process;
  p.busIdNum = bus;
  snprintf(p.busId, sizeof(p.busId), "0000:%02x:00.0", bus);
  p.smCount = 132;
  p.residentBlocks = resident;
  p.shareLimit = limit;
  p.virtualId = virtualId;
  p.workQueues = queues;
  p.processesShare = mps ? 1 : 0;
  return p;
}

std::string lastError() { return ncclGetLastError(nullptr); }

ncclResult_t verdict(const std::vector<PeerInfo>& peers, GpuSharing* out) { return checkGpuSharing(peers, 0, out); }

TEST(GpuSharing, OneGpuPerRankIsNotSharedAndFitsTheSmallestGpu) {
  GpuSharing v;
  ASSERT_EQ(verdict({peer(1, 10, 1, 1, 264), peer(1, 10, 2, 1, 132), peer(2, 20, 1, 1, 300)}, &v), ncclSuccess);
  EXPECT_FALSE(v.shared);
  EXPECT_EQ(v.maxChannels, 132);   // hosts differ: bus 1 on host 2 is another GPU
}

TEST(GpuSharing, DuplicatesWithoutOptInAreRefused) {
  GpuSharing v;
  EXPECT_EQ(verdict({peer(1, 10, 1), peer(1, 10, 1)}, &v), ncclInvalidUsage);
  EXPECT_NE(lastError().find("Duplicate GPU detected"), std::string::npos) << lastError();
  // One rank opting in is not enough: every rank of the GPU must.
  EXPECT_EQ(verdict({peer(1, 10, 1, 2), peer(1, 10, 1, 1)}, &v), ncclInvalidUsage);
  EXPECT_NE(lastError().find("UNICCL_RANKS_PER_GPU=2"), std::string::npos) << lastError();
}

TEST(GpuSharing, TheLimitCountsTheRanksOfTheGpu) {
  GpuSharing v;
  std::vector<PeerInfo> three(3, peer(1, 10, 1, 2, 264));
  EXPECT_EQ(verdict(three, &v), ncclInvalidUsage);
  for (PeerInfo& p : three) p.shareLimit = 3;
  ASSERT_EQ(verdict(three, &v), ncclSuccess);
  EXPECT_TRUE(v.shared);
  EXPECT_EQ(v.maxChannels, 88);   // 264 / 3
}

TEST(GpuSharing, ChannelsFitEveryGpuOfTheCommunicator) {
  // GPU 1: 4 ranks of 264 blocks -> 66 each; GPU 2: 2 ranks of 100 -> 50 each.
  std::vector<PeerInfo> peers;
  for (int i = 0; i < 4; i++) peers.push_back(peer(1, 10, 1, 4, 264));
  for (int i = 0; i < 2; i++) peers.push_back(peer(1, 10, 2, 4, 100));
  GpuSharing v;
  ASSERT_EQ(verdict(peers, &v), ncclSuccess);
  EXPECT_EQ(v.maxChannels, 50);
}

TEST(GpuSharing, NotEvenOneChannelPerRankIsRefused) {
  std::vector<PeerInfo> peers(4, peer(1, 10, 1, 8, 3));
  GpuSharing v;
  EXPECT_EQ(verdict(peers, &v), ncclInvalidUsage);
  EXPECT_NE(lastError().find("fit only 3 block(s)"), std::string::npos) << lastError();
  peers.resize(3);
  ASSERT_EQ(verdict(peers, &v), ncclSuccess);
  EXPECT_EQ(v.maxChannels, 1);
}

TEST(GpuSharing, VirtualIdsRepeatingOnOneGpuAreRefused) {
  GpuSharing v;
  EXPECT_EQ(verdict({peer(1, 10, 1, INT_MAX, 264, 8, 0), peer(1, 10, 1, INT_MAX, 264, 8, 0)}, &v), ncclInvalidUsage);
  EXPECT_NE(lastError().find("same virtualId 0"), std::string::npos) << lastError();
  EXPECT_EQ(verdict({peer(1, 10, 1, INT_MAX, 264, 8, 0), peer(1, 10, 1, INT_MAX, 264, 8, 1)}, &v), ncclSuccess);
  // The same id on different GPUs is fine.
  EXPECT_EQ(verdict({peer(1, 10, 1, INT_MAX, 264, 8, 0), peer(1, 10, 2, INT_MAX, 264, 8, 0)}, &v), ncclSuccess);
}

TEST(GpuSharing, SeveralProcessesOnOneGpuNeedMps) {
  GpuSharing v;
  EXPECT_EQ(verdict({peer(1, 10, 1, 2), peer(1, 11, 1, 2)}, &v), ncclInvalidUsage);
  EXPECT_NE(lastError().find("MPS"), std::string::npos) << lastError();
  // Every rank's process must see the server.
  EXPECT_EQ(verdict({peer(1, 10, 1, 2, 264, 8, -1, true), peer(1, 11, 1, 2, 264, 8, -1, false)}, &v),
            ncclInvalidUsage);
  EXPECT_EQ(verdict({peer(1, 10, 1, 2, 264, 8, -1, true), peer(1, 11, 1, 2, 264, 8, -1, true)}, &v), ncclSuccess);
}

TEST(GpuSharing, RanksOfOneProcessMayNotOutnumberItsWorkQueues) {
  std::vector<PeerInfo> peers(4, peer(1, 10, 1, 4, 264, 3));
  GpuSharing v;
  EXPECT_EQ(verdict(peers, &v), ncclInvalidUsage);
  EXPECT_NE(lastError().find("CUDA_DEVICE_MAX_CONNECTIONS"), std::string::npos) << lastError();
  for (PeerInfo& p : peers) p.workQueues = 4;
  EXPECT_EQ(verdict(peers, &v), ncclSuccess);
  // With MPS, the queues count per process: 2 + 2 ranks fit 3 queues each.
  for (int i = 0; i < 4; i++) peers[i] = peer(1, 10 + i / 2, 1, 4, 264, 3, -1, true);
  EXPECT_EQ(verdict(peers, &v), ncclSuccess);
}

class SharingInfo : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
  void TearDown() override {
    unsetenv("UNICCL_RANKS_PER_GPU");
    fake::reset();
  }
  int kernelA = 0, kernelB = 0;
  std::vector<const void*> kernels{&kernelA, &kernelB};
};

TEST_F(SharingInfo, FilledFromTheBackendAndTheSwitch) {
  fake::setResidentBlocks(40);
  fake::setWorkQueues(16);
  PeerInfo p{};
  ASSERT_EQ(fillSharingInfo(kernels, 512, -1, &p), ncclSuccess);
  EXPECT_EQ(p.residentBlocks, 40);
  EXPECT_EQ(p.shareLimit, 1);
  EXPECT_EQ(p.virtualId, -1);
  EXPECT_EQ(p.workQueues, 16);
  EXPECT_EQ(p.processesShare, 0);
  EXPECT_EQ(fake::callCount("kernelResidentBlocks"), 2u);

  setenv("UNICCL_RANKS_PER_GPU", "4", 1);
  fake::setProcessesShareDevice(true);
  ASSERT_EQ(fillSharingInfo(kernels, 512, -1, &p), ncclSuccess);
  EXPECT_EQ(p.shareLimit, 4);
  EXPECT_EQ(p.processesShare, 1);
  // ncclCommInitRankMulti's virtual id accepts any number of ranks.
  ASSERT_EQ(fillSharingInfo(kernels, 512, 3, &p), ncclSuccess);
  EXPECT_EQ(p.shareLimit, INT_MAX);
  EXPECT_EQ(p.virtualId, 3);
}

TEST_F(SharingInfo, ABackendFailureFailsTheRank) {
  fake::failNext("kernelResidentBlocks");
  PeerInfo p{};
  EXPECT_NE(fillSharingInfo(kernels, 512, -1, &p), ncclSuccess);
}

class ChannelCount : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = new ncclComm();
    comm_->allP2p = true;
    comm_->peers.assign(2, peer(1, 10, 1));
  }
  void TearDown() override {
    unsetenv("NCCL_MIN_NCHANNELS");
    delete comm_;
  }
  ncclComm* comm_ = nullptr;
};

TEST_F(ChannelCount, TheFitCapsTheDefault) {
  int n = 0;
  comm_->channelFit = 1000;
  ASSERT_EQ(chooseChannelCount(comm_, &n), ncclSuccess);
  EXPECT_EQ(n, 128);   // 132 SMs: the P2P default
  comm_->channelFit = 33;
  ASSERT_EQ(chooseChannelCount(comm_, &n), ncclSuccess);
  EXPECT_EQ(n, 33);
}

TEST_F(ChannelCount, AMinimumThatDoesNotFitIsRefused) {
  int n = 0;
  comm_->channelFit = 16;
  setenv("NCCL_MIN_NCHANNELS", "32", 1);
  EXPECT_EQ(chooseChannelCount(comm_, &n), ncclInvalidUsage);
  EXPECT_NE(lastError().find("only 16 fit"), std::string::npos) << lastError();
  setenv("NCCL_MIN_NCHANNELS", "16", 1);
  ASSERT_EQ(chooseChannelCount(comm_, &n), ncclSuccess);
  EXPECT_EQ(n, 16);
}

}  // namespace
}  // namespace uniccl
