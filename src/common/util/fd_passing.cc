#include "common/util/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "common/util/debug.h"

namespace uniccl {
namespace {

constexpr int kPollSliceMs = 50;       // how often an abort flag is looked at
constexpr size_t kMaxNameBytes = 100;  // sun_path holds 107 after the leading NUL
constexpr unsigned char kTag = 'F';    // first byte of every message: never an empty one (read as EOF)

bool aborted(const std::atomic<uint32_t>* abortFlag) {
  return abortFlag != nullptr && abortFlag->load(std::memory_order_acquire) != 0;
}

// Waits for `events` on fd until the deadline. ncclSuccess when ready.
[[nodiscard]] ncclResult_t waitFor(int fd, short events, Deadline deadline, const std::atomic<uint32_t>* abortFlag,
                     const char* what, const std::string& name) {
  for (;;) {
    if (aborted(abortFlag)) {
      INFO(kSubsysInit, "%s fd socket @%s: abort requested", what, name.c_str());
      return ncclInternalError;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      WARN("%s fd socket @%s timed out (is the peer process running?)", what, name.c_str());
      return ncclRemoteError;
    }
    pollfd p = {fd, events, 0};
    int rc = poll(&p, 1, (int)std::min<int64_t>(left, kPollSliceMs));
    if (rc > 0) return ncclSuccess;   // errors and hangups show in the call that follows
    if (rc < 0 && errno != EINTR) {
      WARN("poll on fd socket @%s failed: %s", name.c_str(), strerror(errno));
      return ncclSystemError;
    }
  }
}

[[nodiscard]] ncclResult_t abstractAddress(const std::string& name, sockaddr_un* addr, socklen_t* len) {
  if (name.empty() || name.size() > kMaxNameBytes || name.find('\0') != std::string::npos) {
    WARN("fd socket name \"%s\" must have 1 to %zu bytes and no NUL", name.c_str(), kMaxNameBytes);
    return ncclInvalidArgument;
  }
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path + 1, name.data(), name.size());   // sun_path[0] = '\0': the abstract namespace
  *len = (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return ncclSuccess;
}

// Whether the process at the other end runs as this user.
bool sameUser(int fd, uid_t* peerUid) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  *peerUid = cred.uid;
  return cred.uid == geteuid();
}

[[nodiscard]] ncclResult_t newSocket(const std::string& name, UniqueFd* out) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    WARN("socket(AF_UNIX) for fd socket @%s failed: %s", name.c_str(), strerror(errno));
    return ncclSystemError;
  }
  out->reset(fd);
  return ncclSuccess;
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

ncclResult_t FdSocket::listen(const std::string& name) {
  close();
  sockaddr_un addr;
  socklen_t len = 0;
  ncclResult_t res = abstractAddress(name, &addr, &len);
  if (res != ncclSuccess) return res;
  UniqueFd fd;
  res = newSocket(name, &fd);
  if (res != ncclSuccess) return res;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    WARN("bind of fd socket @%s failed: %s%s", name.c_str(), strerror(errno),
         errno == EADDRINUSE ? " (another process listens on this name)" : "");
    return ncclSystemError;
  }
  if (::listen(fd.get(), 128) != 0) {
    WARN("listen on fd socket @%s failed: %s", name.c_str(), strerror(errno));
    return ncclSystemError;
  }
  fd_ = std::move(fd);
  name_ = name;
  return ncclSuccess;
}

ncclResult_t FdSocket::tryAccept(FdSocket* out, bool* got) const {
  *got = false;
  for (;;) {
    int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      UniqueFd conn(fd);
      uid_t uid = 0;
      if (sameUser(fd, &uid)) {
        out->fd_ = std::move(conn);
        out->name_ = name_;
        *got = true;
        return ncclSuccess;
      }
      WARN("fd socket @%s: dropped a connection from uid %u (only uid %u may connect)", name_.c_str(),
           (unsigned)uid, (unsigned)geteuid());
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
    WARN("accept on fd socket @%s failed: %s", name_.c_str(), strerror(errno));
    return ncclSystemError;
  }
}

ncclResult_t FdSocket::accept(FdSocket* out, Deadline deadline, const std::atomic<uint32_t>* abortFlag) const {
  for (;;) {
    bool got = false;
    ncclResult_t res = tryAccept(out, &got);
    if (res != ncclSuccess || got) return res;
    res = waitFor(fd_.get(), POLLIN, deadline, abortFlag, "accept on", name_);
    if (res != ncclSuccess) return res;
  }
}

ncclResult_t FdSocket::connect(const std::string& name, Deadline deadline, const std::atomic<uint32_t>* abortFlag) {
  close();
  sockaddr_un addr;
  socklen_t len = 0;
  ncclResult_t res = abstractAddress(name, &addr, &len);
  if (res != ncclSuccess) return res;
  int backoffMs = 1;
  for (;;) {
    UniqueFd fd;
    res = newSocket(name, &fd);
    if (res != ncclSuccess) return res;
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0) {
      uid_t uid = 0;
      if (!sameUser(fd.get(), &uid)) {
        WARN("fd socket @%s is held by uid %u, not this user (%u): not connecting", name.c_str(), (unsigned)uid,
             (unsigned)geteuid());
        return ncclSystemError;
      }
      fd_ = std::move(fd);
      name_ = name;
      return ncclSuccess;
    }
    const int err = errno;
    // No listener yet (ECONNREFUSED), or its backlog is full (EAGAIN): again.
    if (err != ECONNREFUSED && err != EAGAIN && err != ENOENT && err != EINTR) {
      WARN("connect to fd socket @%s failed: %s", name.c_str(), strerror(err));
      return ncclSystemError;
    }
    if (aborted(abortFlag)) {
      INFO(kSubsysInit, "connect to fd socket @%s: abort requested", name.c_str());
      return ncclInternalError;
    }
    if (Clock::now() + std::chrono::milliseconds(backoffMs) >= deadline) {
      WARN("connect to fd socket @%s: no listener until the deadline (%s; is the peer process running?)",
           name.c_str(), strerror(err));
      return ncclRemoteError;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(backoffMs));
    backoffMs = std::min(backoffMs * 2, 100);
  }
}

ncclResult_t sendFds(const FdSocket& sock, const int* fds, int n, const void* payload, size_t bytes,
                     Deadline deadline, const std::atomic<uint32_t>* abortFlag) {
  const std::string& name = sock.name();
  if (!sock.isOpen() || n < 0 || n > kMaxPassedFds || (n > 0 && fds == nullptr) || bytes > kMaxFdPayloadBytes ||
      (bytes > 0 && payload == nullptr)) {
    WARN("sendFds on fd socket @%s: bad arguments (%d descriptors, at most %d; %zu payload bytes, at most %zu)",
         name.c_str(), n, kMaxPassedFds, bytes, kMaxFdPayloadBytes);
    return ncclInvalidArgument;
  }
  std::vector<unsigned char> data(1 + bytes);
  data[0] = kTag;
  if (bytes > 0) std::memcpy(data.data() + 1, payload, bytes);
  iovec iov = {data.data(), data.size()};
  std::vector<char> control(n > 0 ? CMSG_SPACE(sizeof(int) * n) : 0);
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (n > 0) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
  }
  for (;;) {
    ssize_t sent = ::sendmsg(sock.fd(), &msg, MSG_NOSIGNAL);
    if (sent == (ssize_t)data.size()) return ncclSuccess;
    if (sent >= 0) {   // a seqpacket message goes whole or not at all
      WARN("sendFds on fd socket @%s: sent %zd of %zu bytes", name.c_str(), sent, data.size());
      return ncclSystemError;
    }
    if (errno == EPIPE || errno == ECONNRESET) {
      WARN("sendFds on fd socket @%s: the peer closed the connection", name.c_str());
      return ncclRemoteError;
    }
    if (errno == EBADF && n > 0) {
      WARN("sendFds on fd socket @%s: a descriptor to send is not open", name.c_str());
      return ncclInvalidArgument;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      WARN("sendmsg on fd socket @%s failed: %s", name.c_str(), strerror(errno));
      return ncclSystemError;
    }
    ncclResult_t res = waitFor(sock.fd(), POLLOUT, deadline, abortFlag, "sending on", name);
    if (res != ncclSuccess) return res;
  }
}

ncclResult_t recvFds(const FdSocket& sock, UniqueFd* fds, int n, void* payload, size_t bytes, Deadline deadline,
                     const std::atomic<uint32_t>* abortFlag) {
  const std::string& name = sock.name();
  if (!sock.isOpen() || n < 0 || n > kMaxPassedFds || (n > 0 && fds == nullptr) || bytes > kMaxFdPayloadBytes ||
      (bytes > 0 && payload == nullptr)) {
    WARN("recvFds on fd socket @%s: bad arguments (%d descriptors, at most %d; %zu payload bytes, at most %zu)",
         name.c_str(), n, kMaxPassedFds, bytes, kMaxFdPayloadBytes);
    return ncclInvalidArgument;
  }
  std::vector<unsigned char> data(2 + bytes);   // one more than expected: a longer message shows as truncated
  std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxPassedFds));
  for (;;) {
    iovec iov = {data.data(), data.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    ssize_t got = ::recvmsg(sock.fd(), &msg, MSG_CMSG_CLOEXEC);
    if (got < 0) {
      if (errno == ECONNRESET) {
        WARN("recvFds on fd socket @%s: the peer reset the connection", name.c_str());
        return ncclRemoteError;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        WARN("recvmsg on fd socket @%s failed: %s", name.c_str(), strerror(errno));
        return ncclSystemError;
      }
      ncclResult_t res = waitFor(sock.fd(), POLLIN, deadline, abortFlag, "receiving on", name);
      if (res != ncclSuccess) return res;
      continue;
    }
    if (got == 0) {
      WARN("recvFds on fd socket @%s: the peer closed the connection", name.c_str());
      return ncclRemoteError;
    }
    // Take ownership of every descriptor that came, whatever else is wrong.
    std::vector<UniqueFd> came;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        came.emplace_back(fd);
      }
    }
    if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || (size_t)got != 1 + bytes || data[0] != kTag ||
        came.size() != (size_t)n) {
      WARN("recvFds on fd socket @%s: expected %d descriptor(s) and %zu payload bytes, got %zu descriptor(s) and "
           "%zd bytes%s", name.c_str(), n, bytes, came.size(), got - 1,
           (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ? " (truncated)" : "");
      return ncclRemoteError;
    }
    for (int i = 0; i < n; ++i) fds[i] = std::move(came[i]);
    if (bytes > 0) std::memcpy(payload, data.data() + 1, bytes);
    return ncclSuccess;
  }
}

}  // namespace uniccl
