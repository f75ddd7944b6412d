// A communicator's dead-peer reporting (liveness/peer_liveness.h applied to ncclComm):
// a lost ring neighbour, or a loss a neighbour reports, sets the async error
// (ncclRemoteError; ncclCommGetAsyncError's last error names the rank, its
// pid and host) and raises the abort flags the way the watchdog does, so
// blocked host waits and spinning kernels end. During init only the host
// abort is raised (init then fails naming the lost rank); a loss that comes
// after the init's last wait is applied when the init completes.
#pragma once

#include <condition_variable>
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
  void peerLost(int rank, const std::string& text, bool first, bool aborted) override;
  // The async error and the device abort flag (both exist once init finished). mu held.
  void applyLocked();

  ncclComm* const comm;
  std::unique_ptr<PeerLiveness> links;
  std::mutex mu;
  std::condition_variable reported;  // a report of the links came
  bool ready = false;   // the init finished
  // The report that says why: the links' first report of a rank that is
  // gone once one came (a rank that aborted is often a consequence), else
  // their first report, else a transport's.
  std::string loss;
  bool linksReported = false;
  bool goneReported = false;   // the links reported a rank gone, not only aborting
  int unreachable = -1;  // a rank a transport could not reach before the links reported anything
};

// UNICCL_PEER_TIMEOUT in milliseconds (0: only closed links count).
int64_t peerTimeoutMsFromEnv();

// Before the bootstrap, for nRanks > 1: the listener of this rank's liveness
// link; *addr goes into its peer info (empty address with one rank).
[[nodiscard]] ncclResult_t commLivenessListen(ncclComm* comm, SocketAddress* addr);
// After the bootstrap: the links to the ring neighbours (their addresses come
// from the peer infos), handed to the monitor.
[[nodiscard]] ncclResult_t commLivenessLink(ncclComm* comm);
// The init finished (state Ready, async error ncclSuccess).
void commLivenessReady(ncclComm* comm);
// Why the communicator lost a peer (CommLiveness::loss); "" when nothing
// was lost. With `settleMs`, when nothing names a rank that is gone yet
// (only a transport's failure, or a rank that aborted), waits up to that
// long for the links to report one: a peer that failed a handshake or
// aborted may have done so because another rank died, and the links see
// every death at once.
std::string commLivenessLoss(ncclComm* comm, int64_t settleMs = 0);
// A transport could not reach rank `peer` (a send to it failed; the caller
// raised the async error): `text`, which names it, is the loss until the
// links report theirs (with its pid and host), and this rank's abort tells
// the others that rank is lost before it says it aborted.
void commLivenessTransportLoss(ncclComm* comm, int peer, const std::string& text);
// Destroy (orderly) or abort: the neighbours hear which; the links close.
void commLivenessStop(ncclComm* comm, bool orderly);

}  // namespace uniccl
