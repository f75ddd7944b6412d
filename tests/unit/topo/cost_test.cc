// The cost model's pure part (common/topo/cost.h): link costs and their
// knob text, a System's shape, and the ring/tree/PAT estimates' scaling
// (ring latency linear in ranks, tree and PAT logarithmic, the ring's
// bandwidth its slowest hop class's). ScaleTable prints the predicted times
// at 1k-16k GPUs that docs/topology.md shows ("At scale: predicted").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "common/topo/cost.h"
#include "synthetic_hosts.h"

using namespace uniccl;
using namespace uniccl::topo;

namespace {

TEST(LinkCosts, KnobTextOverridesClasses) {
  LinkCosts c = defaultLinkCosts();
  std::string err;
  ASSERT_TRUE(applyLinkCosts("net=2:50,pcie=3.5:12:4", &c, &err)) << err;
  EXPECT_DOUBLE_EQ(c.net.hopUs, 2.0);
  EXPECT_DOUBLE_EQ(c.net.gbs, 50.0);
  EXPECT_DOUBLE_EQ(c.net.channelGBs, defaultLinkCosts().net.channelGBs);
  EXPECT_DOUBLE_EQ(c.pcie.hopUs, 3.5);
  EXPECT_DOUBLE_EQ(c.pcie.gbs, 12.0);
  EXPECT_DOUBLE_EQ(c.pcie.channelGBs, 4.0);
  EXPECT_DOUBLE_EQ(c.fabric.gbs, defaultLinkCosts().fabric.gbs);
  ASSERT_TRUE(applyLinkCosts("", &c, &err));
  ASSERT_TRUE(applyLinkCosts("switch=1:400", &c, &err));
  EXPECT_DOUBLE_EQ(c.of(LinkClass::Switch).gbs, 400.0);
}

TEST(LinkCosts, BadTextChangesNothing) {
  for (const char* bad : {"nvlink=1:2", "net", "net=1", "net=1:2:3:4", "net=-1:2", "net=1:0", "net=a:2",
                          "net=1:2,pcie=", "net=1:2x"}) {
    SCOPED_TRACE(bad);
    LinkCosts c = defaultLinkCosts();
    std::string err;
    EXPECT_FALSE(applyLinkCosts(bad, &c, &err));
    EXPECT_FALSE(err.empty());
    EXPECT_DOUBLE_EQ(c.net.hopUs, defaultLinkCosts().net.hopUs);
    EXPECT_DOUBLE_EQ(c.net.gbs, defaultLinkCosts().net.gbs);
  }
}

TEST(Shape, FromSystems) {
  Shape s = shapeOf(test::alikeHosts(1, 8, LinkClass::Switch, 0));
  EXPECT_EQ(s.nRanks, 8);
  EXPECT_EQ(s.nHosts, 1);
  EXPECT_EQ(s.ranksPerHost, 8);
  EXPECT_EQ(s.intra, LinkClass::Switch);
  EXPECT_EQ(s.nics, 1);
  EXPECT_EQ(s.meshLinks, 1);

  s = shapeOf(test::alikeHosts(16, 8, LinkClass::Switch, 8));
  EXPECT_EQ(s.nRanks, 128);
  EXPECT_EQ(s.nHosts, 16);
  EXPECT_EQ(s.ranksPerHost, 8);
  EXPECT_EQ(s.nics, 8);

  s = shapeOf(test::alikeHosts(64, 1, LinkClass::Switch, 1));
  EXPECT_EQ(s.ranksPerHost, 1);
  EXPECT_EQ(s.nHosts, 64);

  EXPECT_EQ(shapeOf(test::alikeHosts(1, 4, LinkClass::Pcie, 1)).intra, LinkClass::Pcie);
  s = shapeOf(test::alikeHosts(1, 8, LinkClass::Direct, 2));
  EXPECT_EQ(s.intra, LinkClass::Direct);
  EXPECT_EQ(s.meshLinks, 7);

  // The weakest link and the fewest NICs of any host count; an unused GPU's links do not.
  System sys = test::alikeHosts(2, 4, LinkClass::Switch, 4);
  sys.hosts[1].nics.resize(2);
  sys.hosts[1].setLink(2, 3, Link{LinkClass::Pcie, 1});
  EXPECT_EQ(shapeOf(sys).nics, 2);
  EXPECT_EQ(shapeOf(sys).intra, LinkClass::Pcie);
  sys.ranks.pop_back();   // GPU 3 of host 1 holds no rank now
  EXPECT_EQ(shapeOf(sys).intra, LinkClass::Switch);
}

double us(const Shape& s, Algo a, Coll c, double bytes, int channels) {
  return estimate(s, defaultLinkCosts(), a, c, bytes, channels).us();
}

TEST(Estimate, RingLinearTreeAndPatLogarithmic) {
  const LinkCosts costs = defaultLinkCosts();
  // One GPU per host: ring latency (n-1) network hops per pass, PAT log2(n) rounds.
  for (int n : {64, 1024, 4096}) {
    const Shape s = shapeOf(test::alikeHosts(n, 1, LinkClass::Switch, 1));
    const Estimate ring = estimate(s, costs, Algo::Ring, Coll::AllGather, 8, 2);
    const Estimate pat = estimate(s, costs, Algo::Pat, Coll::AllGather, 8, 2);
    const Estimate tree = estimate(s, costs, Algo::Tree, Coll::AllReduce, 8, 2);
    ASSERT_TRUE(ring.applies && pat.applies && tree.applies);
    EXPECT_NEAR(ring.latencyUs, (n - 1) * costs.net.hopUs, 1e-6);
    EXPECT_NEAR(pat.latencyUs, ceilLog2(n) * costs.net.hopUs, 1e-6);
    EXPECT_NEAR(tree.latencyUs, 2.0 * ceilLog2(n) * costs.net.hopUs, 1e-6);
    EXPECT_NEAR(estimate(s, costs, Algo::Ring, Coll::AllReduce, 8, 2).latencyUs, 2.0 * (n - 1) * costs.net.hopUs,
                1e-6);
  }
  // Eight GPUs per host: the tree adds the chain once and a level per doubling of hosts.
  const double t16 = us(shapeOf(test::alikeHosts(16, 8, LinkClass::Switch, 8)), Algo::Tree, Coll::AllReduce, 8, 8);
  const double t32 = us(shapeOf(test::alikeHosts(32, 8, LinkClass::Switch, 8)), Algo::Tree, Coll::AllReduce, 8, 8);
  const double t64 = us(shapeOf(test::alikeHosts(64, 8, LinkClass::Switch, 8)), Algo::Tree, Coll::AllReduce, 8, 8);
  EXPECT_NEAR(t32 - t16, t64 - t32, 1e-6);
  EXPECT_GT(t32, t16);
  // PAT needs one rank per host; the tree runs AllReduce only.
  EXPECT_FALSE(estimate(shapeOf(test::alikeHosts(16, 8, LinkClass::Switch, 8)), costs, Algo::Pat, Coll::AllGather, 8, 8)
                   .applies);
  EXPECT_FALSE(estimate(shapeOf(test::alikeHosts(16, 8, LinkClass::Switch, 8)), costs, Algo::Tree, Coll::AllGather, 8, 8)
                   .applies);
}

TEST(Estimate, RingBandwidthIsTheSlowestHopClass) {
  const LinkCosts costs = defaultLinkCosts();
  // One host: the fabric (per channel up to its ceiling); PCIe slower; a mesh's links add up.
  const Shape box = shapeOf(test::alikeHosts(1, 8, LinkClass::Switch, 8));
  EXPECT_DOUBLE_EQ(estimate(box, costs, Algo::Ring, Coll::AllReduce, 1 << 30, 128).busGBs, costs.fabric.gbs);
  EXPECT_DOUBLE_EQ(estimate(box, costs, Algo::Ring, Coll::AllReduce, 1 << 30, 2).busGBs, 2 * costs.fabric.channelGBs);
  const Shape pcie = shapeOf(test::alikeHosts(1, 8, LinkClass::Pcie, 1));
  EXPECT_DOUBLE_EQ(estimate(pcie, costs, Algo::Ring, Coll::AllReduce, 1 << 30, 128).busGBs, costs.pcie.gbs);
  const Shape mesh = shapeOf(test::alikeHosts(1, 8, LinkClass::Direct, 1));
  EXPECT_DOUBLE_EQ(estimate(mesh, costs, Algo::Ring, Coll::AllReduce, 1 << 30, 128).busGBs, 7 * costs.direct.gbs);
  // Across hosts: the NICs the channels spread over, shared by the channels on each.
  const Shape two = shapeOf(test::alikeHosts(2, 8, LinkClass::Switch, 8));
  EXPECT_DOUBLE_EQ(estimate(two, costs, Algo::Ring, Coll::AllReduce, 1 << 30, 2).busGBs,
                   std::min(2 * costs.net.gbs, 2 * costs.fabric.channelGBs));
  EXPECT_DOUBLE_EQ(estimate(two, costs, Algo::Ring, Coll::AllReduce, 1 << 30, 128).busGBs, 8 * costs.net.gbs);
  const Shape oneNic = shapeOf(test::alikeHosts(2, 8, LinkClass::Switch, 1));
  EXPECT_DOUBLE_EQ(estimate(oneNic, costs, Algo::Ring, Coll::AllReduce, 1 << 30, 128).busGBs, costs.net.gbs);
  // The same collective takes longer over more hosts, at every size.
  for (double bytes : {8.0, 65536.0, 1048576.0, 1073741824.0}) {
    double last = us(box, Algo::Ring, Coll::AllReduce, bytes, 8);
    for (int h : {2, 4, 16, 64}) {
      const double t = us(shapeOf(test::alikeHosts(h, 8, LinkClass::Switch, 8)), Algo::Ring, Coll::AllReduce, bytes, 8);
      EXPECT_GT(t, last) << h << " hosts, " << bytes << " bytes";
      last = t;
    }
  }
}

std::string fmtUs(double us) {
  char b[32];
  if (us < 1000) snprintf(b, sizeof(b), "%.0f us", us);
  else if (us < 1e6) snprintf(b, sizeof(b), "%.2f ms", us / 1e3);
  else snprintf(b, sizeof(b), "%.2f s", us / 1e6);
  return b;
}

std::string fmtBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    u++;
  }
  char b[32];
  snprintf(b, sizeof(b), "%.0f %s", bytes, units[u]);
  return b;
}

// The table of docs/topology.md ("At scale: predicted"): AllReduce and
// AllGather at 1k, 4k and 16k GPUs, 8 per host (8 NICs, 32 channels) and 1
// per host (1 NIC, 2 channels), default link costs. Asserts the shape of
// the result: the tree and PAT ten times ahead of the ring at 8 B, and PAT
// never behind the ring. (At these scales the ring's latency, linear in
// ranks, outweighs its bandwidth edge even at 1 GiB.)
TEST(ScaleTable, PredictedTimes) {
  const double sizes[] = {8.0, 1024.0, 65536.0, 1048576.0, 16777216.0, 268435456.0, 1073741824.0};
  for (int perHost : {8, 1}) {
    const int nics = perHost == 8 ? 8 : 1, channels = perHost == 8 ? 32 : 2;
    printf("\n%d GPU(s) per host, %d NIC(s) per host, %d channels\n\n", perHost, nics, channels);
    printf("| GPUs | size | AllReduce ring | AllReduce tree | AllReduce PAT | AllGather ring | AllGather PAT |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- |\n");
    for (int gpus : {1024, 4096, 16384}) {
      const Shape s = shapeOf(test::alikeHosts(gpus / perHost, perHost, LinkClass::Switch, nics));
      for (double bytes : sizes) {
        const Estimate arRing = estimate(s, defaultLinkCosts(), Algo::Ring, Coll::AllReduce, bytes, channels);
        const Estimate arTree = estimate(s, defaultLinkCosts(), Algo::Tree, Coll::AllReduce, bytes, channels);
        const Estimate arPat = estimate(s, defaultLinkCosts(), Algo::Pat, Coll::AllReduce, bytes, channels);
        const Estimate agRing = estimate(s, defaultLinkCosts(), Algo::Ring, Coll::AllGather, bytes, channels);
        const Estimate agPat = estimate(s, defaultLinkCosts(), Algo::Pat, Coll::AllGather, bytes, channels);
        printf("| %d | %s | %s | %s | %s | %s | %s |\n", gpus, fmtBytes(bytes).c_str(), fmtUs(arRing.us()).c_str(),
               fmtUs(arTree.us()).c_str(), arPat.applies ? fmtUs(arPat.us()).c_str() : "-",
               fmtUs(agRing.us()).c_str(), agPat.applies ? fmtUs(agPat.us()).c_str() : "-");
        if (bytes == 8.0) {
          EXPECT_LT(arTree.us() * 10, arRing.us()) << gpus;
          if (agPat.applies) {
            EXPECT_LT(agPat.us() * 10, agRing.us()) << gpus;
          }
        }
        if (agPat.applies) {
          EXPECT_LE(agPat.us(), agRing.us()) << gpus << " " << bytes;
          EXPECT_LE(arPat.us(), arRing.us()) << gpus << " " << bytes;
        }
      }
    }
  }
  printf("\n");
}

}  // namespace
