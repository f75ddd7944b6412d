#include "net/listener_guard.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/util/debug.h"

namespace uniccl {

ncclResult_t newListenerSecret(ListenerSecret* out) {
  ncclResult_t res = randomSecret(&out->key);
  if (res != ncclSuccess) return res;
  return makeChallenge(&out->challenge);
}

namespace {
const char* refusalText(Refusal why) {
  switch (why) {
    case Refusal::kClosed: return "closed before proving the handle's key (a port scan?)";
    case Refusal::kSilent: return "sent no proof of the handle's key in time (UNICCL_NET_CONNECT_TIMEOUT_MS)";
    case Refusal::kBadProof:
      return "does not prove the handle's key (a process that did not get the handle through the bootstrap)";
    case Refusal::kEvicted: return "dropped unproven to make room for newer connections (a flood?)";
    default: return "could not be taken: the process has no file descriptor left";
  }
}
}  // namespace

void RefusalLog::note(Refusal why, const SocketAddress& peer, const SocketAddress& listener,
                      const std::string& detail) {
  if (counts_[(int)why]++ > 0) return;
  std::string peerText = why == Refusal::kNoFds ? std::string("a connection") : peer.toString();
  if (why == Refusal::kBadProof || why == Refusal::kNoFds) {
    WARN("NET/%s: listener %s: %s %s%s%s; refused, still listening (later ones are counted, not logged)", net_,
         listener.toString().c_str(), peerText.c_str(), refusalText(why), detail.empty() ? "" : ": ", detail.c_str());
  } else {
    INFO(kSubsysNet, "NET/%s: listener %s: %s %s; dropped, still listening (later ones are counted, not logged)",
         net_, listener.toString().c_str(), peerText.c_str(), refusalText(why));
  }
}

void RefusalLog::summary(const SocketAddress& listener) const {
  uint64_t total = 0;
  for (uint64_t c : counts_) total += c;
  if (total == 0) return;
  INFO(kSubsysNet,
       "NET/%s: listener %s refused %llu connection(s): %llu closed early, %llu silent, %llu wrong proof, "
       "%llu dropped for room, %llu times out of fds",
       net_, listener.toString().c_str(), (unsigned long long)total,
       (unsigned long long)counts_[(int)Refusal::kClosed], (unsigned long long)counts_[(int)Refusal::kSilent],
       (unsigned long long)counts_[(int)Refusal::kBadProof], (unsigned long long)counts_[(int)Refusal::kEvicted],
       (unsigned long long)counts_[(int)Refusal::kNoFds]);
}

AcceptResult acceptOne(const Socket& listener, Socket* out, int* err) {
  *err = 0;
  SocketAddress peer = emptySocketAddress();
  socklen_t len = sizeof(peer);
  int fd = ::accept4(listener.fd(), &peer.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    *out = Socket::adopt(fd, peer);
    return AcceptResult::kAccepted;
  }
  *err = errno;
  switch (errno) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    // Linux passes pending network errors of the new socket to accept4.
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
    case ETIMEDOUT:
    case EPERM:  // a firewall rule refused it
      return AcceptResult::kNone;
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
      return AcceptResult::kNoFds;
    default:
      return AcceptResult::kFailed;
  }
}

bool connectionWaiting(const Socket& listener) {
  pollfd p = {listener.fd(), POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

}  // namespace uniccl
