// A TCP socket that owns its fd, and whose every operation ends: each takes a
// deadline and an optional abort flag, waits with poll() on a non-blocking fd,
// and never raises SIGPIPE.
//
// Errors: timeout -> ncclRemoteError (the peer did not answer in time), peer
// closed or reset -> ncclRemoteError, local failures -> ncclSystemError, abort
// flag raised -> ncclInternalError (logged at INFO only: aborts are asked for).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include <sys/uio.h>

#include "common/util/socket_address.h"

namespace uniccl {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadlineAfterMs(int64_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }

class Socket {
 public:
  Socket() = default;
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Takes ownership of a connected fd (e.g. from an event loop's accept4).
  static Socket adopt(int fd, const SocketAddress& peer) {
    Socket s;
    s.fd_ = fd;
    s.addr_ = peer;
    return s;
  }

  bool isOpen() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // After listen: the bound address (with the real port); after connect/accept:
  // the remote address.
  const SocketAddress& address() const { return addr_; }

  // Binds to `addr` (port 0 = ephemeral) with SO_REUSEADDR and listens. With
  // bindErrno, a failed bind is not logged: its errno is stored there for the
  // caller, who expects it (e.g. EADDRINUSE when another process is the root).
  [[nodiscard]] ncclResult_t listen(const SocketAddress& addr, int backlog = 1024, int* bindErrno = nullptr);
  // Waits for one connection on a listening socket.
  [[nodiscard]] ncclResult_t accept(Socket* out, Deadline deadline, const std::atomic<uint32_t>* abortFlag = nullptr);
  // Connects, retrying refused/unreachable attempts until the deadline (the
  // peer may not be listening yet).
  [[nodiscard]] ncclResult_t connect(const SocketAddress& addr, Deadline deadline, const std::atomic<uint32_t>* abortFlag = nullptr);
  // Connects to a listener known to exist (its address came from it): a
  // refused or reset attempt means its process is gone and fails at once
  // (ncclRemoteError); other failures are retried as connect() does.
  [[nodiscard]] ncclResult_t connectToExisting(const SocketAddress& addr, Deadline deadline);

  [[nodiscard]] ncclResult_t sendAll(const void* data, size_t bytes, Deadline deadline,
                       const std::atomic<uint32_t>* abortFlag = nullptr);
  [[nodiscard]] ncclResult_t recvAll(void* data, size_t bytes, Deadline deadline, const std::atomic<uint32_t>* abortFlag = nullptr);

  // Non-blocking progress for event loops: bytes moved (0 if it would block),
  // or -1 when the peer closed or the socket failed (errno-like reason in *err).
  ssize_t trySend(const void* data, size_t bytes, int* err);
  ssize_t tryRecv(void* data, size_t bytes, int* err);
  // The same over several buffers in one system call (one TCP segment for a
  // small header and its payload; one read for a header and what follows).
  ssize_t trySendv(const iovec* iov, int iovcnt, int* err);
  ssize_t tryRecvv(const iovec* iov, int iovcnt, int* err);

  void close();

 private:
  [[nodiscard]] ncclResult_t connectImpl(const SocketAddress& addr, Deadline deadline, const std::atomic<uint32_t>* abortFlag,
                           bool listenerExists);
  int fd_ = -1;
  SocketAddress addr_ = emptySocketAddress();
};

// Sends `sendBytes` on `out` while receiving `recvBytes` on `in`, both at once,
// so that a ring of ranks that all send before they receive cannot deadlock on
// full socket buffers.
[[nodiscard]] ncclResult_t sendRecvAll(Socket& out, const void* sendData, size_t sendBytes, Socket& in, void* recvData,
                         size_t recvBytes, Deadline deadline, const std::atomic<uint32_t>* abortFlag = nullptr);

}  // namespace uniccl
