#include "common/topo/host_ranks.h"

#include <algorithm>
#include <unordered_map>

namespace uniccl::topo {

HostRanks hostRanks(const std::vector<uint64_t>& hostHashes) {
  HostRanks out;
  const int n = (int)hostHashes.size();
  out.host.resize(n);
  out.localIndex.resize(n);
  std::unordered_map<uint64_t, int> indexOf;
  std::vector<int> count;
  for (int r = 0; r < n; r++) {
    auto it = indexOf.emplace(hostHashes[r], (int)count.size()).first;
    if (it->second == (int)count.size()) count.push_back(0);
    out.host[r] = it->second;
    out.localIndex[r] = count[it->second]++;
  }
  out.nHosts = (int)count.size();
  out.rowWidth = count.empty() ? 0 : *std::max_element(count.begin(), count.end());
  return out;
}

}  // namespace uniccl::topo
