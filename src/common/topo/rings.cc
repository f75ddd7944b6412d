#include "common/topo/rings.h"

namespace uniccl::topo {

namespace {

// The zig-zag through 2m vertices starting at i: i, i+1, i-1, i+2, i-2, ..., i+m (mod 2m).
std::vector<int> zigzag(int i, int twoM) {
  std::vector<int> out{i};
  for (int k = 1; (int)out.size() < twoM; k++) {
    out.push_back((i + k) % twoM);
    if ((int)out.size() < twoM) out.push_back(((i - k) % twoM + twoM) % twoM);
  }
  return out;
}

// A host's GPUs each hold exactly one of its ranks (the mesh cycles are over GPUs).
bool oneRankPerGpu(const System& sys, int h, const std::vector<int>& local) {
  if ((int)local.size() != sys.hosts[h].gpuCount()) return false;
  for (int i = 0; i < (int)local.size(); i++)
    if (sys.ranks[local[i]].gpu != i) return false;
  return true;
}

// The order in which channel c visits host h's ranks; `rotate`: start at
// the host's (c mod G)-th rank (several hosts), otherwise where the cycle starts.
std::vector<int> hostSequence(const System& sys, int h, const std::vector<int>& local, int c, bool rotate) {
  const int g = (int)local.size();
  std::vector<int> cycle(g);
  for (int i = 0; i < g; i++) cycle[i] = i;
  if (sys.hosts[h].directMesh() && oneRankPerGpu(sys, h, local)) {
    const std::vector<std::vector<int>> cycles = meshCycles(g);
    const int m = (int)cycles.size();
    // One host: channel c runs cycle c mod m, reversed on every other round
    // of m channels. Several hosts: the ring leaves the host before it closes
    // the cycle, so the edge into the entry GPU goes unused; the entry
    // changes with every channel (c mod g) while the cycle advances too, so
    // each cycle is walked from at least two entries (every edge used once
    // g channels have run), then reversed for the next g channels.
    const int k = rotate ? (c + c / g) % m : c % m;
    const bool reversed = rotate ? (c / g) % 2 == 1 : (c / m) % 2 == 1;
    cycle = cycles[k];
    if (reversed) {
      for (int i = 1, j = g - 1; i < j; i++, j--) std::swap(cycle[i], cycle[j]);   // same start, reversed
    }
  }
  int start = 0;
  if (rotate) {
    const int entry = c % g;
    while (cycle[start] != entry) start++;
  }
  std::vector<int> seq(g);
  for (int i = 0; i < g; i++) seq[i] = local[cycle[(start + i) % g]];
  return seq;
}

}  // namespace

std::vector<std::vector<int>> meshCycles(int g) {
  std::vector<std::vector<int>> out;
  if (g < 3) {
    std::vector<int> one(g > 0 ? g : 0);
    for (int i = 0; i < (int)one.size(); i++) one[i] = i;
    out.push_back(one);
    return out;
  }
  if (g % 2 == 0) {
    for (int i = 0; i < g / 2; i++) out.push_back(zigzag(i, g));
    return out;
  }
  // Odd g: vertex g-1 joins both ends of each zig-zag through the other g-1.
  for (int i = 0; i < (g - 1) / 2; i++) {
    std::vector<int> c{g - 1};
    for (int v : zigzag(i, g - 1)) c.push_back(v);
    out.push_back(c);
  }
  return out;
}

std::vector<int> buildRing(const System& sys, int channel) {
  const int n = sys.nRanks();
  std::vector<int> ring;
  ring.reserve(n);
  if (sys.nHosts() == 1 && !sys.hosts[0].directMesh()) {
    for (int r = 0; r < n; r++) ring.push_back(r);
    return ring;
  }
  const bool rotate = sys.nHosts() > 1;
  const std::vector<std::vector<int>> byHost = sys.ranksByHost();
  for (int h : hostOrder(sys))
    for (int r : hostSequence(sys, h, byHost[h], channel, rotate)) ring.push_back(r);
  return ring;
}

std::vector<std::vector<int>> buildRings(const System& sys, int nChannels) {
  std::vector<std::vector<int>> rings;
  rings.reserve(nChannels);
  for (int c = 0; c < nChannels; c++) rings.push_back(buildRing(sys, c));
  return rings;
}

}  // namespace uniccl::topo
