#include "common/core/comm_transport.h"

#include <atomic>
#include <cstring>
#include <string>
#include <utility>

#include "common/core/comm.h"
#include "common/core/comm_liveness.h"

namespace uniccl {

namespace {

// The fields that need no hooks: what readTraffic reads, and the base of transportComm.
TransportComm plainTransportComm(const ncclComm* comm) {
  TransportComm t;
  t.rank = comm->rank;
  t.nRanks = comm->nRanks;
  t.gpuDev = comm->gpuDev;
  t.bootstrap = comm->bootstrap.get();
  t.netName = comm->config.netName;
  t.nChannels = comm->nChannels;
  t.channelsHost = comm->channelsHost;
  t.profiler = comm->profiler.get();
  return t;
}

}  // namespace

TransportComm transportComm(ncclComm* comm) {
  TransportComm t = plainTransportComm(comm);
  t.aborted = [comm] { return comm->hostAbort.load(std::memory_order_acquire) != 0; };
  t.peerUnreachable = [comm](int peer, const std::string& text) { commLivenessTransportLoss(comm, peer, text); };
  // Proxy thread: fail the communicator as a timeout would, so kernels
  // waiting on the peer exit and ncclCommGetAsyncError reports it.
  t.failed = [comm](int peer, ncclResult_t result, const std::string& text) {
    commLivenessTransportLoss(comm, peer, text);   // ncclCommGetAsyncError's last error names the peer
    int expected = ncclSuccess;
    comm->asyncError.compare_exchange_strong(expected, result == ncclSuccess ? ncclRemoteError : result,
                                             std::memory_order_acq_rel);
    comm->hostAbort.store(1, std::memory_order_release);
    if (comm->abortFlagHost != nullptr) __atomic_store_n(comm->abortFlagHost, 1u, __ATOMIC_RELEASE);
  };
  return t;
}

std::vector<TransportPeer> transportPeers(const ncclComm* comm) {
  std::vector<TransportPeer> out;
  out.reserve(comm->peers.size());
  for (const PeerInfo& p : comm->peers) {
    TransportPeer t;
    t.hostHash = p.hostHash;
    t.processHash = p.processHash;
    t.gpuDev = p.gpuDev;
    t.busIdNum = p.busIdNum;
    t.busId.assign(p.busId, strnlen(p.busId, sizeof(p.busId)));
    t.lineStoreAtomic128 = p.lineStoreAtomic128 != 0;
    out.push_back(std::move(t));
  }
  return out;
}

TransportKind transportBetween(const ncclComm* comm, int a, int b) {
  // Reach first: hand-built test comms without peer infos reach every peer.
  if (comm->transports.p2pReachable(a, b)) return TransportKind::P2p;
  return comm->transports.kindBetween(a, b, comm->peers[a].hostHash == comm->peers[b].hostHash);
}

ncclResult_t readTraffic(const ncclComm* comm, Traffic* out) {
  return comm->transports.readTraffic(plainTransportComm(comm), out);
}

}  // namespace uniccl
