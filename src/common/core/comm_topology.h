// The communicator's topology at init: from NCCL_TOPO_FILE, or discovered
// (host identity from the peer exchange, GPU links from the backend, NICs
// from sysfs, exchanged once through the bootstrap with the transports'
// reach: core/host_rows.h), and written to NCCL_TOPO_DUMP_FILE on request.
#pragma once

#include <cstddef>
#include <vector>

#include "common/core/peer_info.h"
#include "common/topo/host_ranks.h"
#include "common/topo/system.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl::topo {

// Before the peer exchange: when NCCL_TOPO_FILE places exactly nRanks ranks,
// *fromFile is that topology and this rank's host identity in `info` becomes
// the file's host for it (so that transports treat the file's hosts as
// machines). Otherwise *fromFile stays empty. A file that cannot be read or
// parsed fails the init; NCCL's XML format is ignored with a WARN.
[[nodiscard]] ncclResult_t placeFromFile(int rank, int nRanks, PeerInfo* info, System* fromFile);

// This rank's topology report for init's exchange of host rows
// (core/host_rows.h): its NICs and the link from its GPU to the GPU of each
// rank of its host (hosts: which ranks share a host). Every rank's report
// has the same size.
[[nodiscard]] ncclResult_t localReport(ncclComm* comm, const HostRanks& hosts, std::vector<char>* row);

// After that exchange: `sys` is kept when it places every rank (from the
// file), otherwise it is discovered from every rank's report (reports:
// [nRanks][rowBytes], as localReport made them). Rank 0 writes it to
// NCCL_TOPO_DUMP_FILE when that is set.
[[nodiscard]] ncclResult_t buildTopology(ncclComm* comm, const HostRanks& hosts, const std::vector<char>& reports,
                                         size_t rowBytes, System* sys);

}  // namespace uniccl::topo
