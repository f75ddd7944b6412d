// A communicator's dead-peer reporting (peer_liveness.h applied to ncclComm):
// a lost ring neighbour, or a loss a neighbour reports, sets the async error
// (ncclRemoteError; ncclCommGetAsyncError's last error names the rank, its
// pid and host) and raises the abort flags the way the watchdog does, so
// blocked host waits and spinning kernels end. During init only the host
// abort is raised (init then fails naming the lost rank); a loss that comes
// after the init's last wait is applied when the init completes.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/liveness/peer_liveness.h"
#include "common/util/socket_address.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// ncclComm::liveness: the links and what the monitor reported.
struct CommLiveness final : PeerLossSink {
  explicit CommLiveness(ncclComm* c) : comm(c) {}
  // Monitor thread, monitor lock held: no logging, no blocking.
  void peerLost(int rank, const std::string& text, bool first) override;
  // The async error and the device abort flag (both exist once init finished). mu held.
  void applyLocked();

  ncclComm* const comm;
  std::unique_ptr<PeerLiveness> links;
  std::mutex mu;
  bool ready = false;   // the init finished
  std::string loss;     // the first lost peer's report
  int unreachable = -1;  // the first rank a transport could not reach
};

// UNICCL_PEER_TIMEOUT in milliseconds (0: only closed links count).
int64_t peerTimeoutMsFromEnv();

// Before the bootstrap, for nRanks > 1: the listener of this rank's liveness
// link; *addr goes into its peer info (empty address with one rank).
ncclResult_t commLivenessListen(ncclComm* comm, SocketAddress* addr);
// After the bootstrap: the links to the ring neighbours (their addresses come
// from the peer infos), handed to the monitor.
ncclResult_t commLivenessLink(ncclComm* comm);
// The init finished (state Ready, async error ncclSuccess).
void commLivenessReady(ncclComm* comm);
// The first lost peer's report; "" when none.
std::string commLivenessLoss(ncclComm* comm);
// A transport could not reach rank `peer` (a send to it failed; the caller
// raised the async error): `text`, which names it, is the loss until the
// links report theirs (with its pid and host), and this rank's abort tells
// the others that rank is lost before it says it aborted.
void commLivenessTransportLoss(ncclComm* comm, int peer, const std::string& text);
// Destroy (orderly) or abort: the neighbours hear which; the links close.
void commLivenessStop(ncclComm* comm, bool orderly);

}  // namespace uniccl
