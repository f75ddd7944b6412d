// Fd sockets (util/fd_passing.h) between ranks of one communicator: names
// other processes cannot guess, auth.h's challenge-response on every
// connection, and a listener loop that serves many connections at once.
//
// An abstract Unix socket name is visible to every process of the host once
// bound (/proc/net/unix), and anyone may bind a free one first. A name
// derived from the communicator's secret cannot be taken in advance, and a
// process that finds the listener still has to prove the secret before the
// listener reads anything else from it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/util/auth.h"
#include "common/util/fd_passing.h"
#include "uniccl.h"

namespace uniccl {

// "uniccl-<kind>-" + 32 hex digits of deriveFromSecret(secret, label). The
// label must tell apart every listener that may exist at once (communicator
// hash, rank, sequence number).
std::string secretSocketName(const AuthSecret& secret, const char* kind, const std::string& label);

// The connector's side of the exchange, right after FdSocket::connect and
// before anything else is sent. ncclRemoteError (with a WARN naming `what`)
// when the listener does not prove the secret.
[[nodiscard]] ncclResult_t authenticateFdConnector(const FdSocket& sock, const AuthSecret& secret, const char* context,
                                     Deadline deadline, const std::atomic<uint32_t>* abortFlag, const char* what);

// Serves one listener from one thread with poll: accepts every connection,
// challenges it at once, and shows its owner only connections that proved
// the secret. State is bounded: at most `maxConns` connections; when full,
// a newcomer replaces the oldest connection still unauthenticated (else it
// waits in the listener's backlog until a slot frees). Each connection is
// closed when `connMs` have passed since its accept, so a client that
// stalls holds a slot, never the loop.
class FdAuthServer {
 public:
  struct Conn {
    FdSocket sock;
    Deadline deadline;
    bool authenticated = false;
    AuthChallenge challenge{};
    int stage = 0;               // the owner's: where the connection is in its protocol
    std::vector<char> saved;     // the owner's: what it keeps between messages
  };
  // Called for an authenticated connection that has input (or was closed by
  // its peer: the receive then fails); returns false to close it.
  using OnReadable = std::function<bool(Conn&)>;

  FdAuthServer(const FdSocket* listener, const AuthSecret& secret, const char* context, size_t maxConns,
               int64_t connMs, const char* what);
  // Waits up to waitMs for events and handles them. Never throws out of a
  // connection's handling: a failure closes that connection.
  void step(int waitMs, const OnReadable& onReadable);
  size_t connections() const { return conns_.size(); }

 private:
  void acceptAll();
  bool admit(FdSocket sock);
  bool advanceAuth(Conn& c);

  const FdSocket* listener_;
  AuthSecret secret_;
  const char* context_;
  size_t maxConns_;
  int64_t connMs_;
  const char* what_;
  Deadline listenerPausedUntil_{};
  std::vector<std::unique_ptr<Conn>> conns_;
};

}  // namespace uniccl
