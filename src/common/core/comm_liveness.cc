#include "common/core/comm_liveness.h"

#include <vector>

#include "common/bootstrap/wire.h"
#include "common/core/comm.h"
#include "common/liveness/peer_liveness.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {

void CommLiveness::peerLost(int rank, const std::string& text, bool first, bool aborted) {
  (void)rank;
  std::lock_guard<std::mutex> lock(mu);
  if (first || (!aborted && !goneReported)) loss = text;
  goneReported = goneReported || !aborted;
  reported.notify_all();
  if (!first) return;   // the first loss already stopped the communicator
  linksReported = true;
  unreachable = -1;   // the links tell the others themselves
  comm->hostAbort.store(1, std::memory_order_release);
  if (ready) applyLocked();
}

void CommLiveness::applyLocked() {
  int expected = ncclSuccess;
  comm->asyncError.compare_exchange_strong(expected, ncclRemoteError, std::memory_order_acq_rel);
  comm->hostAbort.store(1, std::memory_order_release);
  if (comm->abortFlagHost != nullptr) __atomic_store_n(comm->abortFlagHost, 1u, __ATOMIC_RELEASE);
}

int64_t peerTimeoutMsFromEnv() {
  int64_t sec = knobInt(Knob::UNICCL_PEER_TIMEOUT);
  if (sec < 0) {
    WARN("UNICCL_PEER_TIMEOUT=%lld is negative; only closed connections count as lost peers (0 says so quietly)",
         (long long)sec);
    return 0;
  }
  if (sec > INT64_MAX / 4000) sec = INT64_MAX / 4000;
  return sec * 1000;
}

ncclResult_t commLivenessListen(ncclComm* comm, SocketAddress* addr) {
  *addr = emptySocketAddress();
  if (comm->nRanks < 2) return ncclSuccess;
  std::unique_ptr<CommLiveness> cl(new (std::nothrow) CommLiveness(comm));
  if (!cl) {
    WARN("Out of host memory for the liveness state of rank %d", comm->rank);
    return ncclSystemError;
  }
  ncclResult_t res = PeerLiveness::create(&cl->links);
  if (res != ncclSuccess) return res;
  *addr = cl->links->address();
  comm->liveness = std::move(cl);
  return ncclSuccess;
}

ncclResult_t commLivenessLink(ncclComm* comm) {
  CommLiveness* cl = comm->liveness.get();
  if (cl == nullptr) return ncclSuccess;
  const int next = (comm->rank + 1) % comm->nRanks;
  ncclResult_t res = cl->links->link(comm->rank, comm->nRanks, comm->peers[next].livenessListen,
                                     comm->bootstrap->secret(), deadlineAfterMs(bootstrap::timeoutMs()),
                                     &comm->hostAbort);
  if (res != ncclSuccess) return res;
  std::vector<std::string> names(comm->nRanks);
  for (int r = 0; r < comm->nRanks; r++)
    names[r] = "rank " + std::to_string(r) + " (pid " + std::to_string(comm->peers[r].pid) + " on " +
               comm->peers[r].livenessListen.toString(false) + ")";
  return cl->links->start(cl, peerTimeoutMsFromEnv(), std::move(names));
}

void commLivenessReady(ncclComm* comm) {
  CommLiveness* cl = comm->liveness.get();
  if (cl == nullptr) return;
  std::lock_guard<std::mutex> lock(cl->mu);
  cl->ready = true;
  if (!cl->loss.empty()) cl->applyLocked();
}

std::string commLivenessLoss(ncclComm* comm, int64_t settleMs) {
  CommLiveness* cl = comm->liveness.get();
  if (cl == nullptr) return std::string();
  std::unique_lock<std::mutex> lock(cl->mu);
  if (settleMs > 0 && !cl->loss.empty())
    cl->reported.wait_for(lock, std::chrono::milliseconds(settleMs), [cl] { return cl->goneReported; });
  return cl->loss;
}

void commLivenessTransportLoss(ncclComm* comm, int peer, const std::string& text) {
  CommLiveness* cl = comm->liveness.get();
  if (cl == nullptr) return;
  std::lock_guard<std::mutex> lock(cl->mu);
  if (cl->linksReported) return;
  if (cl->loss.empty()) cl->loss = text;
  if (cl->unreachable < 0) cl->unreachable = peer;
}

void commLivenessStop(ncclComm* comm, bool orderly) {
  CommLiveness* cl = comm->liveness.get();
  if (cl == nullptr) return;
  int unreachable;
  {
    std::lock_guard<std::mutex> lock(cl->mu);
    unreachable = cl->unreachable;
  }
  cl->links->stop(orderly, orderly ? -1 : unreachable);   // from here on peerLost is not called
}

}  // namespace uniccl
