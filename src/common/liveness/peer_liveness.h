// Dead-peer detection without the watchdog's timeout (a simpler cousin of
// NCCL's RAS). Every rank of a communicator keeps one TCP link to its ring
// successor and one from its ring predecessor; one process-wide monitor thread
// polls the links of all communicators:
//
//   - a link that closes or resets means its peer's process ended (kill -9,
//     crash, exit without destroying the communicator): seen at once;
//   - a link silent for the peer timeout (UNICCL_PEER_TIMEOUT; heartbeats go
//     every quarter of it) means a hung process or host, or a broken network;
//   - a rank that learns of a lost peer sends a notice (the lost rank) along
//     both of its links and every rank forwards the first notice of a rank
//     away from where it came, so the ring, broken only at the lost rank,
//     tells every survivor within one hop per rank.
//
// Orderly ends are not losses: stop(true) (ncclCommDestroy) says "leaving"
// before it closes; stop(false) (ncclCommAbort, a failed init) says
// "aborted", which the peers report as that rank gone (preceded by a notice
// of the rank its transport could not reach, when that was why).
//
// The links are made at init: the listener exists before the bootstrap (its
// address travels in the peer info), so a successor that refuses the
// connection is dead, not late; both sides prove the communicator's secret
// (auth.h, context "liveness-link") before a link counts, and the listener
// closes once the predecessor's link is up.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/util/auth.h"
#include "common/util/socket.h"
#include "uniccl.h"

namespace uniccl {

// What the monitor tells a link set's owner. Called on the monitor thread with
// the monitor's lock held (the owner may not be destroyed meanwhile): it must
// neither block nor log; the monitor logs `text` itself after the lock.
class PeerLossSink {
 public:
  virtual ~PeerLossSink() = default;
  // `rank` is gone; `first` is true for the first loss this link set reports;
  // `aborted`: it said it aborted (often because of another rank's loss,
  // which may be reported next).
  virtual void peerLost(int rank, const std::string& text, bool first, bool aborted) = 0;
};

class PeerLiveness {
 public:
  // Opens the listener the predecessor will connect to, on the interface the
  // bootstrap uses (NCCL_SOCKET_IFNAME).
  [[nodiscard]] static ncclResult_t create(std::unique_ptr<PeerLiveness>* out);
  ~PeerLiveness();   // stop(false) if still monitored
  PeerLiveness(const PeerLiveness&) = delete;
  PeerLiveness& operator=(const PeerLiveness&) = delete;

  // Where the predecessor connects (valid until link()).
  const SocketAddress& address() const { return listener_.address(); }

  // Connects to the successor's listener, accepts the predecessor, and proves
  // the secret both ways. Every wait ends at the deadline, at the abort flag,
  // or at once when the neighbour's process is gone. nranks >= 2.
  [[nodiscard]] ncclResult_t link(int rank, int nranks, const SocketAddress& successor, const AuthSecret& secret, Deadline deadline,
                    const std::atomic<uint32_t>* abortFlag);

  // Hands the links to the monitor thread (started with the first link set).
  // timeoutMs: silence that counts as a loss (0: only closed links count).
  // names[r] describes rank r in reports ("rank 3 (pid 123 on 10.0.0.5)").
  [[nodiscard]] ncclResult_t start(PeerLossSink* sink, int64_t timeoutMs, std::vector<std::string> names);

  // Takes the links from the monitor (on return the sink is no longer called),
  // says "leaving" (orderly) or "aborted" to both neighbours, closes them.
  // An abort because a transport could not reach rank `unreachable` (-1:
  // none) first says that rank is lost, so that the others learn the cause,
  // not only this rank's abort. Joins the thread when this was the last
  // monitored set. Idempotent.
  void stop(bool orderly, int unreachable = -1);

 private:
  friend class LivenessLoop;
  PeerLiveness() = default;

  // One link: its socket, the peer, and the monitor thread's bookkeeping.
  struct Link {
    Socket sock;
    int peer = -1;
    int64_t lastRecvMs = 0, lastSendMs = 0;
    unsigned char in[16];   // a partly received message
    size_t inBytes = 0;
    std::string out;        // bytes the socket did not take yet
  };

  Socket listener_;
  int rank_ = -1;
  int nranks_ = 0;
  Link links_[2];   // [0]: to the successor, [1]: from the predecessor
  // Set by start(), read and changed by the monitor thread under its lock.
  PeerLossSink* sink_ = nullptr;
  int64_t timeoutMs_ = 0;
  std::vector<std::string> names_;
  std::vector<uint8_t> gone_;   // ranks already reported
  bool reported_ = false;
  bool monitored_ = false;
};

// For tests and logs: link sets being monitored, and whether the thread runs.
struct LivenessStats {
  size_t sets = 0;
  bool threadRunning = false;
};
LivenessStats livenessStatsForTesting();

}  // namespace uniccl
