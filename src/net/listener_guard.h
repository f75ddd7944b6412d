// What the Socket and IB listeners share to accept only the peer that holds
// their handle, and to survive port scanners, floods and fd exhaustion.
//
// Authentication (auth.h's challenge-response, context "net-socket" /
// "net-ib"): listen() draws a random key and a challenge for the listener and
// writes both into the handle, which the core hands to the one peer that may
// connect over the authenticated bootstrap. The connector opens every socket
// with its answer to that challenge (makeResponse: a fresh nonce and a proof
// of the key); the listener checks it (checkResponse) before it reads
// anything else or allocates anything for the connection, and proves the key
// back (makeConfirm), which the connector checks before any data leaves.
// The challenge travels in the handle, not on the socket, because the net API
// lets connect() finish before the peer calls accept(): the core connects all
// its send sides before it accepts, so a connector that waited for a challenge
// sent by accept() would deadlock two ranks that connect to each other. Key
// and challenge are new for every listen() and each socket's connector nonce
// is new, so nothing recorded from one connection opens another listener.
//
// Survival: before its proof, a connection costs the listener an fd and a
// fixed-size record; at most kMaxPendingConnections such records exist per
// listener (the oldest unproven is dropped to make room, so a flood cannot
// keep the real peer out), each lives at most UNICCL_NET_CONNECT_TIMEOUT_MS,
// and one accept() call takes at most kMaxAcceptsPerCall connections, so it
// returns quickly. A connection that closes, stays silent or fails its proof
// is dropped and accept() goes on: none of that is an error of the listener.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/util/auth.h"
#include "common/util/socket.h"

namespace uniccl {

constexpr size_t kMaxPendingConnections = 256;
constexpr int kMaxAcceptsPerCall = 256;

// Written into the handle by listen(); the connector answers `challenge` with `key`.
struct ListenerSecret {
  AuthSecret key;
  AuthChallenge challenge;
};
ncclResult_t newListenerSecret(ListenerSecret* out);

enum class Refusal {
  kClosed,    // closed or reset before its proof
  kSilent,    // no proof within the deadline
  kBadProof,  // a proof of another key, or garbage
  kEvicted,   // dropped unproven to make room for newer connections
  kNoFds,     // the process is out of file descriptors: left in the backlog
  kCount
};

// Counts what a listener refused and logs it without letting a scanner or a
// flood fill the log: the first wrong proof and the first fd exhaustion are
// WARNed (a misconfigured peer, a process short of fds), the first of every
// other kind is INFO; the totals are logged when the listener closes.
class RefusalLog {
 public:
  explicit RefusalLog(const char* net) : net_(net) {}
  RefusalLog(const RefusalLog&) = delete;
  RefusalLog& operator=(const RefusalLog&) = delete;
  void note(Refusal why, const SocketAddress& peer, const SocketAddress& listener, const std::string& detail = {});
  void summary(const SocketAddress& listener) const;
  uint64_t count(Refusal why) const { return counts_[(int)why]; }

 private:
  const char* net_;
  uint64_t counts_[(int)Refusal::kCount] = {};
};

enum class AcceptResult { kAccepted, kNone, kNoFds, kFailed };

// One non-blocking accept4 (TCP_NODELAY set). kNone: nothing waiting (or a
// connection that was reset before it could be taken); kNoFds: EMFILE, ENFILE,
// ENOBUFS or ENOMEM, the connection stays in the backlog; kFailed: the
// listening socket itself is broken (*err holds errno).
AcceptResult acceptOne(const Socket& listener, Socket* out, int* err);

// Whether a connection waits in the listener's backlog (accept4 reports
// EMFILE whether or not one does: only then is a pending one worth dropping).
bool connectionWaiting(const Socket& listener);

// Takes out the oldest connection that has not proven the key yet (records
// are kept in arrival order); null when every pending one has.
template <typename Pending, typename Proven>
std::unique_ptr<Pending> takeOldestUnproven(std::vector<std::unique_ptr<Pending>>& pending, Proven proven) {
  for (auto it = pending.begin(); it != pending.end(); ++it) {
    if (!proven(**it)) {
      std::unique_ptr<Pending> p = std::move(*it);
      pending.erase(it);
      return p;
    }
  }
  return nullptr;
}

}  // namespace uniccl
