#include "common/core/comm_symmetric.h"

#include "common/core/comm.h"
#include "common/core/comm_lsa.h"

namespace uniccl {

WindowComm windowComm(ncclComm* comm) {
  WindowComm w;
  w.rank = comm->rank;
  w.nRanks = comm->nRanks;
  w.gpuDev = comm->gpuDev;
  w.commHash = comm->commHash;
  w.bootstrap = comm->bootstrap.get();
  w.processHash.reserve(comm->peers.size());
  for (const PeerInfo& p : comm->peers) w.processHash.push_back(p.processHash);
  w.hostAbort = &comm->hostAbort;
  w.lsa = lsaPlace(comm);
  w.state = &comm->symmetric;
  w.devCommHost = &comm->devCommHost;
  w.devComm = comm->devComm;
  return w;
}

}  // namespace uniccl
