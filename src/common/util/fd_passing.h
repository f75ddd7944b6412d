// File descriptors between processes of one host (Linux): a Unix-domain
// socket bound to a name in the abstract namespace (no file to clean up; the
// name goes with the listener), carrying SCM_RIGHTS messages. What travels
// is an open file, so the receiver's descriptor works even after the sender
// closed its own: how VMM allocation handles (gpu::memExportFd) reach peers.
//
// Every wait ends: each call takes a deadline (and an optional abort flag,
// as util/socket.h's do). Errors, each with a WARN naming the socket:
// timeout, peer gone or a message of the wrong shape -> ncclRemoteError;
// local failures -> ncclSystemError; bad arguments -> ncclInvalidArgument;
// abort flag raised -> ncclInternalError (INFO only).
//
// Only processes of the same user talk: accept drops connections from other
// users, and connect refuses a listener of another user (anyone on the host
// can bind an abstract name).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/util/socket.h"   // Deadline, deadlineAfterMs
#include "uniccl.h"

namespace uniccl {

// Owns one file descriptor: closed on destruction or reset.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives the descriptor up without closing it.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Most descriptors in one message, and most payload bytes.
constexpr int kMaxPassedFds = 64;
constexpr size_t kMaxFdPayloadBytes = 32 << 10;

// A SOCK_SEQPACKET Unix socket: listening on a name, or connected.
class FdSocket {
 public:
  // Binds to abstract name `name` (1 to 100 bytes) and listens. A name in
  // use (another listener anywhere on the host) is ncclSystemError.
  [[nodiscard]] ncclResult_t listen(const std::string& name);
  // Waits for one connection from a process of this user.
  [[nodiscard]] ncclResult_t accept(FdSocket* out, Deadline deadline, const std::atomic<uint32_t>* abortFlag = nullptr) const;
  // Takes one waiting connection of this user if there is one (*got), never
  // waits: for event loops. Running out of descriptors is ncclSystemError
  // for this call only; the connection stays queued.
  [[nodiscard]] ncclResult_t tryAccept(FdSocket* out, bool* got) const;
  // Connects to the listener `name`, retrying until it exists or the
  // deadline passes (the peer may not be listening yet).
  [[nodiscard]] ncclResult_t connect(const std::string& name, Deadline deadline, const std::atomic<uint32_t>* abortFlag = nullptr);

  bool isOpen() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // The listener's name (also on accepted and connected sockets), for messages.
  const std::string& name() const { return name_; }
  void close() { fd_.reset(); }

 private:
  UniqueFd fd_;
  std::string name_;
};

// Sends one message: `bytes` of payload (0 to kMaxFdPayloadBytes) and `n`
// descriptors (0 to kMaxPassedFds), which stay the caller's to close.
[[nodiscard]] ncclResult_t sendFds(const FdSocket& sock, const int* fds, int n, const void* payload, size_t bytes,
                     Deadline deadline, const std::atomic<uint32_t>* abortFlag = nullptr);
// Receives one message that must hold exactly `n` descriptors (now owned by
// fds[0..n-1], close-on-exec) and `bytes` of payload; any other shape is
// ncclRemoteError, and whatever descriptors came are closed.
[[nodiscard]] ncclResult_t recvFds(const FdSocket& sock, UniqueFd* fds, int n, void* payload, size_t bytes, Deadline deadline,
                     const std::atomic<uint32_t>* abortFlag = nullptr);

}  // namespace uniccl
