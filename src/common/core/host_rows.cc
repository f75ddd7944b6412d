#include "common/core/host_rows.h"

#include <cstring>

#include "common/bootstrap/bootstrap.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/comm_topology.h"
#include "common/core/comm_transport.h"
#include "common/transport/transport.h"

namespace uniccl {

ncclResult_t exchangeHostRows(ncclComm* comm, HostRows* out) {
  const int n = comm->nRanks;
  std::vector<uint64_t> hashes(n);
  for (int r = 0; r < n; r++) hashes[r] = comm->peers[r].hostHash;
  out->hosts = topo::hostRanks(hashes);
  // A topology from NCCL_TOPO_FILE needs no report; every rank sends one all
  // the same, so that the rows line up whatever each rank's file says.
  std::vector<char> report;
  std::vector<uint8_t> reach;
  UCHECK(topo::localReport(comm, out->hosts, &report));
  UCHECK(Transports::reachRow(transportComm(comm), transportPeers(comm), out->hosts, &reach));
  const size_t t = report.size(), w = reach.size(), row = t + w;
  std::vector<char> all(row * n);
  memcpy(&all[row * comm->rank], report.data(), t);
  if (w > 0) memcpy(&all[row * comm->rank + t], reach.data(), w);
  UCHECK(comm->bootstrap->allGather(all.data(), row));
  out->topologyBytes = t;
  out->topology.resize(t * n);
  out->reach.resize(w * n);
  for (int r = 0; r < n; r++) {
    memcpy(&out->topology[t * r], &all[row * r], t);
    if (w > 0) memcpy(&out->reach[w * r], &all[row * r + t], w);
  }
  return ncclSuccess;
}

}  // namespace uniccl
