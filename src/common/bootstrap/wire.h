// The bootstrap wire protocol. Every connection first runs the
// challenge-response of handshake.h (the listener speaks first; 20, 48 and
// 32 bytes), so that nothing below is read from a peer that has not proved
// the communicator's secret. Then every message is a WireHeader followed by
// `length` bytes of body; receivers check the magic (from the unique id) and
// bound the length before they allocate anything.
//
//   rank -> root   Hello      body HelloBody + peer-info blob
//   rank -> root   NextFirst  body NextFirstBody (several roots: the first rank
//                             of a root's block tells the previous root where
//                             it listens, the ring successor of that block's last rank)
//   root -> rank   RootReply  body SocketAddress of the rank's ring successor
//   root -> rank   RootError  body int32 ncclResult_t + text (why init failed)
//   rank -> rank   RingHello  tag = sender rank, no body (opens the ring link)
//   rank -> rank   P2pHello   tag = sender rank, no body (opens a send link)
//   ring           Ring       tag = ring sequence number, body = one slot
//   p2p            P2p        tag = user tag; Bcast: tag = broadcast sequence
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

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
  kMsgNextFirst = 9,
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
  // ncclCommInitRankScalable: the ids are nRoots roots, and this root is
  // number rootIndex; it serves the block rootBlock(rootIndex) of the ranks.
  int32_t rootIndex;
  int32_t nRoots;
};
static_assert(sizeof(HelloBody) == 48, "wire layout");

struct NextFirstBody {
  int32_t rank;          // first rank of the next root's block
  int32_t nranks;
  SocketAddress listen;
};
static_assert(sizeof(NextFirstBody) == 36, "wire layout");

// The ranks root `root` of `nRoots` serves: [first, end). Blocks are
// contiguous, in root order, and differ in size by at most one rank (the
// first nranks % nRoots roots take one more), as NCCL distributes them.
struct RootBlock {
  int first;
  int end;
};
RootBlock rootBlock(int root, int nranks, int nRoots);
// The root whose block holds `rank`.
int rootOfRank(int rank, int nranks, int nRoots);

// The most ranks a communicator may have (2^20): far beyond any machine, and
// a bound on what a root or a rank allocates per rank. Hellos that claim
// more are refused.
constexpr int kMaxRanks = 1 << 20;

// Init messages (hello, root replies) are small; anything larger is hostile.
constexpr uint64_t kMaxInitMessageBytes = 1u << 20;
// Point-to-point and broadcast payloads.
constexpr uint64_t kMaxP2pMessageBytes = 1ull << 32;
constexpr uint64_t kMaxRootErrorBytes = 4096;

// Header + body in one call (for small messages; large bodies are sent apart).
[[nodiscard]] ncclResult_t sendMessage(Socket& sock, uint64_t magic, uint32_t type, uint32_t tag, const void* body,
                         size_t bytes, Deadline deadline, const std::atomic<uint32_t>* abortFlag);

// Reads one header and checks its magic and that length <= maxLength.
// Wrong magic or length -> ncclRemoteError with a WARN naming `from`.
[[nodiscard]] ncclResult_t recvHeader(Socket& sock, uint64_t magic, uint64_t maxLength, WireHeader* out, Deadline deadline,
                        const std::atomic<uint32_t>* abortFlag, const char* from);

const char* msgTypeName(uint32_t type);

// ---- Checks of received bytes. Pure (no I/O, no logging) so that the
// receivers above and in root.cc / bootstrap.cc share them with the fuzz
// targets in tests/fuzz, which feed them hostile input.

enum class HeaderStatus { kOk, kWrongMagic, kTooLong };
// recvHeader's check: the magic matches and length <= maxLength.
HeaderStatus checkHeader(const WireHeader& h, uint64_t magic, uint64_t maxLength);

// The root's check of a new connection's first header: a hello of a size
// between sizeof(HelloBody) and kMaxInitMessageBytes, or a NextFirst of
// exactly sizeof(NextFirstBody).
enum class HelloHeaderStatus { kOk, kWrongMagic, kMalformed };
HelloHeaderStatus checkHelloHeader(const WireHeader& h, uint64_t magic);

// The root's checks of a hello body (`bytes` = header.length) that need no
// state: the blob size it announces matches what it carries, 0 <= rank <
// nranks <= kMaxRanks, a listen address with a port, 1 <= nRoots <= nranks, the rank in
// the block of its root index. Success: *out is the hello. Failure:
// the code to send back (ncclRemoteError: malformed; ncclInvalidUsage: the
// user passed bad ranks) and `why` (NUL-terminated, at most whySize bytes).
[[nodiscard]] ncclResult_t parseHello(const void* body, size_t bytes, HelloBody* out, char* why, size_t whySize);

// The root's checks of a NextFirst body: its size, a rank that is the first
// of root `rootIndex + 1`'s block, a listen address with a port.
[[nodiscard]] ncclResult_t parseNextFirst(const void* body, size_t bytes, int rootIndex, int nRoots, NextFirstBody* out, char* why,
                            size_t whySize);

// What a rank makes of the root's answer header (before reading the body):
// an error message (4 < length <= kMaxRootErrorBytes), its ring successor
// (length == sizeof(SocketAddress)), or something malformed.
enum class RootAnswer { kError, kSuccessor, kMalformed };
RootAnswer classifyRootAnswer(const WireHeader& h);

// A RootError body: int32 code + text. Returns the code, forced to
// ncclRemoteError when it is not a failure code; *text = the message (up to
// the first NUL or the end of the body).
[[nodiscard]] ncclResult_t decodeRootError(const void* body, size_t bytes, std::string* text);

// A RootReply body: the successor's listen address. False when it is not
// sizeof(SocketAddress) bytes or not a valid IPv4/IPv6 address.
bool decodeSuccessor(const void* body, size_t bytes, SocketAddress* out);

// The first header on a rank's listener says which link a peer opens: a ring
// or p2p hello with the right magic, no body and tag (= sender rank) < nranks.
// *peer = that rank (only set when the answer is not kInvalid).
enum class LinkHello { kRing, kP2p, kInvalid };
LinkHello classifyLinkHello(const WireHeader& h, uint64_t magic, int nranks, int* peer);

// The header of one allGather step from the ring predecessor.
enum class RingStatus { kOk, kMalformed, kWrongSequence, kWrongLength };
RingStatus checkRingHeader(const WireHeader& h, uint64_t magic, uint32_t seq, uint64_t bytesPerRank);

// UNICCL_BOOTSTRAP_TIMEOUT (seconds, default 120) in ms. Read at every init
// and root start, not cached, so tests can change it.
int64_t timeoutMs();

}  // namespace bootstrap
}  // namespace uniccl
