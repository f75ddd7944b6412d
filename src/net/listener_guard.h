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
// acceptPending() is that loop, once for both transports; each supplies only
// what one pending connection of its own wire does next.
//
// The bootstrap's listeners (common/bootstrap/listener_loop.h) bound their
// connections by the same rules but keep their own loop, because they are
// driven the other way round: each owns a thread that sleeps in poll() on the
// listener and every pending socket and hands a proven connection to a
// handler, sizes its table from RLIMIT_NOFILE, and pauses accepting for a
// while when no fd can be freed. A net listener has no thread of its own:
// the caller of the net API's non-blocking accept() calls it again and
// again, so one call takes only what waits, steps each connection once and
// returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/util/auth.h"
#include "common/util/debug.h"
#include "common/util/socket.h"
#include "net/net.h"

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
  const char* net() const { return net_; }

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
template <typename Stage>
std::unique_ptr<Stage> takeOldestUnproven(std::vector<std::unique_ptr<Stage>>& pending) {
  for (auto it = pending.begin(); it != pending.end(); ++it) {
    if (!(*it)->proven) {
      std::unique_ptr<Stage> p = std::move(*it);
      pending.erase(it);
      return p;
    }
  }
  return nullptr;
}

// What one step of a pending connection left it in.
enum class PendingStep {
  kWait,     // needs more from the peer: stays pending
  kDone,     // settled: the transport took what it needed from it
  kDropped,  // refused or given up (the step said why): its socket closes
};

namespace detail {
// One step of `st`; the loop's own rule on top: a connection still without
// its proof after its deadline is dropped as silent.
template <typename Stage, typename Step>
ncclResult_t stepPending(Stage& st, Step& step, RefusalLog& refusals, const SocketAddress& here,
                         PendingStep* out) {
  ncclResult_t res = step(st, out);
  if (res != ncclSuccess) return res;
  if (*out == PendingStep::kWait && !st.proven && Clock::now() > st.deadline) {
    refusals.note(Refusal::kSilent, st.sock.address(), here);
    *out = PendingStep::kDropped;
  }
  return ncclSuccess;
}
}  // namespace detail

// One accept() call of a net listener: takes up to kMaxAcceptsPerCall
// newcomers from the backlog, then steps every pending connection once.
//
// Stage is the transport's record of a pending connection, with at least
// `Socket sock`, `Deadline deadline` (set here: UNICCL_NET_CONNECT_TIMEOUT_MS
// from the accept) and `bool proven` (set by the step once the peer proved
// the key). step(Stage&, PendingStep*) does what the connection allows
// without blocking; it returns an error only for a failure of the proven
// peer, which ends this call (the stage is dropped, the rest wait for the
// next call). Everything an unproven peer does ends in a drop, never an
// error: only a broken listening socket is the listener's own error.
template <typename Stage, typename Step>
ncclResult_t acceptPending(const Socket& listener, std::vector<std::unique_ptr<Stage>>& pending,
                           RefusalLog& refusals, Step step) {
  const SocketAddress& here = listener.address();
  for (int taken = 0; taken < kMaxAcceptsPerCall; taken++) {
    Socket sock;
    int err = 0;
    AcceptResult got = acceptOne(listener, &sock, &err);
    if (got == AcceptResult::kNone) break;
    if (got == AcceptResult::kNoFds) {
      // The connection stays in the backlog; freeing one fd lets a later call take it.
      if (!connectionWaiting(listener)) break;
      refusals.note(Refusal::kNoFds, emptySocketAddress(), here, strerror(err));
      if (auto old = takeOldestUnproven(pending)) refusals.note(Refusal::kEvicted, old->sock.address(), here);
      break;
    }
    if (got == AcceptResult::kFailed) {
      WARN("NET/%s: accept on %s failed: %s", refusals.net(), here.toString().c_str(), strerror(err));
      return ncclSystemError;
    }
    auto st = std::make_unique<Stage>();
    st->sock = std::move(sock);
    st->deadline = deadlineAfterMs(netConnectTimeoutMs());
    // A real peer's proof is usually here already: settled at once, it takes no room.
    PendingStep now = PendingStep::kWait;
    ncclResult_t res = detail::stepPending(*st, step, refusals, here, &now);
    if (res != ncclSuccess) return res;
    if (now != PendingStep::kWait) continue;
    if (pending.size() >= kMaxPendingConnections) {
      auto old = takeOldestUnproven(pending);
      if (old == nullptr) old = std::move(st);  // all proven (cannot be many): the newcomer goes
      refusals.note(Refusal::kEvicted, old->sock.address(), here);
      if (st == nullptr) continue;
    }
    pending.push_back(std::move(st));
  }
  for (size_t i = 0; i < pending.size();) {
    PendingStep now = PendingStep::kWait;
    ncclResult_t res = detail::stepPending(*pending[i], step, refusals, here, &now);
    if (res == ncclSuccess && now == PendingStep::kWait) {
      i++;
      continue;
    }
    pending.erase(pending.begin() + i);
    if (res != ncclSuccess) return res;
  }
  return ncclSuccess;
}

}  // namespace uniccl
