#include "common/topo/nics.h"

#include <climits>

namespace uniccl::topo {

int entryRank(const System& sys, const std::vector<int>& ring, int h, int channel) {
  const int n = (int)ring.size();
  if (sys.nHosts() <= 1) return n > 0 ? ring[channel % n] : -1;
  for (int i = 0; i < n; i++) {
    const int r = ring[i], prev = ring[(i + n - 1) % n];
    if (sys.ranks[r].host == h && sys.ranks[prev].host != h) return r;
  }
  return -1;
}

std::vector<std::vector<int>> assignNics(const System& sys, const std::vector<std::vector<int>>& rings) {
  const int nc = (int)rings.size(), nh = sys.nHosts();
  std::vector<std::vector<int>> out(nc, std::vector<int>(nh, -1));
  for (int h = 0; h < nh; h++) {
    const Host& host = sys.hosts[h];
    std::vector<int> uses(host.nics.size(), 0);
    for (int c = 0; c < nc; c++) {
      const int entry = entryRank(sys, rings[c], h, c);
      if (entry < 0 || host.nics.empty()) continue;
      const int gpu = sys.ranks[entry].gpu;
      int best = -1, bestDist = INT_MAX;
      for (int k = 0; k < (int)host.nics.size(); k++) {
        const int d = host.nics[k].distance[gpu];
        const int dist = d < 0 ? INT_MAX - 1 : d;   // unknown: farther than any known
        if (best < 0 || dist < bestDist || (dist == bestDist && uses[k] < uses[best])) {
          best = k;
          bestDist = dist;
        }
      }
      out[c][h] = best;
      uses[best]++;
    }
  }
  return out;
}

}  // namespace uniccl::topo

namespace uniccl::topo {

std::vector<ChannelNic> channelNicsOfRank(const System& sys, const std::vector<std::vector<int>>& nics, int rank) {
  std::vector<ChannelNic> out(nics.size());
  if (rank < 0 || rank >= sys.nRanks()) return out;
  const int h = sys.ranks[rank].host;
  for (size_t c = 0; c < nics.size(); c++) {
    const int k = h < (int)nics[c].size() ? nics[c][h] : -1;
    if (k < 0 || k >= (int)sys.hosts[h].nics.size()) continue;
    out[c].index = k;
    out[c].name = sys.hosts[h].nics[k].name;
  }
  return out;
}

}  // namespace uniccl::topo
