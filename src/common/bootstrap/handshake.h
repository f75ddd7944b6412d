// Every bootstrap connection (rank -> root, rank -> rank) opens with the
// challenge-response of common/util/auth.h over the communicator's secret,
// before any bootstrap message is read. This file holds both ends:
//
// - AcceptorHandshake: the listener's side as a small fixed-size state
//   machine, for event loops that serve many connections without blocking
//   (the root, a rank's link listener). Nothing a peer sends before it has
//   proved the secret is allocated or interpreted beyond these 48 bytes.
// - connectAuthenticated: the connector's side, blocking, with retries.
//
// A listener that refuses a proof answers with an all-zero AuthConfirm before
// closing (no HMAC output is all zero in practice), so a real rank with the
// wrong id learns that it was refused, instead of "connection closed". A
// listener under a flood may drop a connection before it read the proof (its
// pending table is full, listener_loop.h): the connector then simply
// reconnects, until its deadline.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/util/auth.h"
#include "common/util/socket.h"

namespace uniccl {
namespace bootstrap {

// auth.h contexts: a proof made for one use is refused by the other.
constexpr const char* kRootAuthContext = "bootstrap-root";
constexpr const char* kLinkAuthContext = "bootstrap-link";

class AcceptorHandshake {
 public:
  enum class Step {
    kBusy,     // waiting for the peer (wantsWrite() says in which direction)
    kDone,     // the peer proved the secret and got our proof
    kRefused,  // wrong proof: a refusal was sent (best effort); close it
    kClosed,   // the peer closed or the socket failed (*err: errno or 0)
  };
  // Makes the challenge (false: the kernel gave no random bytes).
  bool begin();
  // Moves as far as the socket allows without blocking.
  Step progress(Socket& sock, const AuthSecret& secret, const char* context, int* err);
  bool done() const { return phase_ == kFinished; }
  bool wantsWrite() const { return phase_ == kSendChallenge || phase_ == kSendConfirm; }
  // The peer has sent part of a response (for the log: a port scanner sends nothing).
  bool peerSpoke() const { return phase_ > kReadResponse || (phase_ == kReadResponse && have_ > 0); }

 private:
  enum Phase : uint8_t { kSendChallenge, kReadResponse, kSendConfirm, kFinished };
  Phase phase_ = kSendChallenge;
  uint8_t have_ = 0;  // bytes of the current message moved
  AuthChallenge challenge_;
  AuthResponse response_;
  AuthConfirm confirm_;
};

// The confirm a listener sends instead of its proof when it refuses the peer's.
AuthConfirm refusalConfirm();
bool isRefusal(const AuthConfirm& confirm);

// Connects to `addr` and proves the secret under `context` (and checks the
// listener's proof). Connections the listener drops before the exchange ends
// are retried until the deadline. Errors (WARN naming `what`):
// ncclInvalidUsage when the listener refuses this process's proof (it serves
// another communicator: a different unique id or UNICCL_COMM_SECRET),
// ncclRemoteError when it is not a uniccl listener, fails its own proof, or
// does not answer in time; ncclInternalError on abort.
[[nodiscard]] ncclResult_t connectAuthenticated(Socket* out, const SocketAddress& addr, const AuthSecret& secret,
                                  const char* context, Deadline deadline, const std::atomic<uint32_t>* abortFlag,
                                  const char* what);

}  // namespace bootstrap
}  // namespace uniccl
