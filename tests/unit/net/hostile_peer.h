// Raw TCP peers that do to a net listener what a port scanner, a flood or a
// stranger does: connect and close, connect and stay silent, open with a
// proof of the wrong key. Shared by the Socket and IB listener tests.
#pragma once

#include <chrono>
#include <cstring>
#include <thread>

#include "common/util/auth.h"
#include "common/util/socket.h"
#include "net/listener_guard.h"

namespace uniccl {
namespace hostile {

// The Socket and IB handles both start with the listener's address, a pad
// word and the listener's secret (socket_transport.cc, ib/ib_handshake.h).
struct HandleView {
  SocketAddress addr;
  uint32_t pad;
  ListenerSecret secret;
};

inline HandleView viewHandle(const char* handle) {
  HandleView v;
  memcpy(&v, handle, sizeof(v));
  return v;
}

inline bool connectRaw(const SocketAddress& addr, Socket* out) {
  return out->connect(addr, deadlineAfterMs(5000)) == ncclSuccess;
}

// An answer to the listener's challenge made with another key (or for
// another use, through `context`): what a process without the handle can do.
inline AuthResponse proofOfOtherKey(const HandleView& h, const char* context) {
  ListenerSecret other;
  newListenerSecret(&other);
  AuthResponse r;
  makeResponse(other.key, context, h.secret.challenge, &r);
  return r;
}

// Calls pump() (the listener's accept) until the listener closes `sock`, at
// most `seconds`: true when it closed it; *bytes = what it sent before.
template <typename Pump>
bool closedByListener(Socket& sock, int seconds, Pump pump, size_t* bytes) {
  *bytes = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  char buf[256];
  while (std::chrono::steady_clock::now() < deadline) {
    pump();
    int err = 0;
    ssize_t n = sock.tryRecv(buf, sizeof(buf), &err);
    if (n < 0) return true;
    *bytes += (size_t)n;
    if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace hostile
}  // namespace uniccl
