// Making a rank's two liveness links (peer_liveness.h). The monitor thread
// (liveness_monitor.cc) takes them over in start().
#include "common/liveness/peer_liveness.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/liveness/liveness_wire.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

constexpr const char* kAuthContext = "liveness-link";
// A connection that is not the predecessor gets this long to prove itself
// before the next one is accepted (a scanner must not stall init for long).
constexpr int64_t kStrangerMs = 5000;

[[nodiscard]] ncclResult_t waitReady(int fd, short events, Deadline deadline, const std::atomic<uint32_t>* abortFlag) {
  for (;;) {
    if (abortFlag != nullptr && abortFlag->load(std::memory_order_acquire) != 0) return ncclInternalError;
    const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return ncclRemoteError;
    pollfd p = {fd, events, 0};
    int rc = poll(&p, 1, (int)std::min<int64_t>(left, 50));
    if (rc > 0) return ncclSuccess;
    if (rc < 0 && errno != EINTR) return ncclSystemError;
  }
}

// Waits until the accepted connection `in` has bytes (or closed): true.
// False when it stayed silent for kStrangerMs while another connection waits
// in the listener's backlog (perhaps the real predecessor, queued behind a
// stranger): the caller drops `in` for it. A silent connection with nobody
// behind it is kept: with thousands of ranks on few cores a predecessor may
// lag its successor by seconds, and dropping it would fail its init.
[[nodiscard]] ncclResult_t waitForResponse(const Socket& in, const Socket& listener, Deadline deadline,
                             const std::atomic<uint32_t>* abortFlag, bool* arrived) {
  const Deadline strangerBy = std::min(deadline, deadlineAfterMs(kStrangerMs));
  for (;;) {
    if (abortFlag != nullptr && abortFlag->load(std::memory_order_acquire) != 0) return ncclInternalError;
    const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return ncclRemoteError;
    pollfd p[2] = {{in.fd(), POLLIN, 0}, {listener.fd(), POLLIN, 0}};
    const bool rivalCounts = Clock::now() >= strangerBy;
    int rc = poll(p, rivalCounts ? 2 : 1, (int)std::min<int64_t>(left, 50));
    if (rc < 0 && errno != EINTR) return ncclSystemError;
    if (rc <= 0) continue;
    *arrived = p[0].revents != 0;
    if (*arrived || (rivalCounts && p[1].revents != 0)) return ncclSuccess;
  }
}

// One connection attempt: the successor's listener was open before the
// bootstrap finished, so a refusal means its process is gone (Socket::connect
// would retry until the deadline, as for a peer that is still starting).
[[nodiscard]] ncclResult_t connectOnce(const SocketAddress& addr, Deadline deadline, const std::atomic<uint32_t>* abortFlag,
                         Socket* out) {
  if (!addr.valid()) return ncclInvalidArgument;
  int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    WARN("Liveness: socket() failed: %s", strerror(errno));
    return ncclSystemError;
  }
  int err = 0;
  if (::connect(fd, &addr.sa, addr.length()) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      ncclResult_t res = waitReady(fd, POLLOUT, deadline, abortFlag);
      if (res != ncclSuccess) {
        ::close(fd);
        return res;
      }
      socklen_t len = sizeof(err);
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
  }
  if (err != 0) {
    ::close(fd);
    setLastErrorMessage(strerror(err));
    return err == ECONNREFUSED || err == ECONNRESET ? ncclRemoteError : ncclSystemError;
  }
  *out = Socket::adopt(fd, addr);
  return ncclSuccess;
}

}  // namespace

ncclResult_t PeerLiveness::create(std::unique_ptr<PeerLiveness>* out) {
  std::vector<std::pair<std::string, SocketAddress>> ifs;
  ncclResult_t res = findInterfaces(&ifs, 1);
  if (res != ncclSuccess) return res;
  std::unique_ptr<PeerLiveness> p(new (std::nothrow) PeerLiveness());
  if (!p) {
    WARN("Liveness: out of host memory");
    return ncclSystemError;
  }
  SocketAddress any = ifs[0].second;
  any.setPort(0);
  res = p->listener_.listen(any, 16);
  if (res != ncclSuccess) return res;
  *out = std::move(p);
  return ncclSuccess;
}

ncclResult_t PeerLiveness::link(int rank, int nranks, const SocketAddress& successor, const AuthSecret& secret,
                                Deadline deadline, const std::atomic<uint32_t>* abortFlag) {
  if (nranks < 2 || rank < 0 || rank >= nranks || !listener_.isOpen()) {
    WARN("Liveness: link(rank %d, nranks %d) without a listener or a peer", rank, nranks);
    return ncclInternalError;
  }
  rank_ = rank;
  nranks_ = nranks;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  Link& out = links_[0];
  Link& in = links_[1];
  out.peer = next;
  in.peer = prev;
  const bool aborting = abortFlag != nullptr;
  auto failed = [&](ncclResult_t res, const char* what, int peer) {
    if (aborting && abortFlag->load(std::memory_order_acquire) != 0) return res;
    std::string cause = lastErrorMessage();
    WARN("Liveness: rank %d of %d: %s rank %d failed (%s): %s", rank, nranks, what, peer, ncclGetErrorString(res),
         res == ncclRemoteError ? "that rank's process is gone or does not answer" : cause.c_str());
    return res;
  };

  // The steps interleave so that no rank waits on one that waits on it: every
  // rank connects (the backlog completes it), accepts, and sends its challenge
  // before it waits for anything from its successor.
  ncclResult_t res = connectOnce(successor, deadline, abortFlag, &out.sock);
  if (res != ncclSuccess) return failed(res, "connecting the liveness link to", next);
  AuthChallenge challenge;
  AuthResponse response;
  auto acceptChallenge = [&]() -> ncclResult_t {
    in.sock.close();
    ncclResult_t r = listener_.accept(&in.sock, deadline, abortFlag);
    if (r == ncclSuccess) r = makeChallenge(&challenge);
    if (r == ncclSuccess) r = in.sock.sendAll(&challenge, sizeof(challenge), deadline, abortFlag);
    return r;
  };
  res = acceptChallenge();
  if (res != ncclSuccess) return failed(res, "accepting the liveness link from", prev);

  // Connector side: answer the successor's challenge.
  AuthChallenge theirs;
  AuthResponse mine;
  res = out.sock.recvAll(&theirs, sizeof(theirs), deadline, abortFlag);
  if (res == ncclSuccess && !makeResponse(secret, kAuthContext, theirs, &mine)) res = ncclRemoteError;
  if (res == ncclSuccess) res = out.sock.sendAll(&mine, sizeof(mine), deadline, abortFlag);
  if (res != ncclSuccess) return failed(res, "authenticating the liveness link to", next);

  // Acceptor side: the predecessor must prove the secret; anything else is
  // dropped and the next connection accepted.
  for (;;) {
    bool arrived = false;
    res = waitForResponse(in.sock, listener_, deadline, abortFlag, &arrived);
    if (res != ncclSuccess) return failed(res, "waiting for the liveness link from", prev);
    // A real rank sends its response at once: one that trickles is a stranger.
    if (arrived)
      res = in.sock.recvAll(&response, sizeof(response), std::min(deadline, deadlineAfterMs(kStrangerMs)), abortFlag);
    if (arrived && res == ncclSuccess && checkResponse(secret, kAuthContext, challenge, response)) break;
    if (abortFlag != nullptr && abortFlag->load(std::memory_order_acquire) != 0) return ncclInternalError;
    if (Clock::now() >= deadline) return failed(ncclRemoteError, "waiting for the liveness link from", prev);
    INFO(kSubsysInit | kSubsysBootstrap, "Liveness: rank %d: dropping a connection from %s that is not rank %d", rank,
         in.sock.address().toString().c_str(), prev);
    res = acceptChallenge();
    if (res != ncclSuccess) return failed(res, "accepting the liveness link from", prev);
  }
  AuthConfirm proof = makeConfirm(secret, kAuthContext, challenge, response);
  res = in.sock.sendAll(&proof, sizeof(proof), deadline, abortFlag);
  if (res != ncclSuccess) return failed(res, "authenticating the liveness link from", prev);

  // Connector side: the successor's proof, then this rank's name.
  AuthConfirm confirm;
  res = out.sock.recvAll(&confirm, sizeof(confirm), deadline, abortFlag);
  if (res == ncclSuccess && !checkConfirm(secret, kAuthContext, theirs, mine, confirm)) {
    WARN("Liveness: rank %d of %d: the listener of rank %d at %s does not prove the communicator's secret", rank,
         nranks, next, successor.toString().c_str());
    return ncclRemoteError;
  }
  liveness::Msg hello = liveness::makeMsg(liveness::kHello, rank);
  if (res == ncclSuccess) res = out.sock.sendAll(&hello, sizeof(hello), deadline, abortFlag);
  if (res != ncclSuccess) return failed(res, "authenticating the liveness link to", next);

  // Acceptor side: a job's process, but is it the predecessor?
  liveness::Msg theirHello{};
  res = in.sock.recvAll(&theirHello, sizeof(theirHello), deadline, abortFlag);
  if (res != ncclSuccess) return failed(res, "authenticating the liveness link from", prev);
  if (theirHello.check != liveness::kCheck || theirHello.type != liveness::kHello || theirHello.rank != prev) {
    WARN("Liveness: rank %d of %d: the liveness link from %s proves the secret but names rank %d, not the ring "
         "predecessor %d",
         rank, nranks, in.sock.address().toString().c_str(), theirHello.rank, prev);
    return ncclInternalError;
  }
  listener_.close();   // nothing else may connect: scanners find no port
  INFO(kSubsysInit | kSubsysBootstrap, "Liveness: rank %d of %d linked to rank %d and from rank %d", rank, nranks,
       next, prev);
  return ncclSuccess;
}

}  // namespace uniccl
