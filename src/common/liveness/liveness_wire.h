// The liveness links' messages (peer_liveness.h): fixed 16-byte frames, so a
// reader needs no state beyond one partial frame, and anything else on the
// link (a wrong check word) ends it like a closed connection.
#pragma once

#include <cstdint>

namespace uniccl {
namespace liveness {

constexpr uint32_t kCheck = 0x4556494c;   // "LIVE"

enum MsgType : uint32_t {
  kHello = 1,       // connector -> acceptor after the secret was proven; rank = sender
  kHeartbeat = 2,   // nothing else was sent for a quarter of the peer timeout
  kLeaving = 3,     // sender destroys the communicator: not a loss
  kAborted = 4,     // sender aborted (ncclCommAbort, failed init): a loss
  kLost = 5,        // rank `rank` is gone for `reason`; forwarded once by every rank
};

enum Reason : uint32_t {
  kClosed = 1,    // its link closed or reset: the process ended
  kSilent = 2,    // no heartbeat for the peer timeout
  kAbortedIt = 3, // it said it aborted
  kUnreachable = 4,  // a transport of the reporting rank could not reach it (said before aborting)
};

struct Msg {
  uint32_t check;
  uint32_t type;
  int32_t rank;
  uint32_t reason;
};
static_assert(sizeof(Msg) == 16, "wire layout");

inline Msg makeMsg(MsgType type, int32_t rank, uint32_t reason = 0) { return Msg{kCheck, type, rank, reason}; }

}  // namespace liveness
}  // namespace uniccl
