// The bootstrap wire protocol. Every message is a WireHeader followed by
// `length` bytes of body; receivers check the magic (from the unique id) and
// bound the length before they allocate anything.
//
//   rank -> root   Hello      body HelloBody + peer-info blob
//   root -> rank   RootReply  body SocketAddress of the rank's ring successor
//   root -> rank   RootError  body int32 ncclResult_t + text (why init failed)
//   rank -> rank   RingHello  tag = sender rank, no body (opens the ring link)
//   rank -> rank   P2pHello   tag = sender rank, no body (opens a send link)
//   ring           Ring       tag = ring sequence number, body = one slot
//   p2p            P2p        tag = user tag; Bcast: tag = broadcast sequence
#pragma once

#include <atomic>
#include <cstdint>

#include "common/util/socket.h"

namespace uniccl {
namespace bootstrap {

enum MsgType : uint32_t {
  kMsgHello = 1,
  kMsgRootReply = 2,
  kMsgRootError = 3,
  kMsgRingHello = 4,
  kMsgP2pHello = 5,
  kMsgRing = 6,
  kMsgP2p = 7,
  kMsgBcast = 8,
};

struct WireHeader {
  uint64_t magic;
  uint32_t type;
  uint32_t tag;
  uint64_t length;
};
static_assert(sizeof(WireHeader) == 24, "wire layout");

struct HelloBody {
  int32_t rank;
  int32_t nranks;
  SocketAddress listen;  // where the rank accepts ring and p2p links
  uint32_t blobBytes;    // peer-info bytes that follow
};
static_assert(sizeof(HelloBody) == 40, "wire layout");

// Init messages (hello, root replies) are small; anything larger is hostile.
constexpr uint64_t kMaxInitMessageBytes = 1u << 20;
// Point-to-point and broadcast payloads.
constexpr uint64_t kMaxP2pMessageBytes = 1ull << 32;
constexpr uint64_t kMaxRootErrorBytes = 4096;

// Header + body in one call (for small messages; large bodies are sent apart).
ncclResult_t sendMessage(Socket& sock, uint64_t magic, uint32_t type, uint32_t tag, const void* body,
                         size_t bytes, Deadline deadline, const std::atomic<uint32_t>* abortFlag);

// Reads one header and checks its magic and that length <= maxLength.
// Wrong magic or length -> ncclRemoteError with a WARN naming `from`.
ncclResult_t recvHeader(Socket& sock, uint64_t magic, uint64_t maxLength, WireHeader* out, Deadline deadline,
                        const std::atomic<uint32_t>* abortFlag, const char* from);

const char* msgTypeName(uint32_t type);

// UNICCL_BOOTSTRAP_TIMEOUT (seconds, default 120) in ms. Read at every init
// and root start, not cached, so tests can change it.
int64_t timeoutMs();

}  // namespace bootstrap
}  // namespace uniccl
