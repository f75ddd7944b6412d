// P2P connections carry a direction's slots only where a rank receives
// from its peer: four real communicators (ncclCommInitAll) on the fake GPU.
// A ring rank holds slots for its predecessor, maps its successor's, and
// the pair's other directions stay unwired until a message needs them; a
// direction added later leaves the persistent step counters the kernels
// keep in the connection as they were. Tree parents and children connect
// both ways when the first AllReduce on the tree is planned.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>

#include "common/core/comm.h"
#include "common/core/tuning.h"
#include "common/gpu.h"
#include "common/transport/transport.h"
#include "device/dev_types.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

constexpr int kRanks = 4;

class P2pDirections : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setDeviceCount(kRanks);
    fake::setAutoComplete(true);
    // The fake's kernels never write the progress words the watchdog waits
    // for at destroy: no watchdog.
    setenv("UNICCL_TIMEOUT", "0", 1);
    const fake::Bytes before = fake::liveBytes();
    const int devs[kRanks] = {0, 1, 2, 3};
    ASSERT_EQ(ncclCommInitAll(comms_, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
    initDeviceBytes_ = fake::liveBytes().device - before.device;
  }
  void TearDown() override {
    for (ncclComm_t c : comms_)
      if (c != nullptr) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
    unsetenv("UNICCL_TIMEOUT");
    fake::reset();
  }
  // The fake's device memory is host memory: a channel's peer entries can be read directly.
  static const dev::Peer& entry(const ncclComm* c, int ch, int peer) { return c->channelsHost[ch].peers[peer]; }

  ncclComm_t comms_[kRanks] = {};
  size_t initDeviceBytes_ = 0;
};

TEST_F(P2pDirections, RingRanksHoldSlotsForTheirPredecessorOnly) {
  for (ncclComm* c : comms_) {
    ASSERT_EQ(c->transports.kind(c->channelsHost[0].ringNext), TransportKind::P2p);
    for (int ch = 0; ch < c->nChannels; ch++) {
      const int next = c->channelsHost[ch].ringNext, prev = c->channelsHost[ch].ringPrev;
      ASSERT_NE(next, prev);
      EXPECT_NE(entry(c, ch, prev).recv.buffs[dev::kProtoSimple], nullptr) << "rank " << c->rank << " ch " << ch;
      EXPECT_NE(entry(c, ch, prev).recv.buffs[dev::kProtoLL], nullptr);
      EXPECT_NE(entry(c, ch, next).send.buffs[dev::kProtoSimple], nullptr);
      EXPECT_NE(entry(c, ch, next).send.buffs[dev::kProtoLL], nullptr);
      // The directions the ring never uses have counters but no slots.
      EXPECT_NE(entry(c, ch, next).recv.tail, nullptr);
      EXPECT_EQ(entry(c, ch, next).recv.buffs[dev::kProtoSimple], nullptr);
      EXPECT_EQ(entry(c, ch, prev).send.buffs[dev::kProtoSimple], nullptr);
      // The receiver's slots are the very memory the sender writes.
      const ncclComm* p = comms_[prev];
      EXPECT_EQ(entry(p, ch, c->rank).send.buffs[dev::kProtoSimple],
                entry(c, ch, prev).recv.buffs[dev::kProtoSimple]);
    }
    EXPECT_TRUE(c->transports.ready(c->channelsHost[0].ringNext, kDirSend));
    EXPECT_FALSE(c->transports.ready(c->channelsHost[0].ringNext, kDirRecv));
    EXPECT_TRUE(c->transports.ready(c->channelsHost[0].ringPrev, kDirRecv));
  }
  // One slot block per rank (its predecessor's), not one per neighbour:
  // the ranks' device memory after init is under 1.5 slot blocks each.
  const size_t slotBlock = comms_[0]->transports.layout().slotStride() * (size_t)comms_[0]->nChannels;
  EXPECT_GE(initDeviceBytes_, kRanks * slotBlock);
  EXPECT_LT(initDeviceBytes_, kRanks * slotBlock * 3 / 2) << "slot block " << slotBlock;
}

TEST_F(P2pDirections, AMessageAgainstTheRingAddsItsDirectionAndKeepsTheSteps) {
  // Each rank sends to its ring predecessor (channel 0's ring runs every
  // channel here): the opposite of the ring's direction.
  ncclComm* c0 = comms_[0];
  const int prev = c0->channelsHost[0].ringPrev;
  ASSERT_FALSE(c0->transports.ready(prev, kDirSend));
  // Persistent counters a kernel left in the entries already wired.
  dev::Peer& ringIn = c0->channelsHost[0].peers[prev];
  ringIn.recv.step = 4242;
  void* buf[kRanks] = {};
  for (int r = 0; r < kRanks; r++) {
    ASSERT_EQ(gpu::setDevice(r), ncclSuccess);
    ASSERT_EQ(gpu::deviceAlloc(&buf[r], 4096), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; r++) {
    ncclComm* c = comms_[r];
    ASSERT_EQ(ncclSend(buf[r], 1024, ncclFloat32, c->channelsHost[0].ringPrev, c, nullptr), ncclSuccess);
    ASSERT_EQ(ncclRecv(buf[r], 1024, ncclFloat32, c->channelsHost[0].ringNext, c, nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (ncclComm* c : comms_) {
    const int p = c->channelsHost[0].ringPrev, n = c->channelsHost[0].ringNext;
    EXPECT_TRUE(c->transports.ready(p, kDirBoth)) << "rank " << c->rank;
    EXPECT_TRUE(c->transports.ready(n, kDirBoth)) << "rank " << c->rank;
    for (int ch = 0; ch < c->nChannels; ch++) {
      EXPECT_NE(entry(c, ch, p).send.buffs[dev::kProtoSimple], nullptr);
      EXPECT_EQ(entry(c, ch, p).send.buffs[dev::kProtoSimple],
                entry(comms_[p], ch, c->rank).recv.buffs[dev::kProtoSimple]);
    }
  }
  EXPECT_EQ(ringIn.recv.step, 4242u);
  for (int r = 0; r < kRanks; r++) EXPECT_EQ(gpu::deviceFree(buf[r]), ncclSuccess);
}

TEST_F(P2pDirections, TreePeersConnectOnTheFirstAllReduceOnTheTree) {
  // Four ranks on one host run small AllReduces on the tree by default.
  ASSERT_TRUE(allReduceUsesTree(comms_[0], 4096));
  ASSERT_FALSE(comms_[0]->transports.treePeers().empty());
  bool anyMissing = false;
  for (ncclComm* c : comms_) anyMissing = anyMissing || !c->transports.treeReady();
  EXPECT_TRUE(anyMissing) << "init connected every tree peer both ways";
  void* buf[kRanks] = {};
  for (int r = 0; r < kRanks; r++) {
    ASSERT_EQ(gpu::setDevice(r), ncclSuccess);
    ASSERT_EQ(gpu::deviceAlloc(&buf[r], 4096), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; r++)
    ASSERT_EQ(ncclAllReduce(buf[r], buf[r], 1024, ncclFloat32, ncclSum, comms_[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (ncclComm* c : comms_) {
    EXPECT_TRUE(c->transports.treeReady()) << "rank " << c->rank;
    for (int ch = 0; ch < c->nChannels; ch++)
      for (int p : {c->channelsHost[ch].treeUp, c->channelsHost[ch].treeDown[0], c->channelsHost[ch].treeDown[1]}) {
        if (p < 0) continue;
        EXPECT_NE(entry(c, ch, p).send.buffs[dev::kProtoLL], nullptr);
        EXPECT_NE(entry(c, ch, p).recv.buffs[dev::kProtoLL], nullptr);
      }
  }
  for (int r = 0; r < kRanks; r++) EXPECT_EQ(gpu::deviceFree(buf[r]), ncclSuccess);
}

}  // namespace
}  // namespace uniccl
