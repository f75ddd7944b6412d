// Which network device each channel's connections use (transport/net_devices.h):
// the topology's NIC by name, else in turn over the devices, else the GPU's share.
#include "common/transport/net_devices.h"

#include <gtest/gtest.h>

#include <set>

#include "common/topo/nics.h"
#include "common/topo/rings.h"

using uniccl::channelNetDevices;
using namespace uniccl::topo;

TEST(NetDevices, TopologyNicFoundByName) {
  const std::vector<ChannelNic> nics = {{0, "mlx5_1"}, {1, "mlx5_0"}, {0, "mlx5_1"}};
  EXPECT_EQ(channelNetDevices(nics, {"mlx5_0", "mlx5_1"}, 0), (std::vector<int>{1, 0, 1}));
}

TEST(NetDevices, UnlistedNicGoesRoundTheDevicesByIndex) {
  // A topology file's NICs ("rdma2") the transport does not list: index mod devices.
  const std::vector<ChannelNic> nics = {{0, "rdma0"}, {1, "rdma1"}, {2, "rdma2"}, {3, "rdma3"}};
  EXPECT_EQ(channelNetDevices(nics, {"eth0", "eth1"}, 0), (std::vector<int>{0, 1, 0, 1}));
  // One device (loopback): every channel on it.
  EXPECT_EQ(channelNetDevices(nics, {"lo"}, 5), (std::vector<int>{0, 0, 0, 0}));
}

TEST(NetDevices, NoNicInTheTopologyUsesTheGpusShare) {
  const std::vector<ChannelNic> none(3);
  EXPECT_EQ(channelNetDevices(none, {"a", "b"}, 3), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(channelNetDevices(none, {"a", "b"}, -1), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(channelNetDevices(none, {}, 1), (std::vector<int>{0, 0, 0}));   // no device: nothing to pick
}

// Two hosts of four GPUs with two NICs each, the transport listing the same
// NICs in another order: every rank's channels use the device of the NIC the
// topology chose for its host (nearest to the channel's entry GPU), and each
// host's channels use both NICs.
TEST(NetDevices, ChannelsFollowTheTopologyAcrossHosts) {
  System sys;
  for (int h = 0; h < 2; h++) {
    Host host;
    host.name = "node" + std::to_string(h);
    for (int g = 0; g < 4; g++) host.gpus.push_back(Gpu{"0000:1" + std::to_string(g) + ":00.0"});
    host.links.assign(16, Link{LinkClass::Switch, 18});
    for (int g = 0; g < 4; g++) host.setLink(g, g, Link{LinkClass::Self, 0});
    host.nics.push_back(Nic{"mlx5_0", {1, 1, 4, 4}});
    host.nics.push_back(Nic{"mlx5_1", {4, 4, 1, 1}});
    sys.hosts.push_back(host);
  }
  for (int r = 0; r < 8; r++) sys.ranks.push_back(RankPlace{r / 4, r % 4});
  ASSERT_EQ(sys.check(), "");
  const int nch = 8;
  const std::vector<std::vector<int>> rings = buildRings(sys, nch);
  const std::vector<std::vector<int>> nic = assignNics(sys, rings);
  const std::vector<std::string> devices = {"mlx5_1", "mlx5_0"};   // the transport's own order
  for (int r = 0; r < 8; r++) {
    const std::vector<ChannelNic> mine = channelNicsOfRank(sys, nic, r);
    ASSERT_EQ((int)mine.size(), nch);
    const std::vector<int> devs = channelNetDevices(mine, devices, sys.ranks[r].gpu);
    std::set<int> used;
    for (int c = 0; c < nch; c++) {
      const int h = sys.ranks[r].host;
      EXPECT_EQ(mine[c].index, nic[c][h]);
      EXPECT_EQ(devices[devs[c]], sys.hosts[h].nics[nic[c][h]].name) << "rank " << r << " channel " << c;
      used.insert(devs[c]);
    }
    EXPECT_EQ(used.size(), 2u) << "rank " << r << ": its channels should spread over both NICs";
  }
}
