// Communicators over several simulated hosts (the fake GPU, one process, the
// host identity per GPU from setHostIdHookForTesting): init's per-host rows
// (the topology's GPU links, the transports' P2P reach; topo/host_ranks.h)
// must give the answers a full N x N exchange gave. For each layout (hosts
// x ranks, uneven hosts, hosts interleaved over the ranks) the discovered
// topology is the system the layout describes, rings and trees are the ones
// that system yields, P2P joins exactly the ranks of a host, every other
// pair goes through the network, and the LSA team is what the reach allows.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/core/comm.h"
#include "common/core/comm_lsa.h"
#include "common/core/comm_transport.h"
#include "common/core/peer_info.h"
#include "common/topo/host_ranks.h"
#include "common/topo/rings.h"
#include "common/topo/trees.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

std::vector<int> layout;   // [rank = fake GPU]: its host

bool hostOfGpu(int gpuDev, char* name, size_t cap) {
  snprintf(name, cap, "node%d", layout[gpuDev]);
  return true;
}

// The system the layout describes, as discovery must find it: hosts in
// order of their first rank, each host's GPUs in bus-id (= rank) order, all
// pairs behind the fake's switch.
topo::System expectedSystem(const std::vector<int>& hostOf) {
  topo::System sys;
  const int n = (int)hostOf.size();
  std::vector<int> index;   // layout host -> System host
  sys.ranks.resize(n);
  for (int r = 0; r < n; r++) {
    if ((int)index.size() <= hostOf[r]) index.resize(hostOf[r] + 1, -1);
    int& h = index[hostOf[r]];
    if (h < 0) {
      h = sys.nHosts();
      sys.hosts.emplace_back();
      sys.hosts.back().name = "node" + std::to_string(hostOf[r]);
    }
    char bus[32];
    snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + r);
    sys.ranks[r] = topo::RankPlace{h, sys.hosts[h].gpuCount()};
    sys.hosts[h].gpus.push_back(topo::Gpu{bus});
  }
  for (topo::Host& host : sys.hosts) {
    const int g = host.gpuCount();
    host.links.assign((size_t)g * g, topo::Link{topo::LinkClass::Switch, 0});
    for (int i = 0; i < g; i++) host.setLink(i, i, topo::Link{topo::LinkClass::Self, 0});
  }
  return sys;
}

class HostLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setAutoComplete(true);
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    setenv("UNICCL_P2P_NCHANNELS", "4", 1);   // small, enough rings to compare
    setHostIdHookForTesting(hostOfGpu);
  }
  void TearDown() override {
    setHostIdHookForTesting(nullptr);
    unsetenv("NCCL_SOCKET_IFNAME");
    unsetenv("UNICCL_P2P_NCHANNELS");
    fake::reset();
  }

  void check(const std::vector<int>& hostOf, int lsaSize) {
    layout = hostOf;
    const int n = (int)hostOf.size();
    fake::setDeviceCount(n);
    std::vector<ncclComm_t> comms(n, nullptr);
    ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    const topo::System want = expectedSystem(hostOf);
    bool oneHost = true;
    for (int r = 0; r < n; r++) oneHost = oneHost && hostOf[r] == hostOf[0];
    for (ncclComm_t c : comms) {
      SCOPED_TRACE("rank " + std::to_string(c->rank));
      // The topology, field by field (NICs are what this machine's sysfs says).
      const topo::System& got = c->topology;
      ASSERT_EQ(got.nHosts(), want.nHosts());
      ASSERT_EQ(got.nRanks(), n);
      for (int r = 0; r < n; r++) {
        EXPECT_EQ(got.ranks[r].host, want.ranks[r].host) << "rank " << r;
        EXPECT_EQ(got.ranks[r].gpu, want.ranks[r].gpu) << "rank " << r;
      }
      for (int h = 0; h < want.nHosts(); h++) {
        const topo::Host &a = got.hosts[h], &b = want.hosts[h];
        EXPECT_EQ(a.name, b.name);
        ASSERT_EQ(a.gpuCount(), b.gpuCount());
        for (int g = 0; g < a.gpuCount(); g++) EXPECT_EQ(a.gpus[g].busId, b.gpus[g].busId);
        for (int i = 0; i < a.gpuCount(); i++)
          for (int j = 0; j < a.gpuCount(); j++) {
            EXPECT_EQ(a.link(i, j).cls, b.link(i, j).cls) << "host " << h << " GPUs " << i << ", " << j;
            EXPECT_EQ(a.link(i, j).count, b.link(i, j).count);
          }
      }
      // Rings and trees: the ones the described system yields (NICs as found).
      topo::System wantWithNics = want;
      for (int h = 0; h < want.nHosts(); h++) wantWithNics.hosts[h].nics = got.hosts[h].nics;
      const std::vector<std::vector<int>> rings = topo::buildRings(wantWithNics, c->nChannels);
      for (int ch = 0; ch < c->nChannels; ch++) {
        const dev::Channel& x = c->channelsHost[ch];
        const std::vector<int>& ring = rings[ch];
        // The fake's device memory is host memory: the channel's ring can be read.
        EXPECT_EQ(std::vector<int>(x.ringRanks, x.ringRanks + n), ring) << "channel " << ch;
        const TreeNode node = topo::buildTree(wantWithNics, ch)[c->rank];
        EXPECT_EQ(x.treeUp, node.parent) << "channel " << ch;
        EXPECT_EQ(x.treeDown[0], node.children[0]) << "channel " << ch;
        EXPECT_EQ(x.treeDown[1], node.children[1]) << "channel " << ch;
      }
      // Reach and transports: P2P within a host, the network across.
      for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
          if (a == b) continue;
          const bool same = hostOf[a] == hostOf[b];
          ASSERT_EQ(c->transports.p2pReachable(a, b), same) << "ranks " << a << ", " << b;
          EXPECT_EQ(transportBetween(c, a, b), same ? TransportKind::P2p : TransportKind::Net)
              << "ranks " << a << ", " << b;
        }
      for (int p = 0; p < n; p++) {
        if (c->transports.connected(p)) {
          EXPECT_EQ(c->transports.kind(p), hostOf[p] == hostOf[c->rank] ? TransportKind::P2p : TransportKind::Net);
        }
      }
      EXPECT_EQ(c->allP2p, oneHost);
      EXPECT_EQ(c->transports.ringUsesNet(), !oneHost);
      EXPECT_EQ(lsaPlace(c).size, lsaSize);
    }
    for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  }
};

std::vector<int> blocks(int hosts, int perHost) {
  std::vector<int> v;
  for (int h = 0; h < hosts; h++) v.insert(v.end(), perHost, h);
  return v;
}

TEST_F(HostLayout, TwoHostsOfFour) { check(blocks(2, 4), 4); }
TEST_F(HostLayout, FourHostsOfTwo) { check(blocks(4, 2), 2); }
TEST_F(HostLayout, ThreeHostsOfThree) { check(blocks(3, 3), 3); }
TEST_F(HostLayout, OneHostOfEight) { check(blocks(1, 8), 8); }
// Rows as wide as the largest host; the smaller host's rows are padded.
TEST_F(HostLayout, UnevenHosts) { check({0, 0, 0, 1, 1, 1, 1, 1}, 1); }
// A rank's position in its host's row is not its rank modulo anything.
TEST_F(HostLayout, InterleavedHosts) { check({0, 1, 0, 1, 1, 0, 0, 1}, 1); }

TEST(HostRanks, PositionsAndWidth) {
  const topo::HostRanks h = topo::hostRanks({7, 9, 7, 7, 5, 9});
  EXPECT_EQ(h.nHosts, 3);
  EXPECT_EQ(h.rowWidth, 3);
  EXPECT_EQ(h.host, (std::vector<int>{0, 1, 0, 0, 2, 1}));
  EXPECT_EQ(h.localIndex, (std::vector<int>{0, 0, 1, 2, 0, 1}));
  EXPECT_TRUE(h.sameHost(0, 3));
  EXPECT_FALSE(h.sameHost(0, 1));
  EXPECT_EQ(topo::hostRanks({}).rowWidth, 0);
}

}  // namespace
}  // namespace uniccl
