// The IB transport's pure logic: NCCL_IB_HCA parsing and matching, GID
// choice, QP transition attributes, device discovery on the fake fabric.
#include <gtest/gtest.h>

#include <cstring>

#include "../scoped_env.h"
#include "fake_verbs.h"
#include "net/ib/gid_select.h"
#include "net/ib/hca_list.h"
#include "net/ib/ib_devices.h"
#include "net/ib/qp_setup.h"

namespace uniccl {
namespace ib {
namespace {

using fake::FakeVerbs;

TEST(IbHca, ParsesNamesPortsAndModifiers) {
  HcaFilter f;
  ASSERT_EQ(parseHcaList("mlx5_0:1, mlx5_1", &f), ncclSuccess);
  EXPECT_FALSE(f.exclude);
  EXPECT_FALSE(f.exact);
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_EQ(f.entries[0].name, "mlx5_0");
  EXPECT_EQ(f.entries[0].port, 1);
  EXPECT_EQ(f.entries[1].name, "mlx5_1");
  EXPECT_EQ(f.entries[1].port, -1);

  ASSERT_EQ(parseHcaList("^=mlx5_1:2,,", &f), ncclSuccess);
  EXPECT_TRUE(f.exclude);
  EXPECT_TRUE(f.exact);
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_EQ(f.entries[0].port, 2);

  ASSERT_EQ(parseHcaList(nullptr, &f), ncclSuccess);
  EXPECT_TRUE(f.entries.empty());
  EXPECT_EQ(parseHcaList("mlx5_0:x", &f), ncclInvalidArgument);
  EXPECT_EQ(parseHcaList("mlx5_0:0", &f), ncclInvalidArgument);
  EXPECT_EQ(parseHcaList("mlx5_0:", &f), ncclInvalidArgument);
  EXPECT_EQ(parseHcaList(":1", &f), ncclInvalidArgument);
}

TEST(IbHca, MatchesLikeNccl) {
  HcaFilter f;
  ASSERT_EQ(parseHcaList("mlx5", &f), ncclSuccess);  // prefix
  EXPECT_TRUE(hcaMatches(f, "mlx5_0", 1));
  EXPECT_TRUE(hcaMatches(f, "mlx5_10", 2));
  EXPECT_FALSE(hcaMatches(f, "bnxt_re0", 1));

  ASSERT_EQ(parseHcaList("=mlx5_1", &f), ncclSuccess);  // exact
  EXPECT_TRUE(hcaMatches(f, "mlx5_1", 1));
  EXPECT_FALSE(hcaMatches(f, "mlx5_10", 1));

  ASSERT_EQ(parseHcaList("mlx5_0:2", &f), ncclSuccess);  // port
  EXPECT_FALSE(hcaMatches(f, "mlx5_0", 1));
  EXPECT_TRUE(hcaMatches(f, "mlx5_0", 2));

  ASSERT_EQ(parseHcaList("^mlx5_0", &f), ncclSuccess);  // exclusion
  EXPECT_FALSE(hcaMatches(f, "mlx5_0", 1));
  EXPECT_FALSE(hcaMatches(f, "mlx5_01", 1));
  EXPECT_TRUE(hcaMatches(f, "mlx5_1", 1));

  ASSERT_EQ(parseHcaList("^=mlx5_0:1", &f), ncclSuccess);
  EXPECT_FALSE(hcaMatches(f, "mlx5_0", 1));
  EXPECT_TRUE(hcaMatches(f, "mlx5_0", 2));
  EXPECT_TRUE(hcaMatches(f, "mlx5_01", 1));

  ASSERT_EQ(parseHcaList("", &f), ncclSuccess);
  EXPECT_TRUE(hcaMatches(f, "anything", 7));
}

std::vector<GidEntry> roceTable() {
  return {{fake::linkLocalGid(1), GidType::kIbRoceV1},
          {fake::linkLocalGid(1), GidType::kRoceV2},
          {fake::ipv4Gid(10, 0, 0, 1), GidType::kIbRoceV1},
          {fake::ipv4Gid(10, 0, 0, 1), GidType::kRoceV2},
          {Gid{}, GidType::kUnknown}};
}

TEST(IbGid, FamilyAndZero) {
  EXPECT_EQ(gidFamily(fake::ipv4Gid(1, 2, 3, 4)), AF_INET);
  EXPECT_EQ(gidFamily(fake::linkLocalGid(3)), AF_INET6);
  EXPECT_TRUE(gidIsZero(Gid{}));
  EXPECT_FALSE(gidIsZero(fake::linkLocalGid(3)));
}

TEST(IbGid, ChoosesLikeNccl) {
  auto t = roceTable();
  EXPECT_EQ(chooseGidIndex(t, LinkLayer::kEthernet, -1, AF_INET, 2), 3);   // IPv4, RoCE v2
  EXPECT_EQ(chooseGidIndex(t, LinkLayer::kEthernet, -1, AF_INET, 1), 2);   // IPv4, RoCE v1
  EXPECT_EQ(chooseGidIndex(t, LinkLayer::kEthernet, -1, AF_INET6, 2), 1);  // link-local v2
  EXPECT_EQ(chooseGidIndex(t, LinkLayer::kEthernet, -1, AF_INET6, 1), 0);
  EXPECT_EQ(chooseGidIndex(t, LinkLayer::kEthernet, 1, AF_INET, 2), 1);    // NCCL_IB_GID_INDEX wins
  EXPECT_EQ(chooseGidIndex(t, LinkLayer::kEthernet, 4, AF_INET, 2), -1);   // empty entry
  EXPECT_EQ(chooseGidIndex(t, LinkLayer::kEthernet, 9, AF_INET, 2), -1);   // out of the table
  EXPECT_EQ(chooseGidIndex(t, LinkLayer::kInfiniBand, -1, AF_INET, 2), 0); // IB: index 0
  EXPECT_EQ(chooseGidIndex({}, LinkLayer::kEthernet, -1, AF_INET, 2), -1);
  // Only IPv6 GIDs and IPv4 wanted: NCCL keeps index 0.
  std::vector<GidEntry> v6 = {{fake::linkLocalGid(1), GidType::kIbRoceV1}, {fake::ipv6Gid(0xfd00, 5), GidType::kRoceV2}};
  EXPECT_EQ(chooseGidIndex(v6, LinkLayer::kEthernet, -1, AF_INET, 2), 0);
  // A v2 entry of the wanted family beats an earlier v1 one, not the reverse.
  std::vector<GidEntry> mix = {{Gid{}, GidType::kUnknown},
                               {fake::ipv4Gid(1, 1, 1, 1), GidType::kRoceV2},
                               {fake::ipv4Gid(1, 1, 1, 1), GidType::kIbRoceV1}};
  EXPECT_EQ(chooseGidIndex(mix, LinkLayer::kEthernet, -1, AF_INET, 2), 1);
  EXPECT_EQ(chooseGidIndex(mix, LinkLayer::kEthernet, -1, AF_INET, 1), 2);
}

IbDevice device(LinkLayer ll, int mtu, int gidIndex, uint16_t lid) {
  IbDevice d;
  d.name = "mlx5_0";
  d.port = 1;
  d.portAttr.linkLayer = ll;
  d.portAttr.activeMtu = mtu;
  d.portAttr.lid = lid;
  d.gidIndex = gidIndex;
  d.gid = fake::ipv4Gid(10, 0, 0, 1);
  return d;
}

TEST(IbQp, TransitionAttributes) {
  QpParams p;
  p.timeout = 14;
  p.retryCnt = 5;
  p.sl = 3;
  p.trafficClass = 106;
  p.pkeyIndex = 0;
  QpAttr a;
  int mask = 0;
  IbDevice roce = device(LinkLayer::kEthernet, 5, 3, 0);
  initAttr(roce, p, kAccessRemoteWrite, &a, &mask);
  EXPECT_EQ(a.state, QpState::kInit);
  EXPECT_EQ(a.portNum, 1);
  EXPECT_EQ(a.accessFlags, kAccessRemoteWrite);
  EXPECT_EQ(mask, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);

  QpEndpoint remote;
  remote.qpn = 77;
  remote.gid = fake::ipv4Gid(10, 0, 0, 2);
  remote.linkLayer = LinkLayer::kEthernet;
  remote.mtu = 3;  // 1024: the smaller MTU wins
  remote.lid = 9;
  rtrAttr(roce, p, remote, &a, &mask);
  EXPECT_EQ(a.state, QpState::kRtr);
  EXPECT_EQ(a.pathMtu, 3);
  EXPECT_EQ(a.destQpn, 77u);
  EXPECT_TRUE(a.ah.isGlobal);
  EXPECT_EQ(memcmp(a.ah.dgid.raw, remote.gid.raw, 16), 0);
  EXPECT_EQ(a.ah.sgidIndex, 3);
  EXPECT_EQ(a.ah.hopLimit, 255);
  EXPECT_EQ(a.ah.trafficClass, 106);
  EXPECT_EQ(a.ah.sl, 3);
  EXPECT_EQ(a.ah.portNum, 1);
  EXPECT_EQ(a.maxDestRdAtomic, 1);
  EXPECT_EQ(a.minRnrTimer, 12);
  EXPECT_EQ(mask, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer);

  IbDevice ibd = device(LinkLayer::kInfiniBand, 4, 0, 5);
  remote.linkLayer = LinkLayer::kInfiniBand;
  remote.mtu = 5;
  rtrAttr(ibd, p, remote, &a, &mask);
  EXPECT_FALSE(a.ah.isGlobal);
  EXPECT_EQ(a.ah.dlid, 9);
  EXPECT_EQ(a.pathMtu, 4);

  rtsAttr(p, &a, &mask);
  EXPECT_EQ(a.state, QpState::kRts);
  EXPECT_EQ(a.timeout, 14);
  EXPECT_EQ(a.retryCnt, 5);
  EXPECT_EQ(a.rnrRetry, 7);
  EXPECT_EQ(a.sqPsn, 0u);
  EXPECT_EQ(a.maxRdAtomic, 1);
  EXPECT_EQ(mask, kQpState | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic);
}

TEST(IbQp, ParamsFromEnv) {
  ScopedEnv t("NCCL_IB_TIMEOUT", "22"), r("NCCL_IB_RETRY_CNT", "9"), sl("NCCL_IB_SL", "2"), tc("NCCL_IB_TC", "41");
  QpParams p = qpParamsFromEnv();
  EXPECT_EQ(p.timeout, 22);
  EXPECT_EQ(p.retryCnt, 7);  // out of range: default
  EXPECT_EQ(p.sl, 2);
  EXPECT_EQ(p.trafficClass, 41);
}

TEST(IbQp, FakeRefusesIllegalTransitions) {
  FakeVerbs fv;
  fv.addDevice(FakeVerbs::roceDevice("mlx5_0"));
  std::vector<IbDevice> devs;
  ASSERT_EQ(discoverDevices(&fv, DiscoveryOptions(), &devs), ncclSuccess);
  ASSERT_EQ(devs.size(), 1u);
  {
    Cq* rawCq = nullptr;
    ASSERT_EQ(fv.createCq(devs[0].context->ctx.get(), 8, &rawCq), 0);
    CqPtr cq = own<CqPtr>(&fv, rawCq);
    QpPtr qp;
    uint32_t qpn = 0;
    ASSERT_EQ(createRcQp(devs[0], QpParams(), cq.get(), 4, 4, kAccessRemoteWrite, &qp, &qpn), ncclSuccess);
    QpAttr a;
    int mask = 0;
    rtsAttr(QpParams(), &a, &mask);
    EXPECT_NE(fv.modifyQp(qp.get(), a, mask), 0);  // INIT -> RTS skips RTR
    EXPECT_EQ(fv.violations().size(), 1u);
    // Loopback connection: INIT -> RTR -> RTS succeeds with our attributes.
    EXPECT_EQ(connectRcQp(devs[0], QpParams(), qp.get(), localEndpoint(devs[0], qpn), "test"), ncclSuccess);
    EXPECT_EQ(fv.transitions(QpState::kRts), 1);
  }
  devs.clear();
  EXPECT_EQ(fv.liveObjects(), 0);
}

TEST(IbDiscovery, PortsFilterAndGid) {
  FakeVerbs fv;
  fake::FakeDevice a = FakeVerbs::roceDevice("mlx5_0", 2);
  a.ports[1].state = 1;  // down
  fv.addDevice(a);
  fv.addDevice(FakeVerbs::ibDevice("mlx5_1", 10, 2));
  fake::FakeDevice c = FakeVerbs::roceDevice("bnxt_re0");
  c.failOpen = true;
  fv.addDevice(c);
  std::vector<IbDevice> devs;
  ASSERT_EQ(discoverDevices(&fv, DiscoveryOptions(), &devs), ncclSuccess);
  ASSERT_EQ(devs.size(), 3u);  // mlx5_0:1, mlx5_1:1, mlx5_1:2
  EXPECT_EQ(devs[0].name, "mlx5_0");
  EXPECT_EQ(devs[0].gidIndex, 3);
  EXPECT_EQ(devs[0].gidType, GidType::kRoceV2);
  EXPECT_EQ(devs[0].speedMbps, 200000);  // HDR x4
  EXPECT_EQ(devs[1].name, "mlx5_1");
  EXPECT_EQ(devs[1].port, 1);
  EXPECT_EQ(devs[1].gidIndex, 0);
  EXPECT_EQ(devs[1].portAttr.lid, 10);
  EXPECT_EQ(devs[1].speedMbps, 100000);  // EDR x4
  EXPECT_EQ(devs[2].port, 2);
  EXPECT_EQ(devs[1].context, devs[2].context);  // one open context per HCA

  DiscoveryOptions o;
  ASSERT_EQ(parseHcaList("^=mlx5_1:1", &o.hca), ncclSuccess);
  ASSERT_EQ(discoverDevices(&fv, o, &devs), ncclSuccess);
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[1].name, "mlx5_1");
  EXPECT_EQ(devs[1].port, 2);

  ScopedEnv gi("NCCL_IB_GID_INDEX", "2"), hca("NCCL_IB_HCA", "mlx5_0");
  ASSERT_EQ(discoveryOptionsFromEnv(&o), ncclSuccess);
  ASSERT_EQ(discoverDevices(&fv, o, &devs), ncclSuccess);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].gidIndex, 2);
  EXPECT_EQ(devs[0].gidType, GidType::kIbRoceV1);
  devs.clear();
  EXPECT_EQ(fv.liveObjects(), 0);
  EXPECT_TRUE(fv.violations().empty());
}

TEST(IbDiscovery, NoDevicesIsNotAnError) {
  FakeVerbs fv;
  std::vector<IbDevice> devs;
  EXPECT_EQ(discoverDevices(&fv, DiscoveryOptions(), &devs), ncclSuccess);
  EXPECT_TRUE(devs.empty());
}

}  // namespace
}  // namespace ib
}  // namespace uniccl
