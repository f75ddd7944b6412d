// The topology's pure functions over synthetic systems: rings (Hamiltonian,
// each host entered and left once, entries spread, every mesh link used),
// trees (one parent each, spanning, a chain per host, logarithmic across
// hosts), the NIC per channel, and the text format's round trip and errors.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "common/topo/nics.h"
#include "common/topo/rings.h"
#include "common/topo/sysfs_nics.h"
#include "common/topo/system.h"
#include "common/topo/topo_file.h"
#include "common/topo/trees.h"

using namespace uniccl;
using namespace uniccl::topo;

namespace {

// Hosts of gpus[h] GPUs joined by `cls`, `nics` NICs each (NIC k nearest to
// GPUs k*G/nics .. (k+1)*G/nics-1: distance 1, others 4). Ranks host by
// host, or dealt round-robin over the hosts (`interleaved`).
System makeSystem(const std::vector<int>& gpus, LinkClass cls, int nics = 0, bool interleaved = false) {
  System sys;
  for (size_t h = 0; h < gpus.size(); h++) {
    Host host;
    host.name = "node" + std::to_string(h);
    const int g = gpus[h];
    for (int i = 0; i < g; i++) {
      char bus[32];
      snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + i);
      host.gpus.push_back(Gpu{bus});
    }
    host.links.assign((size_t)g * g, Link{cls, cls == LinkClass::Switch ? 18 : 1});
    for (int i = 0; i < g; i++) host.setLink(i, i, Link{LinkClass::Self, 0});
    for (int k = 0; k < nics; k++) {
      Nic nic;
      nic.name = "nic" + std::to_string(k);
      for (int i = 0; i < g; i++) nic.distance.push_back(i * nics / g == k ? 1 : 4);
      host.nics.push_back(nic);
    }
    sys.hosts.push_back(host);
  }
  if (!interleaved) {
    for (size_t h = 0; h < gpus.size(); h++)
      for (int i = 0; i < gpus[h]; i++) sys.ranks.push_back(RankPlace{(int)h, i});
  } else {
    std::vector<int> next(gpus.size(), 0);
    for (bool more = true; more;) {
      more = false;
      for (size_t h = 0; h < gpus.size(); h++)
        if (next[h] < gpus[h]) sys.ranks.push_back(RankPlace{(int)h, next[h]++}), more = true;
    }
  }
  EXPECT_EQ(sys.check(), "");
  return sys;
}

std::string shapeName(const std::vector<int>& gpus, LinkClass cls) {
  std::string s;
  for (int g : gpus) s += std::to_string(g) + ",";
  return s + linkClassName(cls);
}

struct Shape {
  std::vector<int> gpus;
  LinkClass cls;
  bool interleaved;
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int h : {1, 2, 3, 4, 5, 8, 16, 32})
    for (int g : {1, 2, 3, 4, 8})
      for (LinkClass c : {LinkClass::Switch, LinkClass::Direct, LinkClass::Pcie})
        out.push_back(Shape{std::vector<int>(h, g), c, false});
  for (const std::vector<int>& uneven :
       std::vector<std::vector<int>>{{1, 3}, {3, 1, 2}, {8, 1, 4, 2}, {2, 8}, {5, 7, 6}, {8, 8, 1}})
    for (LinkClass c : {LinkClass::Switch, LinkClass::Direct}) out.push_back(Shape{uneven, c, false});
  for (const std::vector<int>& g : std::vector<std::vector<int>>{{2, 2}, {4, 4, 4}, {3, 1, 2}, {8, 8}})
    out.push_back(Shape{g, LinkClass::Direct, true});
  return out;
}

bool isPermutation(const std::vector<int>& ring, int n) {
  std::vector<int> s = ring;
  std::sort(s.begin(), s.end());
  for (int i = 0; i < n; i++)
    if ((int)s.size() != n || s[i] != i) return false;
  return true;
}

}  // namespace

TEST(TopoRings, EveryRingVisitsEveryRankOnce) {
  for (const Shape& s : shapes()) {
    const System sys = makeSystem(s.gpus, s.cls, 0, s.interleaved);
    for (const std::vector<int>& ring : buildRings(sys, 24))
      ASSERT_TRUE(isPermutation(ring, sys.nRanks())) << shapeName(s.gpus, s.cls);
  }
}

TEST(TopoRings, OneHostWithoutMeshKeepsRankOrder) {
  for (int g : {1, 2, 3, 4, 8})
    for (LinkClass c : {LinkClass::Switch, LinkClass::Pcie, LinkClass::None}) {
      const System sys = makeSystem({g}, c);
      for (const std::vector<int>& ring : buildRings(sys, 16))
        for (int i = 0; i < g; i++) ASSERT_EQ(ring[i], i);
    }
  // A two-GPU "mesh" is one link: rank order too.
  EXPECT_EQ(buildRing(makeSystem({2}, LinkClass::Direct), 1), (std::vector<int>{0, 1}));
}

TEST(TopoRings, EachHostEnteredAndLeftOnce) {
  for (const Shape& s : shapes()) {
    const System sys = makeSystem(s.gpus, s.cls, 0, s.interleaved);
    const int n = sys.nRanks(), nh = sys.nHosts();
    if (nh < 2) continue;
    for (const std::vector<int>& ring : buildRings(sys, 24)) {
      int crossings = 0;
      std::vector<int> entered(nh, 0), left(nh, 0);
      for (int i = 0; i < n; i++) {
        const int a = sys.ranks[ring[i]].host, b = sys.ranks[ring[(i + 1) % n]].host;
        if (a != b) crossings++, left[a]++, entered[b]++;
      }
      // Every crossing is one host left and one entered: 2 * H boundary passes.
      ASSERT_EQ(2 * crossings, 2 * nh) << shapeName(s.gpus, s.cls);
      for (int h = 0; h < nh; h++) ASSERT_TRUE(entered[h] == 1 && left[h] == 1) << shapeName(s.gpus, s.cls);
    }
  }
}

TEST(TopoRings, ChannelsEnterEachHostThroughDifferentGpus) {
  for (const Shape& s : shapes()) {
    const System sys = makeSystem(s.gpus, s.cls, 0, s.interleaved);
    if (sys.nHosts() < 2) continue;
    for (int h = 0; h < sys.nHosts(); h++) {
      const int g = sys.hosts[h].gpuCount();
      std::set<int> entries, exits;
      for (int c = 0; c < g; c++) {
        const std::vector<int> ring = buildRing(sys, c);
        const int e = entryRank(sys, ring, h, c);
        ASSERT_GE(e, 0);
        entries.insert(sys.ranks[e].gpu);
        // The exit: the host's rank followed by another host's.
        for (int i = 0; i < sys.nRanks(); i++)
          if (sys.ranks[ring[i]].host == h && sys.ranks[ring[(i + 1) % sys.nRanks()]].host != h)
            exits.insert(sys.ranks[ring[i]].gpu);
      }
      EXPECT_EQ((int)entries.size(), g) << shapeName(s.gpus, s.cls) << " host " << h;
      // Exits too where the host walks one cycle (on a mesh the cycle changes with the channel).
      if (!sys.hosts[h].directMesh()) {
        EXPECT_EQ((int)exits.size(), g) << shapeName(s.gpus, s.cls) << " host " << h;
      }
    }
  }
}

TEST(TopoRings, MeshCyclesCoverEveryEdge) {
  for (int g = 1; g <= 16; g++) {
    const std::vector<std::vector<int>> cycles = meshCycles(g);
    std::set<std::pair<int, int>> edges;
    for (const std::vector<int>& c : cycles) {
      ASSERT_TRUE(isPermutation(c, g));
      for (int i = 0; i < g; i++) {
        const int a = c[i], b = c[(i + 1) % g];
        if (a != b) edges.insert({std::min(a, b), std::max(a, b)});
      }
    }
    EXPECT_EQ((int)edges.size(), g * (g - 1) / 2) << g;
    if (g >= 3) {
      EXPECT_EQ((int)cycles.size(), g % 2 == 0 ? g / 2 : (g - 1) / 2) << g;
    }
  }
}

TEST(TopoRings, MeshChannelsUseEveryLinkInBothDirections) {
  for (const std::vector<int>& gpus :
       std::vector<std::vector<int>>{{3}, {4}, {5}, {8}, {2, 2}, {3, 3}, {8, 8}, {4, 4, 4}, {8, 8, 8, 8}, {5, 7}}) {
    const System sys = makeSystem(gpus, LinkClass::Direct);
    int maxG = 0;
    for (int g : gpus) maxG = std::max(maxG, g);
    std::map<int, std::set<std::pair<int, int>>> used;   // host -> directed GPU pairs
    for (const std::vector<int>& ring : buildRings(sys, 2 * maxG)) {
      const int n = (int)ring.size();
      for (int i = 0; i < n; i++) {
        const RankPlace a = sys.ranks[ring[i]], b = sys.ranks[ring[(i + 1) % n]];
        if (a.host == b.host) used[a.host].insert({a.gpu, b.gpu});
      }
    }
    for (int h = 0; h < sys.nHosts(); h++) {
      const int g = gpus[h];
      EXPECT_EQ((int)used[h].size(), g * (g - 1)) << shapeName(gpus, LinkClass::Direct) << " host " << h;
    }
  }
}

TEST(TopoRings, OneHostMeshRingsDiffer) {
  const System sys = makeSystem({8}, LinkClass::Direct);
  std::set<std::vector<int>> distinct;
  for (const std::vector<int>& ring : buildRings(sys, 8)) distinct.insert(ring);
  EXPECT_EQ(distinct.size(), 8u);   // 4 cycles, each in both directions
}

namespace {

// Checks channel c's tree over `sys`; returns its depth (hops from the root
// to the deepest rank) and, in *netDepth, the most host-crossing edges on a
// root path.
int checkTree(const System& sys, int c, int* netDepth, const std::string& what) {
  const int n = sys.nRanks();
  const std::vector<TreeNode> t = buildTree(sys, c);
  int root = -1;
  for (int r = 0; r < n; r++) {
    if (t[r].parent < 0) {
      EXPECT_EQ(root, -1) << what << ": two roots";
      root = r;
    } else {
      const TreeNode& p = t[t[r].parent];
      EXPECT_TRUE(p.children[0] == r || p.children[1] == r) << what << ": rank " << r << "'s parent does not list it";
    }
    if (t[r].children[0] < 0) {
      EXPECT_LT(t[r].children[1], 0) << what << ": children[1] without children[0]";
    }
    for (int ch : t[r].children) {
      if (ch >= 0) {
        EXPECT_EQ(t[ch].parent, r) << what << ": child " << ch << " of " << r;
      }
    }
  }
  EXPECT_GE(root, 0) << what;
  if (root < 0) return 0;
  // Breadth-first from the root: every rank reached once (acyclic, spanning).
  std::vector<int> depth(n, -1), net(n, 0);
  std::queue<int> q;
  depth[root] = 0;
  q.push(root);
  int seen = 0, maxDepth = 0;
  *netDepth = 0;
  while (!q.empty()) {
    const int r = q.front();
    q.pop();
    seen++;
    maxDepth = std::max(maxDepth, depth[r]);
    *netDepth = std::max(*netDepth, net[r]);
    for (int ch : t[r].children) {
      if (ch < 0) continue;
      EXPECT_EQ(depth[ch], -1) << what << ": rank " << ch << " reached twice";
      if (depth[ch] >= 0) continue;
      depth[ch] = depth[r] + 1;
      net[ch] = net[r] + (sys.ranks[ch].host != sys.ranks[r].host ? 1 : 0);
      q.push(ch);
    }
  }
  EXPECT_EQ(seen, n) << what;
  // Several hosts: the host's ranks are a chain (G-1 edges inside the host,
  // each rank at most one child inside it) and one rank, the head, has its
  // parent elsewhere (or is the root).
  if (sys.nHosts() > 1) {
    for (int h = 0; h < sys.nHosts(); h++) {
      int inside = 0, heads = 0;
      for (int r : sys.hostRanks(h)) {
        const bool parentHere = t[r].parent >= 0 && sys.ranks[t[r].parent].host == h;
        if (parentHere) inside++;
        else heads++;
        int childrenHere = 0;
        for (int ch : t[r].children) childrenHere += ch >= 0 && sys.ranks[ch].host == h;
        EXPECT_LE(childrenHere, 1) << what << ": not a chain in host " << h;
      }
      EXPECT_EQ(heads, 1) << what << " host " << h;
      EXPECT_EQ(inside, sys.hosts[h].gpuCount() - 1) << what << " host " << h;
    }
  }
  return maxDepth;
}

}  // namespace

TEST(TopoTrees, ValidChainsAndLogDepthAcrossHosts) {
  for (const Shape& s : shapes()) {
    const System sys = makeSystem(s.gpus, s.cls, 0, s.interleaved);
    const int nh = sys.nHosts();
    int maxG = 0;
    for (int g : s.gpus) maxG = std::max(maxG, g);
    const int levels = (int)std::ceil(std::log2((double)nh + 1));
    for (int c = 0; c < 6; c++) {
      int net = 0;
      const std::string what = shapeName(s.gpus, s.cls) + " channel " + std::to_string(c);
      const int depth = checkTree(sys, c, &net, what);
      if (nh > 1) {
        EXPECT_GE(net, 1) << what;
        EXPECT_LE(net, levels) << what;
        EXPECT_LE(depth, 2 * levels + maxG) << what;
      }
    }
  }
}

TEST(TopoTrees, OneHostIsTheDoubleBinaryTree) {
  const System sys = makeSystem({8}, LinkClass::Switch);
  for (int c = 0; c < 4; c++) {
    const std::vector<TreeNode> t = buildTree(sys, c);
    for (int r = 0; r < 8; r++) {
      const TreeNode want = doubleBinaryTree(8, r, c % 2);
      EXPECT_EQ(t[r].parent, want.parent);
      EXPECT_EQ(t[r].children[0], want.children[0]);
      EXPECT_EQ(t[r].children[1], want.children[1]);
    }
  }
}

TEST(TopoTrees, ChannelPairsRotateTheHead) {
  const System sys = makeSystem({4, 4}, LinkClass::Switch);
  std::set<int> heads;
  for (int c = 0; c < 8; c++) {
    const std::vector<TreeNode> t = buildTree(sys, c);
    for (int r : sys.hostRanks(1))
      if (t[r].parent < 0 || sys.ranks[t[r].parent].host != 1) heads.insert(r);   // the root heads its host too
  }
  EXPECT_EQ(heads.size(), 4u);
}

TEST(TopoNics, NearestNicOfTheEntryGpuSpreadOverNics) {
  // 2 hosts x 8 GPUs, 4 NICs each (NIC k nearest to GPUs 2k, 2k+1).
  const System sys = makeSystem({8, 8}, LinkClass::Switch, 4);
  const std::vector<std::vector<int>> rings = buildRings(sys, 16);
  const std::vector<std::vector<int>> nic = assignNics(sys, rings);
  for (int h = 0; h < 2; h++) {
    std::vector<int> uses(4, 0);
    for (int c = 0; c < 16; c++) {
      const int gpu = sys.ranks[entryRank(sys, rings[c], h, c)].gpu;
      EXPECT_EQ(nic[c][h], gpu / 2) << "channel " << c << " host " << h;
      uses[nic[c][h]]++;
    }
    for (int u : uses) EXPECT_EQ(u, 4);
  }
  // Distances unknown: round-robin over the NICs.
  System blind = makeSystem({4, 4, 4}, LinkClass::Pcie, 3);
  for (Host& h : blind.hosts)
    for (Nic& n : h.nics) std::fill(n.distance.begin(), n.distance.end(), -1);
  const std::vector<std::vector<int>> spread = assignNics(blind, buildRings(blind, 9));
  for (int h = 0; h < 3; h++) {
    std::vector<int> uses(3, 0);
    for (int c = 0; c < 9; c++) uses[spread[c][h]]++;
    for (int u : uses) EXPECT_EQ(u, 3);
  }
  // No NIC: -1.
  EXPECT_EQ(assignNics(makeSystem({2, 2}, LinkClass::Switch), buildRings(makeSystem({2, 2}, LinkClass::Switch), 1))[0][0],
            -1);
}

TEST(TopoFile, RoundTrip) {
  for (const Shape& s : shapes()) {
    System sys = makeSystem(s.gpus, s.cls, 2, s.interleaved);
    if (sys.hosts[0].gpuCount() > 2) {   // a non-uniform table and an unknown distance
      sys.hosts[0].setLink(0, 2, Link{LinkClass::Pcie, 0});
      sys.hosts[0].setLink(2, 0, Link{LinkClass::Pcie, 0});
      sys.hosts[0].nics[0].distance[1] = -1;
    }
    const std::string text = formatTopology(sys);
    System back;
    std::string error;
    ASSERT_TRUE(parseTopology(text, &back, &error)) << error << "\n" << text;
    EXPECT_EQ(formatTopology(back), text);
    ASSERT_EQ(back.nHosts(), sys.nHosts());
    for (int h = 0; h < sys.nHosts(); h++) {
      const Host &a = sys.hosts[h], &b = back.hosts[h];
      EXPECT_EQ(a.name, b.name);
      ASSERT_EQ(a.gpuCount(), b.gpuCount());
      for (int i = 0; i < a.gpuCount(); i++) EXPECT_EQ(a.gpus[i].busId, b.gpus[i].busId);
      for (size_t i = 0; i < a.links.size(); i++) {
        EXPECT_EQ(a.links[i].cls, b.links[i].cls);
        EXPECT_EQ(a.links[i].count, b.links[i].count);
      }
      ASSERT_EQ(a.nics.size(), b.nics.size());
      for (size_t k = 0; k < a.nics.size(); k++) {
        EXPECT_EQ(a.nics[k].name, b.nics[k].name);
        EXPECT_EQ(a.nics[k].distance, b.nics[k].distance);
      }
    }
    ASSERT_EQ(back.nRanks(), sys.nRanks());
    for (int r = 0; r < sys.nRanks(); r++) {
      EXPECT_EQ(back.ranks[r].host, sys.ranks[r].host);
      EXPECT_EQ(back.ranks[r].gpu, sys.ranks[r].gpu);
    }
  }
}

TEST(TopoFile, HandWrittenMesh) {
  const std::string text =
      "uniccl-topology 1   # an 8-GPU xGMI-like mesh, two NICs\n"
      "host mi300\n"
      "gpu 0000:0c:00.0\ngpu 0000:22:00.0\ngpu 0000:38:00.0\ngpu 0000:5c:00.0\n"
      "gpu 0000:9f:00.0\ngpu 0000:af:00.0\ngpu 0000:bf:00.0\ngpu 0000:df:00.0\n"
      "links direct 1\n"
      "link 0 1 direct 2\n"
      "nic rdma0 1,1,1,1,5,5,5,5\n"
      "nic rdma1\n"
      "\n"
      "rank 0 mi300 0\nrank 1 mi300 1\nrank 2 mi300 2\nrank 3 mi300 3\n"
      "rank 4 mi300 4\nrank 5 mi300 5\nrank 6 mi300 6\nrank 7 mi300 7\n";
  System sys;
  std::string error;
  ASSERT_TRUE(parseTopology(text, &sys, &error)) << error;
  EXPECT_TRUE(sys.hosts[0].directMesh());
  EXPECT_EQ(sys.hosts[0].link(1, 0).count, 2);
  EXPECT_EQ(sys.hosts[0].link(3, 3).cls, LinkClass::Self);
  EXPECT_EQ(sys.hosts[0].nics[1].distance, std::vector<int>(8, -1));
}

TEST(TopoFile, ErrorsSayWhichLine) {
  const std::string head = "uniccl-topology 1\nhost a\ngpu 0000:01:00.0\ngpu 0000:02:00.0\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty topology"},
      {"<system version=\"1\">\n", "line 1: the first line must be"},
      {"uniccl-topology 2\n", "line 1: version 2"},
      {head + "link 0 2 direct\n", "line 5: link between GPUs"},
      {head + "link 0 1 nvlink\n", "line 5: unknown link class 'nvlink'"},
      {head + "links self\n", "line 5: unknown link class 'self'"},
      {head + "nic n0 1,2,3\n", "line 5: NIC n0 lists 3 distances"},
      {head + "nic n0 1,x\n", "line 5: bad distance list"},
      {head + "frobnicate\n", "line 5: unknown keyword 'frobnicate'"},
      {"uniccl-topology 1\ngpu 0000:01:00.0\n", "line 2: 'gpu' before any 'host' line"},
      {head + "rank 0 b 0\n", "line 5: rank 0 on host b"},
      {head + "rank 0 a 0\nrank 0 a 1\n", "line 6: rank 0 placed twice"},
      {head + "rank 0 a 0\nrank 2 a 1\n", "rank 1 is not placed"},
      {head + "rank 0 a 2\n", "rank 0 is on GPU 2 of host a"},
      {head + "host b\nrank 0 a 0\n", "host b has no rank"},
      {head, "no rank"},
  };
  for (const auto& [text, want] : bad) {
    System sys;
    std::string error;
    EXPECT_FALSE(parseTopology(text, &sys, &error)) << text;
    EXPECT_NE(error.find(want), std::string::npos) << "got: " << error << "\nwant: " << want;
  }
  EXPECT_TRUE(looksLikeXml("  \n<system version=\"1\">"));
  EXPECT_FALSE(looksLikeXml("uniccl-topology 1\n"));
}

TEST(TopoSysfs, PciDistance) {
  const std::string sw = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  EXPECT_EQ(pciDistance(sw + "/0000:02:00.0/0000:03:00.0", sw + "/0000:02:01.0/0000:04:00.0"), 4);
  EXPECT_EQ(pciDistance(sw + "/0000:02:00.0", sw + "/0000:02:00.0"), 0);
  EXPECT_EQ(pciDistance("/sys/devices/pci0000:00/0000:00:01.0", "/sys/devices/pci0000:80/0000:80:01.0"), 4);
}

// A fake /sys: a GPU and an InfiniBand NIC under one switch, an Ethernet NIC
// under another root complex, and lo (virtual: skipped).
TEST(TopoSysfs, LocalNicsFromAFakeSysfs) {
  char tmpl[] = "/tmp/topo_sysfs_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  auto mk = [](const std::string& d) { ASSERT_EQ(system(("mkdir -p '" + d + "'").c_str()), 0); };
  const std::string sw = root + "/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  mk(sw + "/0000:02:00.0/0000:03:00.0");   // GPU
  mk(sw + "/0000:02:01.0/0000:04:00.0");   // mlx5_0
  mk(root + "/devices/pci0000:80/0000:80:01.0/0000:81:00.0");   // eth0
  mk(root + "/devices/virtual/net/lo");
  mk(root + "/bus/pci/devices");
  mk(root + "/class/infiniband/mlx5_0");
  mk(root + "/class/net/eth0");
  mk(root + "/class/net/lo");
  ASSERT_EQ(symlink((sw + "/0000:02:00.0/0000:03:00.0").c_str(), (root + "/bus/pci/devices/0000:03:00.0").c_str()), 0);
  ASSERT_EQ(symlink((sw + "/0000:02:01.0/0000:04:00.0").c_str(), (root + "/class/infiniband/mlx5_0/device").c_str()), 0);
  ASSERT_EQ(symlink((root + "/devices/pci0000:80/0000:80:01.0/0000:81:00.0").c_str(),
                    (root + "/class/net/eth0/device").c_str()), 0);
  const std::vector<LocalNic> nics = localNics("0000:03:00.0", 8, root);
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_EQ(nics[0].name, "mlx5_0");
  EXPECT_EQ(nics[0].distance, 4);
  EXPECT_EQ(nics[1].name, "eth0");
  EXPECT_EQ(nics[1].distance, 8);   // 5 levels up from the GPU, 3 down to the NIC
  EXPECT_EQ(localNics("0000:03:00.0", 1, root).size(), 1u);
  const std::vector<LocalNic> unknownGpu = localNics("0000:99:00.0", 8, root);
  ASSERT_EQ(unknownGpu.size(), 2u);
  EXPECT_EQ(unknownGpu[0].distance, -1);
  EXPECT_EQ(system(("rm -rf '" + root + "'").c_str()), 0);
}
