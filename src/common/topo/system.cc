#include "common/topo/system.h"

#include <algorithm>

namespace uniccl::topo {

namespace {
constexpr const char* kLinkNames[] = {"none", "pcie", "direct", "switch", "self"};
}  // namespace

const char* linkClassName(LinkClass c) {
  const int i = (int)c;
  return i >= 0 && i < (int)(sizeof(kLinkNames) / sizeof(kLinkNames[0])) ? kLinkNames[i] : "?";
}

bool parseLinkClass(const std::string& name, LinkClass* out) {
  for (int i = 0; i < (int)(sizeof(kLinkNames) / sizeof(kLinkNames[0])); i++) {
    if (name == kLinkNames[i]) {
      *out = (LinkClass)i;
      return true;
    }
  }
  return false;
}

bool Host::directMesh() const {
  const int g = gpuCount();
  if (g < 3) return false;
  for (int a = 0; a < g; a++)
    for (int b = 0; b < g; b++)
      if (a != b && link(a, b).cls != LinkClass::Direct) return false;
  return true;
}

std::vector<int> System::hostRanks(int h) const {
  std::vector<int> out;
  for (int r = 0; r < nRanks(); r++)
    if (ranks[r].host == h) out.push_back(r);
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) { return ranks[a].gpu < ranks[b].gpu; });
  return out;
}

std::vector<std::vector<int>> System::ranksByHost() const {
  std::vector<std::vector<int>> out(hosts.size());
  for (int r = 0; r < nRanks(); r++) out[ranks[r].host].push_back(r);
  for (std::vector<int>& v : out)
    std::stable_sort(v.begin(), v.end(), [&](int a, int b) { return ranks[a].gpu < ranks[b].gpu; });
  return out;
}

std::string System::check() const {
  if (ranks.empty()) return "no rank";
  for (int h = 0; h < nHosts(); h++) {
    const Host& host = hosts[h];
    const size_t g = host.gpus.size();
    if (host.links.size() != g * g)
      return "host " + host.name + ": link table of " + std::to_string(host.links.size()) + " entries for " +
             std::to_string(g) + " GPUs";
    for (const Nic& nic : host.nics)
      if (nic.distance.size() != g)
        return "host " + host.name + ": NIC " + nic.name + " has " + std::to_string(nic.distance.size()) +
               " GPU distances for " + std::to_string(g) + " GPUs";
  }
  std::vector<bool> used(hosts.size(), false);
  for (int r = 0; r < nRanks(); r++) {
    const RankPlace& p = ranks[r];
    if (p.host < 0 || p.host >= nHosts()) return "rank " + std::to_string(r) + " is on no host";
    if (p.gpu < 0 || p.gpu >= hosts[p.host].gpuCount())
      return "rank " + std::to_string(r) + " is on GPU " + std::to_string(p.gpu) + " of host " + hosts[p.host].name +
             ", which has " + std::to_string(hosts[p.host].gpuCount());
    used[p.host] = true;
  }
  for (int h = 0; h < nHosts(); h++)
    if (!used[h]) return "host " + hosts[h].name + " has no rank";
  return "";
}

std::vector<int> hostOrder(const System& sys) {
  std::vector<int> first(sys.nHosts(), sys.nRanks());
  for (int r = sys.nRanks() - 1; r >= 0; r--) first[sys.ranks[r].host] = r;
  std::vector<int> order(sys.nHosts());
  for (int h = 0; h < sys.nHosts(); h++) order[h] = h;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return first[a] < first[b]; });
  return order;
}

}  // namespace uniccl::topo
