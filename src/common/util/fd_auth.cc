#include "common/util/fd_auth.h"

#include <poll.h>

#include <algorithm>
#include <exception>

#include "common/util/debug.h"

namespace uniccl {

namespace {

// How long the loop leaves the listener alone after accept failed (out of
// descriptors): the connection stays queued, and polling the listener again
// at once would only spin.
constexpr int64_t kAcceptBackoffMs = 100;
// Connections taken per step, so that a flood cannot starve the others.
constexpr int kAcceptsPerStep = 32;

// A send or receive inside the loop must not wait: poll said the socket is
// ready, and the replies are far smaller than a socket's buffer.
Deadline now() { return Clock::now(); }

}  // namespace

std::string secretSocketName(const AuthSecret& secret, const char* kind, const std::string& label) {
  const Sha256Digest d = deriveFromSecret(secret, label.c_str());
  static const char kHex[] = "0123456789abcdef";
  std::string name = std::string("uniccl-") + kind + "-";
  for (size_t i = 0; i < 16; i++) {
    name += kHex[d[i] >> 4];
    name += kHex[d[i] & 15];
  }
  return name;
}

ncclResult_t authenticateFdConnector(const FdSocket& sock, const AuthSecret& secret, const char* context,
                                     Deadline deadline, const std::atomic<uint32_t>* abortFlag, const char* what) {
  AuthChallenge challenge;
  AuthResponse response;
  AuthConfirm confirm;
  ncclResult_t res = recvFds(sock, nullptr, 0, &challenge, sizeof(challenge), deadline, abortFlag);
  if (res != ncclSuccess) return res;
  if (!makeResponse(secret, context, challenge, &response)) {
    WARN("%s: the listener @%s did not start the authentication exchange", what, sock.name().c_str());
    return ncclRemoteError;
  }
  if ((res = sendFds(sock, nullptr, 0, &response, sizeof(response), deadline, abortFlag)) != ncclSuccess) return res;
  if ((res = recvFds(sock, nullptr, 0, &confirm, sizeof(confirm), deadline, abortFlag)) != ncclSuccess) return res;
  if (!checkConfirm(secret, context, challenge, response, confirm)) {
    WARN("%s: the listener @%s does not prove the communicator's secret: refusing to talk to it", what,
         sock.name().c_str());
    return ncclRemoteError;
  }
  return ncclSuccess;
}

FdAuthServer::FdAuthServer(const FdSocket* listener, const AuthSecret& secret, const char* context,
                           size_t maxConns, int64_t connMs, const char* what)
    : listener_(listener),
      secret_(secret),
      context_(context),
      maxConns_(std::max<size_t>(maxConns, 1)),
      connMs_(connMs),
      what_(what) {}

// Takes a new connection into a slot, evicting the oldest unauthenticated
// one when all are taken. False: no slot (every connection authenticated).
bool FdAuthServer::admit(FdSocket sock) {
  if (conns_.size() >= maxConns_) {
    auto oldest = conns_.end();
    for (auto it = conns_.begin(); it != conns_.end(); ++it)
      if (!(*it)->authenticated && (oldest == conns_.end() || (*it)->deadline < (*oldest)->deadline)) oldest = it;
    if (oldest == conns_.end()) return false;
    INFO(kSubsysInit, "%s: all %zu slots taken, dropping the oldest unauthenticated connection", what_, maxConns_);
    conns_.erase(oldest);
  }
  auto c = std::make_unique<Conn>();
  c->sock = std::move(sock);
  c->deadline = deadlineAfterMs(connMs_);
  if (makeChallenge(&c->challenge) != ncclSuccess ||
      sendFds(c->sock, nullptr, 0, &c->challenge, sizeof(c->challenge), now()) != ncclSuccess)
    return true;   // that connection is dropped; the slot stays free
  conns_.push_back(std::move(c));
  return true;
}

void FdAuthServer::acceptAll() {
  for (int i = 0; i < kAcceptsPerStep; i++) {
    FdSocket sock;
    bool got = false;
    if (listener_->tryAccept(&sock, &got) != ncclSuccess) {
      listenerPausedUntil_ = deadlineAfterMs(kAcceptBackoffMs);
      return;
    }
    if (!got || !admit(std::move(sock))) return;
  }
}

// The challenge went out at accept; the response is the next message.
// False: refuse the connection.
bool FdAuthServer::advanceAuth(Conn& c) {
  AuthResponse response;
  if (recvFds(c.sock, nullptr, 0, &response, sizeof(response), now()) != ncclSuccess) return false;
  if (!checkResponse(secret_, context_, c.challenge, response)) {
    WARN("%s: refusing a connection to @%s: it does not prove the communicator's secret", what_,
         c.sock.name().c_str());
    return false;
  }
  const AuthConfirm confirm = makeConfirm(secret_, context_, c.challenge, response);
  if (sendFds(c.sock, nullptr, 0, &confirm, sizeof(confirm), now()) != ncclSuccess) return false;
  c.authenticated = true;
  return true;
}

void FdAuthServer::step(int waitMs, const OnReadable& onReadable) {
  const Deadline t = Clock::now();
  const bool full = conns_.size() >= maxConns_ &&
                    std::all_of(conns_.begin(), conns_.end(), [](const auto& c) { return c->authenticated; });
  const bool pollListener = !full && t >= listenerPausedUntil_;
  std::vector<pollfd> fds;
  fds.reserve(conns_.size() + 1);
  if (pollListener) fds.push_back(pollfd{listener_->fd(), POLLIN, 0});
  for (const auto& c : conns_) fds.push_back(pollfd{c->sock.fd(), POLLIN, 0});
  // Wake for the nearest connection deadline too.
  int64_t wait = waitMs;
  for (const auto& c : conns_)
    wait = std::min<int64_t>(wait, std::chrono::duration_cast<std::chrono::milliseconds>(c->deadline - t).count());
  const int rc = poll(fds.data(), fds.size(), (int)std::max<int64_t>(wait, 0));
  if (rc < 0) return;   // EINTR: the caller steps again
  size_t k = 0;
  bool listenerReady = false;
  if (pollListener) listenerReady = fds[k++].revents != 0;
  // Handle the connections polled (new ones from acceptAll wait for the next step).
  std::vector<Conn*> ready;
  for (size_t i = 0; i < conns_.size() && k < fds.size(); i++, k++)
    if (fds[k].revents != 0) ready.push_back(conns_[i].get());
  std::vector<const Conn*> closing;
  for (Conn* c : ready) {
    bool keep = false;
    try {
      keep = c->authenticated ? onReadable(*c) : advanceAuth(*c);
    } catch (const std::exception& e) {
      WARN("%s: dropping a connection after an error while serving it: %s", what_, e.what());
    } catch (...) {
      WARN("%s: dropping a connection after an unknown error while serving it", what_);
    }
    if (!keep) closing.push_back(c);
  }
  const Deadline after = Clock::now();
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(),
                              [&](const std::unique_ptr<Conn>& c) {
                                if (std::find(closing.begin(), closing.end(), c.get()) != closing.end()) return true;
                                if (after < c->deadline) return false;
                                INFO(kSubsysInit, "%s: closing a connection that did not finish within %lld ms",
                                     what_, (long long)connMs_);
                                return true;
                              }),
               conns_.end());
  if (listenerReady) acceptAll();
}

}  // namespace uniccl
