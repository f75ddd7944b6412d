#include "common/util/socket.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/util/debug.h"

namespace uniccl {
namespace {

// Longest single poll(): how often an abort flag is looked at.
constexpr int kPollSliceMs = 50;

bool aborted(const std::atomic<uint32_t>* abortFlag) {
  return abortFlag && abortFlag->load(std::memory_order_acquire) != 0;
}

// Milliseconds to wait in the next poll, or -1 when the deadline has passed.
int sliceMs(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return -1;
  return (int)std::min<int64_t>(left, kPollSliceMs);
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Waits for `events` on fd. ncclSuccess when ready; timeout/abort otherwise.
[[nodiscard]] ncclResult_t waitFor(int fd, short events, Deadline deadline, const std::atomic<uint32_t>* abortFlag,
                     const char* what, const SocketAddress& peer) {
  for (;;) {
    if (aborted(abortFlag)) {
      INFO(kSubsysNet | kSubsysBootstrap, "%s %s: abort requested", what, peer.toString().c_str());
      return ncclInternalError;
    }
    int ms = sliceMs(deadline);
    if (ms < 0) {
      WARN("%s %s timed out", what, peer.toString().c_str());
      return ncclRemoteError;
    }
    pollfd p = {fd, events, 0};
    int rc = poll(&p, 1, ms);
    if (rc > 0) return ncclSuccess;  // errors/hangups show up in the following call
    if (rc < 0 && errno != EINTR) {
      WARN("poll failed during %s %s: %s", what, peer.toString().c_str(), strerror(errno));
      return ncclSystemError;
    }
  }
}

bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
         err == ECONNRESET || err == EAGAIN;
}

}  // namespace

Socket::Socket(Socket&& o) noexcept : fd_(o.fd_), addr_(o.addr_) { o.fd_ = -1; }

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    addr_ = o.addr_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

ncclResult_t Socket::listen(const SocketAddress& addr, int backlog, int* bindErrno) {
  close();
  if (!addr.valid()) {
    WARN("Socket::listen: invalid address %s", addr.toString().c_str());
    return ncclInvalidArgument;
  }
  int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    WARN("socket() failed: %s", strerror(errno));
    return ncclSystemError;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, &addr.sa, addr.length()) != 0) {
    int err = errno;
    ::close(fd);
    if (bindErrno)
      *bindErrno = err;
    else
      WARN("bind to %s failed: %s", addr.toString().c_str(), strerror(err));
    return ncclSystemError;
  }
  if (::listen(fd, backlog) != 0) {
    int err = errno;
    ::close(fd);
    WARN("listen on %s failed: %s", addr.toString().c_str(), strerror(err));
    return ncclSystemError;
  }
  SocketAddress bound = emptySocketAddress();
  socklen_t len = sizeof(bound);
  if (getsockname(fd, &bound.sa, &len) != 0) {
    int err = errno;
    ::close(fd);
    WARN("getsockname failed: %s", strerror(err));
    return ncclSystemError;
  }
  fd_ = fd;
  addr_ = bound;
  return ncclSuccess;
}

ncclResult_t Socket::accept(Socket* out, Deadline deadline, const std::atomic<uint32_t>* abortFlag) {
  for (;;) {
    SocketAddress peer = emptySocketAddress();
    socklen_t len = sizeof(peer);
    int fd = ::accept4(fd_, &peer.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      out->close();
      out->fd_ = fd;
      out->addr_ = peer;
      return ncclSuccess;
    }
    // The connection may have been reset between poll and accept: keep waiting.
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED && errno != EPROTO) {
      WARN("accept on %s failed: %s", addr_.toString().c_str(), strerror(errno));
      return ncclSystemError;
    }
    ncclResult_t res = waitFor(fd_, POLLIN, deadline, abortFlag, "accept on", addr_);
    if (res != ncclSuccess) return res;
  }
}

ncclResult_t Socket::connect(const SocketAddress& addr, Deadline deadline, const std::atomic<uint32_t>* abortFlag) {
  return connectImpl(addr, deadline, abortFlag, false);
}

ncclResult_t Socket::connectToExisting(const SocketAddress& addr, Deadline deadline) {
  return connectImpl(addr, deadline, nullptr, true);
}

ncclResult_t Socket::connectImpl(const SocketAddress& addr, Deadline deadline, const std::atomic<uint32_t>* abortFlag,
                                 bool listenerExists) {
  close();
  if (!addr.valid()) {
    WARN("Socket::connect: invalid address %s", addr.toString().c_str());
    return ncclInvalidArgument;
  }
  int backoffMs = 1;
  for (;;) {
    int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      WARN("socket() failed: %s", strerror(errno));
      return ncclSystemError;
    }
    int err = 0;
    if (::connect(fd, &addr.sa, addr.length()) == 0) {
      err = 0;
    } else if (errno == EINPROGRESS) {
      ncclResult_t res = waitFor(fd, POLLOUT, deadline, abortFlag, "connect to", addr);
      if (res != ncclSuccess) {
        ::close(fd);
        return res;
      }
      socklen_t len = sizeof(err);
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    } else {
      err = errno;
    }
    if (err == 0) {
      setNoDelay(fd);
      fd_ = fd;
      addr_ = addr;
      return ncclSuccess;
    }
    ::close(fd);
    if (listenerExists && (err == ECONNREFUSED || err == ECONNRESET)) {
      WARN("connect to %s failed: %s (the peer's listener is gone: did the peer fail? see its log)",
           addr.toString().c_str(), strerror(err));
      return ncclRemoteError;
    }
    if (!retryableConnectError(err)) {
      WARN("connect to %s failed: %s", addr.toString().c_str(), strerror(err));
      return ncclSystemError;
    }
    if (aborted(abortFlag)) {
      INFO(kSubsysNet | kSubsysBootstrap, "connect to %s: abort requested", addr.toString().c_str());
      return ncclInternalError;
    }
    if (Clock::now() + std::chrono::milliseconds(backoffMs) >= deadline) {
      WARN("connect to %s kept failing until the deadline: %s (is the peer running?)", addr.toString().c_str(),
           strerror(err));
      return ncclRemoteError;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(backoffMs));
    backoffMs = std::min(backoffMs * 2, 100);
  }
}

namespace {
// What a non-blocking call's result says: bytes moved, 0 if it would block,
// -1 with *err set otherwise (0 when a receive found the peer closed).
ssize_t movedOrWouldBlock(ssize_t n, bool receiving, int* err) {
  if (n > 0 || (n == 0 && !receiving)) return n;
  if (n == 0) {
    *err = 0;  // orderly close by the peer
    return -1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  *err = errno;
  return -1;
}

msghdr messageOf(const iovec* iov, int iovcnt) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = (size_t)iovcnt;
  return msg;
}
}  // namespace

ssize_t Socket::trySend(const void* data, size_t bytes, int* err) {
  return movedOrWouldBlock(::send(fd_, data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT), false, err);
}

ssize_t Socket::tryRecv(void* data, size_t bytes, int* err) {
  if (bytes == 0) return 0;
  return movedOrWouldBlock(::recv(fd_, data, bytes, MSG_DONTWAIT), true, err);
}

ssize_t Socket::trySendv(const iovec* iov, int iovcnt, int* err) {
  const msghdr msg = messageOf(iov, iovcnt);
  return movedOrWouldBlock(::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT), false, err);
}

ssize_t Socket::tryRecvv(const iovec* iov, int iovcnt, int* err) {
  msghdr msg = messageOf(iov, iovcnt);
  return movedOrWouldBlock(::recvmsg(fd_, &msg, MSG_DONTWAIT), true, err);
}

ncclResult_t Socket::sendAll(const void* data, size_t bytes, Deadline deadline,
                             const std::atomic<uint32_t>* abortFlag) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < bytes) {
    int err = 0;
    ssize_t n = trySend(p + done, bytes - done, &err);
    if (n < 0) {
      WARN("send to %s failed: %s", addr_.toString().c_str(), err ? strerror(err) : "connection closed");
      return err == EPIPE || err == ECONNRESET ? ncclRemoteError : ncclSystemError;
    }
    done += (size_t)n;
    if (done < bytes) {
      ncclResult_t res = waitFor(fd_, POLLOUT, deadline, abortFlag, "send to", addr_);
      if (res != ncclSuccess) return res;
    }
  }
  return ncclSuccess;
}

ncclResult_t Socket::recvAll(void* data, size_t bytes, Deadline deadline, const std::atomic<uint32_t>* abortFlag) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < bytes) {
    int err = 0;
    ssize_t n = tryRecv(p + done, bytes - done, &err);
    if (n < 0) {
      if (err == 0)
        WARN("connection from %s closed by the peer after %zu of %zu bytes", addr_.toString().c_str(), done, bytes);
      else
        WARN("recv from %s failed: %s", addr_.toString().c_str(), strerror(err));
      return err == 0 || err == ECONNRESET ? ncclRemoteError : ncclSystemError;
    }
    done += (size_t)n;
    if (done < bytes) {
      ncclResult_t res = waitFor(fd_, POLLIN, deadline, abortFlag, "recv from", addr_);
      if (res != ncclSuccess) return res;
    }
  }
  return ncclSuccess;
}

ncclResult_t sendRecvAll(Socket& out, const void* sendData, size_t sendBytes, Socket& in, void* recvData,
                         size_t recvBytes, Deadline deadline, const std::atomic<uint32_t>* abortFlag) {
  const char* s = static_cast<const char*>(sendData);
  char* r = static_cast<char*>(recvData);
  size_t sent = 0, received = 0;
  while (sent < sendBytes || received < recvBytes) {
    int err = 0;
    if (sent < sendBytes) {
      ssize_t n = out.trySend(s + sent, sendBytes - sent, &err);
      if (n < 0) {
        WARN("send to %s failed: %s", out.address().toString().c_str(), err ? strerror(err) : "connection closed");
        return ncclRemoteError;
      }
      sent += (size_t)n;
    }
    if (received < recvBytes) {
      ssize_t n = in.tryRecv(r + received, recvBytes - received, &err);
      if (n < 0) {
        if (err == 0)
          WARN("connection from %s closed by the peer after %zu of %zu bytes", in.address().toString().c_str(),
               received, recvBytes);
        else
          WARN("recv from %s failed: %s", in.address().toString().c_str(), strerror(err));
        return err == 0 || err == ECONNRESET ? ncclRemoteError : ncclSystemError;
      }
      received += (size_t)n;
    }
    if (sent == sendBytes && received == recvBytes) break;
    if (aborted(abortFlag)) {
      INFO(kSubsysNet | kSubsysBootstrap, "sendRecv: abort requested");
      return ncclInternalError;
    }
    int ms = sliceMs(deadline);
    if (ms < 0) {
      WARN("exchange with %s / %s timed out (%zu/%zu bytes sent, %zu/%zu received)",
           out.address().toString().c_str(), in.address().toString().c_str(), sent, sendBytes, received, recvBytes);
      return ncclRemoteError;
    }
    pollfd p[2];
    int np = 0;
    if (sent < sendBytes) p[np++] = {out.fd(), POLLOUT, 0};
    if (received < recvBytes) p[np++] = {in.fd(), POLLIN, 0};
    if (poll(p, np, ms) < 0 && errno != EINTR) {
      WARN("poll failed: %s", strerror(errno));
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

}  // namespace uniccl
