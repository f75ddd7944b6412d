// Init's exchange of what each rank knows about its own host: its topology
// report (comm_topology.h: NICs, GPU links) and its P2P reach row
// (Transports::reachRow), both over the ranks of its host only
// (topo/host_ranks.h), in one bootstrap allgather: O(N x ranks per host)
// bytes per rank, and one ring of N - 1 steps for both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/topo/host_ranks.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

struct HostRows {
  topo::HostRanks hosts;            // which ranks share a host (from the peer infos)
  std::vector<char> topology;       // [nRanks][topologyBytes]: every rank's topology report
  size_t topologyBytes = 0;
  std::vector<uint8_t> reach;       // [nRanks][hosts.rowWidth]: every rank's reach row
};

// After the peer-info exchange; every rank calls it once.
[[nodiscard]] ncclResult_t exchangeHostRows(ncclComm* comm, HostRows* out);

}  // namespace uniccl
