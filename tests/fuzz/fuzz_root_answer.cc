// A rank's handling of the root's answer (bootstrap.cc rendezvous): the
// header classification, then the error message or the ring successor.
//
// Input: WireHeader (24) | body (rest).
#include <string>

#include "common/bootstrap/wire.h"
#include "fuzz_input.h"

using namespace uniccl;
using namespace uniccl::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  WireHeader h = in.take<WireHeader>();
  RootAnswer kind = classifyRootAnswer(h);
  if (kind == RootAnswer::kError)
    CHECK_OR_ABORT(h.type == kMsgRootError && h.length > 4 && h.length <= kMaxRootErrorBytes);
  if (kind == RootAnswer::kSuccessor) CHECK_OR_ABORT(h.type == kMsgRootReply && h.length == sizeof(SocketAddress));

  // Both decoders see every body, whatever the header said: the rank reads
  // header.length bytes, but the decoders must stand on their own.
  const uint8_t* body = in.rest();
  size_t bytes = in.remaining();
  std::string text;
  ncclResult_t code = decodeRootError(body, bytes, &text);
  CHECK_OR_ABORT(code > ncclSuccess && code < ncclInProgress);
  CHECK_OR_ABORT(text.size() + 4 <= (bytes < 4 ? 4 : bytes));
  CHECK_OR_ABORT(text.find('\0') == std::string::npos);

  SocketAddress next = emptySocketAddress();
  if (decodeSuccessor(body, bytes, &next)) {
    CHECK_OR_ABORT(bytes == sizeof(SocketAddress) && next.valid());
    CHECK_OR_ABORT(!next.toString().empty());
  } else {
    CHECK_OR_ABORT(!next.valid());  // untouched on failure
  }
  return 0;
}
