#include "common/core/comm_transport.h"

#include <atomic>
#include <string>

#include "common/core/comm.h"
#include "common/core/comm_liveness.h"

namespace uniccl {

namespace {

// The fields that need no hooks.
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

}  // namespace uniccl
