// Which ranks share a host, from every rank's host hash (the peer exchange).
// Init's per-host exchanges (the topology's GPU links, the transports' P2P
// reach) give each rank a row over the ranks of its own host only: a link
// or P2P reach exists only there, so rows over every rank would carry
// O(N^2) bytes where O(N x ranks per host) say the same. Every rank
// computes the same HostRanks from the same hashes, so the rows line up.
#pragma once

#include <cstdint>
#include <vector>

namespace uniccl::topo {

struct HostRanks {
  std::vector<int> host;         // [rank]: host index, in order of each host's first rank
  std::vector<int> localIndex;   // [rank]: its position among its host's ranks (in rank order)
  int rowWidth = 0;              // the most ranks any host has: the width of every per-host row
  int nHosts = 0;
  bool sameHost(int a, int b) const { return host[a] == host[b]; }
};

HostRanks hostRanks(const std::vector<uint64_t>& hostHashes);

}  // namespace uniccl::topo
