#include "common/bootstrap/handshake.h"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/util/debug.h"

namespace uniccl {
namespace bootstrap {
namespace {

// One connection attempt may wait this long for the listener's next message;
// a listener that is alive answers within milliseconds, so longer means it
// dropped or never accepted this connection: reconnect.
constexpr int64_t kAttemptMs = 5000;
constexpr int kPollSliceMs = 50;  // how often the abort flag is looked at

enum class Io { kOk, kClosed, kTimeout, kAborted };

// Moves exactly `bytes` without logging (the caller decides what a failure
// means: a dropped connection is retried, not an error).
Io moveExact(Socket& s, bool sending, void* data, size_t bytes, Deadline deadline,
             const std::atomic<uint32_t>* abortFlag) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < bytes) {
    int err = 0;
    ssize_t n = sending ? s.trySend(p + done, bytes - done, &err) : s.tryRecv(p + done, bytes - done, &err);
    if (n < 0) return Io::kClosed;
    done += (size_t)n;
    if (done == bytes) break;
    if (abortFlag && abortFlag->load(std::memory_order_acquire)) return Io::kAborted;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Io::kTimeout;
    pollfd pfd = {s.fd(), (short)(sending ? POLLOUT : POLLIN), 0};
    if (poll(&pfd, 1, (int)std::min<int64_t>(left, kPollSliceMs)) < 0 && errno != EINTR) return Io::kClosed;
  }
  return Io::kOk;
}

}  // namespace

bool AcceptorHandshake::begin() {
  phase_ = kSendChallenge;
  have_ = 0;
  return makeChallenge(&challenge_) == ncclSuccess;
}

AcceptorHandshake::Step AcceptorHandshake::progress(Socket& sock, const AuthSecret& secret, const char* context,
                                                    int* err) {
  for (;;) {
    ssize_t n = 0;
    switch (phase_) {
      case kSendChallenge:
        n = sock.trySend(reinterpret_cast<const char*>(&challenge_) + have_, sizeof(challenge_) - have_, err);
        if (n < 0) return Step::kClosed;
        if (n == 0) return Step::kBusy;
        have_ += (uint8_t)n;
        if (have_ == sizeof(challenge_)) phase_ = kReadResponse, have_ = 0;
        break;
      case kReadResponse:
        n = sock.tryRecv(reinterpret_cast<char*>(&response_) + have_, sizeof(response_) - have_, err);
        if (n < 0) return Step::kClosed;
        if (n == 0) return Step::kBusy;
        have_ += (uint8_t)n;
        if (have_ < sizeof(response_)) break;
        if (!checkResponse(secret, context, challenge_, response_)) {
          AuthConfirm no = refusalConfirm();
          int ignored = 0;
          (void)sock.trySend(&no, sizeof(no), &ignored);  // 32 bytes into an empty send buffer
          return Step::kRefused;
        }
        confirm_ = makeConfirm(secret, context, challenge_, response_);
        phase_ = kSendConfirm, have_ = 0;
        break;
      case kSendConfirm:
        n = sock.trySend(reinterpret_cast<const char*>(&confirm_) + have_, sizeof(confirm_) - have_, err);
        if (n < 0) return Step::kClosed;
        if (n == 0) return Step::kBusy;
        have_ += (uint8_t)n;
        if (have_ == sizeof(confirm_)) phase_ = kFinished, have_ = 0;
        break;
      case kFinished:
        return Step::kDone;
    }
  }
}

AuthConfirm refusalConfirm() {
  AuthConfirm c;
  memset(&c, 0, sizeof(c));
  return c;
}

bool isRefusal(const AuthConfirm& confirm) {
  uint8_t any = 0;
  for (uint8_t b : confirm.proof) any |= b;
  return any == 0;
}

ncclResult_t connectAuthenticated(Socket* out, const SocketAddress& addr, const AuthSecret& secret,
                                  const char* context, Deadline deadline, const std::atomic<uint32_t>* abortFlag,
                                  const char* what) {
  int backoffMs = 10;
  for (int attempt = 1;; attempt++) {
    Socket s;
    ncclResult_t res = s.connect(addr, deadline, abortFlag);
    if (res != ncclSuccess) return res;  // logged by the socket
    Deadline step = std::min(deadline, deadlineAfterMs(kAttemptMs));
    AuthChallenge challenge;
    AuthResponse response;
    AuthConfirm confirm;
    Io io = moveExact(s, false, &challenge, sizeof(challenge), step, abortFlag);
    if (io == Io::kOk) {
      if (!makeResponse(secret, context, challenge, &response)) {
        WARN("%s: %s did not open the authentication exchange: it is not a uniccl bootstrap listener of this version",
             what, addr.toString().c_str());
        return ncclRemoteError;
      }
      io = moveExact(s, true, &response, sizeof(response), step, abortFlag);
      if (io == Io::kOk) io = moveExact(s, false, &confirm, sizeof(confirm), step, abortFlag);
    }
    if (io == Io::kOk) {
      if (isRefusal(confirm)) {
        WARN("%s: %s refused this process's proof of the communicator's secret: it serves another communicator. "
             "Every rank must pass the same ncclUniqueId (with NCCL_COMM_ID: the same UNICCL_COMM_SECRET)",
             what, addr.toString().c_str());
        return ncclInvalidUsage;
      }
      if (!checkConfirm(secret, context, challenge, response, confirm)) {
        WARN("%s: %s does not prove the communicator's secret: refusing to talk to it (another process listens "
             "there)", what, addr.toString().c_str());
        return ncclRemoteError;
      }
      *out = std::move(s);
      return ncclSuccess;
    }
    if (io == Io::kAborted) {
      INFO(kSubsysBootstrap, "%s: authentication with %s: abort requested", what, addr.toString().c_str());
      return ncclInternalError;
    }
    // Dropped (the listener's table of unproven connections was full) or no
    // answer within the attempt: a fresh connection gets a fresh chance.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      WARN("%s: authentication with %s did not complete before the deadline (%d attempts; the listener %s)", what,
           addr.toString().c_str(), attempt, io == Io::kTimeout ? "stopped answering" : "kept closing the connection");
      return ncclRemoteError;
    }
    INFO(kSubsysBootstrap, "%s: %s %s during authentication (attempt %d); reconnecting", what,
         addr.toString().c_str(), io == Io::kTimeout ? "did not answer" : "dropped the connection", attempt);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(backoffMs, left)));
    backoffMs = std::min(backoffMs * 2, 200);
  }
}

}  // namespace bootstrap
}  // namespace uniccl
