#include "common/topo/cost.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace uniccl::topo {

namespace {

// A tree moves each byte once up and once down every edge: per rank about
// 2 S, as a ring's 2(n-1)/n S. But a node forwards between three
// neighbours at once and a chain's head between the network and its host:
// taken to reach 80% of the ring's bandwidth (assumed, not measured).
constexpr double kTreeBandwidthShare = 0.8;

ClassCost* classByName(LinkCosts* c, const std::string& name) {
  if (name == "none") return &c->none;
  if (name == "pcie") return &c->pcie;
  if (name == "direct") return &c->direct;
  if (name == "switch") return &c->fabric;
  if (name == "net") return &c->net;
  return nullptr;
}

bool parsePositive(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = strtod(s.c_str(), &end);
  if (end == nullptr || *end != '\0' || !(v > 0) || v > 1e9) return false;
  *out = v;
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// The GB/s one GPU's ring traffic gets inside its host on C channels.
double intraGBs(const Shape& s, const LinkCosts& costs, int nChannels) {
  const ClassCost& c = costs.of(s.intra);
  const double links = s.intra == LinkClass::Direct ? std::max(s.meshLinks, 1) : 1;
  return std::min(c.gbs * links, c.channelGBs * nChannels);
}

// The GB/s a host's traffic gets through the network on C channels: the
// channels spread over the NICs (topo/nics.h), at most one NIC each.
double netGBs(const Shape& s, const LinkCosts& costs, int nChannels) {
  const int nics = std::max(1, std::min(nChannels, s.nics));
  return std::min(costs.net.gbs * nics, costs.net.channelGBs * nChannels);
}

}  // namespace

const ClassCost& LinkCosts::of(LinkClass c) const {
  switch (c) {
    case LinkClass::Pcie: return pcie;
    case LinkClass::Direct: return direct;
    case LinkClass::Switch:
    case LinkClass::Self: return fabric;
    default: return none;
  }
}

LinkCosts defaultLinkCosts() {
  LinkCosts c;
  // Host memory (SHM): AllReduce 1 GiB at 20 GB/s busbw on 2 channels, 3 us per Simple hop (H200 host).
  c.none = ClassCost{3.0, 20.0, 10.0};
  // PCIe peer access: a Gen4 x16 slot's usable rate (assumed, not measured).
  c.pcie = ClassCost{2.5, 24.0, 5.5};
  // One xGMI-like link per pair (assumed, not measured): a mesh GPU's channels spread over its links.
  c.direct = ClassCost{1.5, 48.0, 5.5};
  // NVLink through NVSwitch between H200s: 1.5 us per Simple hop, 5.5 GB/s per channel, 370 GB/s store ceiling.
  c.fabric = ClassCost{1.5, 370.0, 5.5};
  // A 200 Gb/s RDMA NIC (assumed): 5 us per hop through the proxy, two channels fill it.
  c.net = ClassCost{5.0, 25.0, 12.5};
  return c;
}

bool applyLinkCosts(const std::string& text, LinkCosts* costs, std::string* err) {
  LinkCosts out = *costs;
  for (const std::string& item : split(text, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    ClassCost* c = eq == std::string::npos ? nullptr : classByName(&out, item.substr(0, eq));
    if (c == nullptr) {
      *err = "'" + item + "': expected CLASS=HOP_US:GBS[:CHANNEL_GBS] with CLASS one of none, pcie, direct, switch, net";
      return false;
    }
    const std::vector<std::string> f = split(item.substr(eq + 1), ':');
    ClassCost v = *c;
    if (f.size() < 2 || f.size() > 3 || !parsePositive(f[0], &v.hopUs) || !parsePositive(f[1], &v.gbs) ||
        (f.size() == 3 && !parsePositive(f[2], &v.channelGBs))) {
      *err = "'" + item + "': HOP_US, GBS and CHANNEL_GBS must be positive numbers";
      return false;
    }
    *c = v;
  }
  *costs = out;
  return true;
}

Shape shapeOf(const System& sys) {
  Shape s;
  s.nRanks = std::max(1, sys.nRanks());
  s.nHosts = std::max(1, sys.nHosts());
  std::vector<int> perHost(sys.hosts.size(), 0);
  std::vector<std::vector<char>> used(sys.hosts.size());
  for (size_t h = 0; h < sys.hosts.size(); h++) used[h].assign(sys.hosts[h].gpus.size(), 0);
  for (const RankPlace& p : sys.ranks) {
    if (p.host < 0 || p.host >= (int)sys.hosts.size()) continue;
    perHost[p.host]++;
    if (p.gpu >= 0 && p.gpu < (int)used[p.host].size()) used[p.host][p.gpu] = 1;
  }
  s.ranksPerHost = 1;
  for (int k : perHost) s.ranksPerHost = std::max(s.ranksPerHost, k);
  s.intra = LinkClass::Switch;
  s.nics = 0;
  bool allMesh = true, anyPair = false;
  int meshLinks = 0;
  for (size_t h = 0; h < sys.hosts.size(); h++) {
    const Host& host = sys.hosts[h];
    if (perHost[h] == 0) continue;
    const int nics = (int)host.nics.size();
    s.nics = s.nics == 0 ? std::max(1, nics) : std::min(s.nics, std::max(1, nics));
    const int g = host.gpuCount();
    int usedGpus = 0;
    for (int a = 0; a < g; a++) {
      if (!used[h][a]) continue;
      usedGpus++;
      for (int b = 0; b < g; b++) {
        if (a == b || !used[h][b]) continue;
        anyPair = true;
        const LinkClass c = host.link(a, b).cls;
        if ((int)c < (int)s.intra) s.intra = c;
      }
    }
    if (usedGpus > 1) {
      if (!host.directMesh() || usedGpus != g) allMesh = false;
      meshLinks = meshLinks == 0 ? usedGpus - 1 : std::min(meshLinks, usedGpus - 1);
    }
  }
  if (s.nics == 0) s.nics = 1;
  s.meshLinks = anyPair && allMesh && s.intra == LinkClass::Direct ? std::max(1, meshLinks) : 1;
  return s;
}

int ceilLog2(int n) {
  int d = 0;
  while (d < 31 && (1 << d) < n) d++;
  return d;
}

Estimate estimate(const Shape& s, const LinkCosts& costs, Algo algo, Coll coll, double bytes, int nChannels) {
  Estimate e;
  const int n = std::max(1, s.nRanks), H = std::max(1, std::min(s.nHosts, n)), G = std::max(1, s.ranksPerHost);
  const int C = std::max(1, nChannels);
  const double intraHop = costs.of(s.intra).hopUs, netHop = costs.net.hopUs;
  const double intraBw = intraGBs(s, costs, C), netBw = netGBs(s, costs, C);
  // The slowest hop class a ring's bytes pass.
  const double ringBw = H > 1 ? (G > 1 ? std::min(intraBw, netBw) : netBw) : intraBw;
  if (n == 1) return e;
  switch (algo) {
    case Algo::Ring: {
      // A chunk's pass around the ring: H network hops and n-H inside hosts.
      const double passUs = H > 1 ? H * netHop + (n - H) * intraHop : n * intraHop;
      const double perHop = passUs / n;
      e.applies = true;
      e.busGBs = ringBw;
      if (coll == Coll::AllReduce) {
        e.latencyUs = 2.0 * (n - 1) * perHop;
        e.busBytes = 2.0 * (n - 1) / n * bytes;
      } else if (coll == Coll::AllGather || coll == Coll::ReduceScatter) {
        e.latencyUs = (n - 1) * perHop;
        e.busBytes = (double)(n - 1) / n * bytes;
      } else {
        e.latencyUs = (n - 1) * perHop;
        e.busBytes = bytes;
      }
      return e;
    }
    case Algo::Tree: {
      if (coll != Coll::AllReduce) return e;
      // Depth: one host: the double binary tree over its ranks; several:
      // each host's chain, and per host level a network hop plus at most
      // one hop inside the host (a second child host hangs off the chain's
      // second rank).
      const int levels = H > 1 ? ceilLog2(H) : 0;
      const int intraHops = H > 1 ? (G - 1) + (G > 1 ? levels : 0) : ceilLog2(n);
      e.applies = true;
      e.latencyUs = 2.0 * (intraHops * intraHop + levels * netHop);
      e.busBytes = 2.0 * bytes;
      e.busGBs = ringBw * kTreeBandwidthShare;
      return e;
    }
    case Algo::Pat: {
      if (G != 1 || H < 2) return e;
      const int rounds = ceilLog2(n);
      const double share = (double)(n - 1) / n * bytes;
      e.busGBs = netBw;
      if (coll == Coll::AllGather || coll == Coll::ReduceScatter) {
        e.applies = true;
        e.latencyUs = rounds * netHop;
        e.busBytes = share;
      } else if (coll == Coll::AllReduce) {
        e.applies = true;
        e.latencyUs = 2.0 * rounds * netHop;
        e.busBytes = 2.0 * share;
      }
      return e;
    }
  }
  return e;
}

}  // namespace uniccl::topo
