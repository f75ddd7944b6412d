#include "common/bootstrap/listener_loop.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/util/debug.h"

namespace uniccl {
namespace bootstrap {
namespace {

// Refusals are WARNed (a rank with the wrong id must be visible), but a
// hostile peer must not flood the log: after this many, INFO only.
constexpr uint64_t kRefusalWarnings = 16;
// When accept has no fd and no unproven connection can give one back.
constexpr int64_t kAcceptPauseMs = 100;

}  // namespace

size_t pendingCapacity(size_t divisor, size_t lo, size_t hi) {
  rlimit rl;
  size_t soft = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) soft = rl.rlim_cur == RLIM_INFINITY ? SIZE_MAX : (size_t)rl.rlim_cur;
  return std::min(hi, std::max(lo, soft / divisor));
}

ListenerLoop::ListenerLoop(Socket* listener, const AuthSecret& secret, const char* context, std::string who,
                           ListenerLimits limits, Handler afterAuth)
    : listener_(listener),
      secret_(secret),
      context_(context),
      who_(std::move(who)),
      limits_(limits),
      afterAuth_(std::move(afterAuth)) {
  if (limits_.capacity < 1) limits_.capacity = 1;
  pending_.reserve(limits_.capacity);
}

void ListenerLoop::round(std::vector<pollfd>* extra, int waitMs) {
  const bool acceptPaused = Clock::now() < acceptPausedUntil_;
  fds_.clear();
  fds_.push_back({acceptPaused ? -1 : listener_->fd(), POLLIN, 0});
  for (auto& p : pending_)
    fds_.push_back({p->sock.fd(), (short)(!p->auth.done() && p->auth.wantsWrite() ? POLLOUT : POLLIN), 0});
  const size_t extraAt = fds_.size();
  if (extra) fds_.insert(fds_.end(), extra->begin(), extra->end());
  if (poll(fds_.data(), fds_.size(), waitMs) < 0 && errno != EINTR) {
    WARN("%s: poll failed: %s", who_.c_str(), strerror(errno));
    fds_.assign(fds_.size(), pollfd{-1, 0, 0});  // nothing is known ready; deadlines still apply
  }
  if (extra)
    for (size_t i = 0; i < extra->size(); i++) (*extra)[i].revents = fds_[extraAt + i].revents;

  // Connections first, newcomers after: a real rank whose proof has arrived
  // is served before the next batch of a flood could evict it.
  const Deadline now = Clock::now();
  for (size_t i = 0; i < pending_.size(); i++) {
    PendingConnection& p = *pending_[i];
    bool keep = true;
    if (fds_[1 + i].revents) keep = advance(p);
    if (keep && now >= p.deadline) {
      INFO(kSubsysBootstrap, "%s: dropping %s: %s", who_.c_str(), p.sock.address().toString().c_str(),
           p.auth.done() ? "no complete first message in time" : "it did not prove the secret in time");
      keep = false;
    }
    if (!keep) pending_[i].reset();
  }
  pending_.erase(std::remove(pending_.begin(), pending_.end(), nullptr), pending_.end());
  if (!acceptPaused && fds_[0].revents) acceptBatch();
}

bool ListenerLoop::advance(PendingConnection& p) {
  if (!p.auth.done()) {
    int err = 0;
    AcceptorHandshake::Step step = p.auth.progress(p.sock, secret_, context_, &err);
    if (step == AcceptorHandshake::Step::kBusy) return true;
    if (step == AcceptorHandshake::Step::kClosed) {
      INFO(kSubsysBootstrap, "%s: %s closed the connection %s%s%s", who_.c_str(), p.sock.address().toString().c_str(),
           p.auth.peerSpoke() ? "during authentication" : "before authenticating", err ? ": " : "",
           err ? strerror(err) : "");
      return false;
    }
    if (step == AcceptorHandshake::Step::kRefused) {
      if (++refused_ <= kRefusalWarnings)
        WARN("%s: refusing %s: it does not prove the communicator's secret (a process without this communicator's "
             "unique id, or with a different UNICCL_COMM_SECRET)%s",
             who_.c_str(), p.sock.address().toString().c_str(),
             refused_ == kRefusalWarnings ? "; further refusals are logged at INFO" : "");
      else
        INFO(kSubsysBootstrap, "%s: refusing %s: wrong proof of the secret (%lu refused so far)", who_.c_str(),
             p.sock.address().toString().c_str(), (unsigned long)refused_);
      return false;
    }
    p.deadline = Clock::now() + std::chrono::milliseconds(limits_.identifyMs);
  }
  return afterAuth_(p);
}

bool ListenerLoop::evictOldestUnproven() {
  for (size_t i = 0; i < pending_.size(); i++) {
    if (pending_[i]->auth.done()) continue;
    if (evicted_++ % 1000 == 0)
      INFO(kSubsysBootstrap, "%s: %zu connections wait to authenticate; dropping the oldest, %s (%lu dropped so far)",
           who_.c_str(), pending_.size(), pending_[i]->sock.address().toString().c_str(), (unsigned long)evicted_);
    pending_.erase(pending_.begin() + i);
    return true;
  }
  return false;
}

void ListenerLoop::acceptBatch() {
  // Bounded, so that the connections accepted in this round get a round of
  // their own before more newcomers may evict them.
  size_t budget = std::max<size_t>(1, limits_.capacity / 4);
  while (budget > 0) {
    SocketAddress peer = emptySocketAddress();
    socklen_t len = sizeof(peer);
    int fd = accept4(listener_->fd(), &peer.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      if (e == EINTR || e == ECONNABORTED || e == EPROTO) continue;
      if (e == EAGAIN || e == EWOULDBLOCK) return;
      const bool noFd = e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
      if (fdShortages_++ == 0)
        WARN("%s: accept failed: %s; %s", who_.c_str(), strerror(e),
             noFd ? "dropping unauthenticated connections to free descriptors (logged once)" : "pausing accept briefly");
      if (noFd && evictOldestUnproven()) continue;
      acceptPausedUntil_ = Clock::now() + std::chrono::milliseconds(kAcceptPauseMs);
      return;
    }
    budget--;
    Socket sock = Socket::adopt(fd, peer);
    if (pending_.size() >= limits_.capacity && !evictOldestUnproven()) {
      INFO(kSubsysBootstrap, "%s: %zu authenticated connections are still identifying; closing %s", who_.c_str(),
           pending_.size(), peer.toString().c_str());
      continue;
    }
    auto p = std::make_unique<PendingConnection>();
    p->sock = std::move(sock);
    if (!p->auth.begin()) {
      WARN("%s: no random bytes for an authentication challenge (getrandom: %s); closing %s", who_.c_str(),
           strerror(errno), peer.toString().c_str());
      continue;
    }
    p->deadline = Clock::now() + std::chrono::milliseconds(limits_.authMs);
    if (!advance(*p)) continue;  // sends the challenge now: 20 bytes into an empty buffer
    pending_.push_back(std::move(p));
  }
}

}  // namespace bootstrap
}  // namespace uniccl
