// The first header a connection sends a rank's listener after proving the
// secret (ring and p2p hellos, link_listener.cc identify) and the header of
// each allGather step.
//
// Input: magic (8) | nranks (4) | seq (4) | bytesPerRank (8) | WireHeader (24).
#include "common/bootstrap/wire.h"
#include "fuzz_input.h"

using namespace uniccl;
using namespace uniccl::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  uint64_t magic = in.take<uint64_t>();
  int32_t nranks = in.take<int32_t>();
  uint32_t seq = in.take<uint32_t>();
  uint64_t bytesPerRank = in.take<uint64_t>();
  WireHeader h = in.take<WireHeader>();

  int peer = -12345;
  LinkHello kind = classifyLinkHello(h, magic, nranks, &peer);
  if (kind == LinkHello::kInvalid) {
    CHECK_OR_ABORT(peer == -12345);
  } else {
    // The caller indexes its per-rank link table with peer.
    CHECK_OR_ABORT(nranks > 0 && peer >= 0 && peer < nranks);
    CHECK_OR_ABORT(h.magic == magic && h.length == 0);
    CHECK_OR_ABORT(h.type == (kind == LinkHello::kRing ? (uint32_t)kMsgRingHello : (uint32_t)kMsgP2pHello));
  }

  RingStatus rs = checkRingHeader(h, magic, seq, bytesPerRank);
  if (rs == RingStatus::kOk)
    CHECK_OR_ABORT(h.magic == magic && h.type == kMsgRing && h.tag == seq && h.length == bytesPerRank);
  if (rs == RingStatus::kWrongSequence) CHECK_OR_ABORT(h.tag != seq);
  if (rs == RingStatus::kWrongLength) CHECK_OR_ABORT(h.tag == seq && h.length != bytesPerRank);
  return 0;
}
