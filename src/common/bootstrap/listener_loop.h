// The event loop shared by the bootstrap's listeners (the root, each rank's
// link listener): it accepts connections, runs the challenge-response of
// handshake.h on each without blocking, and hands a connection to its owner
// only once the peer proved the communicator's secret.
//
// What a scanner, a flood or a slow sender can take is bounded:
// - at most `capacity` connections wait at once (sized from RLIMIT_NOFILE),
//   each a fixed ~200-byte state until it has proved the secret;
// - when the table is full, a newcomer evicts the OLDEST connection that has
//   not proved the secret yet (never one that has), so a flood cannot keep
//   a real rank out: the flood's own connections are the ones that go;
// - a connection must prove the secret within `authMs` of its accept and
//   send its first message within `identifyMs` of the proof;
// - accept running out of fds (EMFILE, ENFILE) evicts the oldest unproven
//   connection to free one, or pauses accepting briefly: never fatal.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/bootstrap/handshake.h"
#include "common/bootstrap/wire.h"
#include "common/util/socket.h"

namespace uniccl {
namespace bootstrap {

struct PendingConnection {
  Socket sock;
  AcceptorHandshake auth;
  Deadline deadline;
  // Filled by the owner's handler once the peer has proved the secret.
  WireHeader header{};
  size_t headerHave = 0;
  std::vector<char> body;
  size_t bodyHave = 0;
};

struct ListenerLimits {
  size_t capacity;     // connections waiting at once
  int64_t authMs;      // from accept to a proven secret
  int64_t identifyMs;  // from the proof to the end of the first message
};

// RLIMIT_NOFILE's soft limit / divisor, within [lo, hi]: a listener never
// holds more than a fraction of the fds the process may open.
size_t pendingCapacity(size_t divisor, size_t lo, size_t hi);

class ListenerLoop {
 public:
  // Reads from a connection that proved the secret. Returns true to be
  // called again when it is readable, false when done with it (moved its
  // socket elsewhere, or dropped it: the loop closes what is left).
  using Handler = std::function<bool(PendingConnection&)>;

  // `listener` must be a listening, non-blocking socket that outlives this.
  ListenerLoop(Socket* listener, const AuthSecret& secret, const char* context, std::string who,
               ListenerLimits limits, Handler afterAuth);

  // One round: waits up to waitMs for activity on the listener, on the
  // waiting connections and on `extra` (whose revents it fills in), then
  // advances every connection that is ready, drops the expired ones and
  // accepts newcomers.
  void round(std::vector<pollfd>* extra, int waitMs);

  size_t pendingCount() const { return pending_.size(); }
  void clear() { pending_.clear(); }

 private:
  // False when done with the connection.
  bool advance(PendingConnection& p);
  void acceptBatch();
  bool evictOldestUnproven();

  Socket* listener_;
  AuthSecret secret_;
  const char* context_;
  std::string who_;
  ListenerLimits limits_;
  Handler afterAuth_;
  std::vector<std::unique_ptr<PendingConnection>> pending_;  // in accept order
  std::vector<pollfd> fds_;
  Deadline acceptPausedUntil_{};
  uint64_t evicted_ = 0, refused_ = 0, fdShortages_ = 0;
};

}  // namespace bootstrap
}  // namespace uniccl
