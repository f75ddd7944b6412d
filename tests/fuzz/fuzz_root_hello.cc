// The root's handling of a rank's hello (root.cc: checkHelloHeader on the
// first 24 bytes a connection sends after proving the secret, then
// parseHello on the body), of the next
// block's first rank's message (parseNextFirst; the root's place among
// several roots taken from the header's tag), and the text forms of the
// address it logs.
//
// Input: magic (8) | WireHeader (24) | hello body (rest).
#include <string>

#include "common/bootstrap/wire.h"
#include "fuzz_input.h"

using namespace uniccl;
using namespace uniccl::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  uint64_t magic = in.take<uint64_t>();
  WireHeader h = in.take<WireHeader>();

  HelloHeaderStatus hs = checkHelloHeader(h, magic);
  if (hs == HelloHeaderStatus::kOk)
    CHECK_OR_ABORT(h.magic == magic &&
                   ((h.type == kMsgHello && h.length >= sizeof(HelloBody) && h.length <= kMaxInitMessageBytes) ||
                (h.type == kMsgNextFirst && h.length == sizeof(NextFirstBody))));
  else if (hs == HelloHeaderStatus::kWrongMagic)
    CHECK_OR_ABORT(h.magic != magic);

  // The root reads exactly header.length bytes; the body here is what is left
  // (its length need not match the header, parseHello is given the truth).
  const uint8_t* body = in.rest();
  size_t bytes = in.remaining();
  HelloBody hello;
  char why[256];
  why[0] = '\x7f';
  ncclResult_t res = parseHello(body, bytes, &hello, why, sizeof(why));
  if (res == ncclSuccess) {
    CHECK_OR_ABORT(bytes >= sizeof(HelloBody));
    CHECK_OR_ABORT(hello.blobBytes == bytes - sizeof(HelloBody));
    CHECK_OR_ABORT(hello.nranks > 0 && hello.nranks <= kMaxRanks && hello.rank >= 0 && hello.rank < hello.nranks);
    CHECK_OR_ABORT(hello.nRoots >= 1 && hello.nRoots <= hello.nranks && hello.rootIndex >= 0 &&
                   hello.rootIndex < hello.nRoots);
    RootBlock block = rootBlock(hello.rootIndex, hello.nranks, hello.nRoots);
    CHECK_OR_ABORT(block.first <= hello.rank && hello.rank < block.end);
    CHECK_OR_ABORT(hello.listen.valid() && hello.listen.port() > 0 && hello.listen.port() < 65536);
    std::string text = hello.listen.toString();
    CHECK_OR_ABORT(!text.empty());
  } else {
    CHECK_OR_ABORT(res == ncclRemoteError || res == ncclInvalidUsage);
    CHECK_OR_ABORT(why[0] != '\x7f' && strnlen(why, sizeof(why)) < sizeof(why));
  }
  // The same bytes as the next block's first rank's message to a root
  // (several roots): its rank must open the block after that root's.
  NextFirstBody next;
  int nRoots = 1 + (int)(h.tag % 64), rootIndex = (int)((h.tag >> 8) % (uint32_t)nRoots);
  res = parseNextFirst(body, bytes, rootIndex, nRoots, &next, why, sizeof(why));
  if (res == ncclSuccess) {
    CHECK_OR_ABORT(bytes == sizeof(NextFirstBody) && nRoots >= 2 && next.nranks >= nRoots && next.nranks <= kMaxRanks);
    CHECK_OR_ABORT(next.rank == rootBlock((rootIndex + 1) % nRoots, next.nranks, nRoots).first);
    CHECK_OR_ABORT(next.listen.valid() && next.listen.port() > 0);
  } else {
    CHECK_OR_ABORT(res == ncclRemoteError || res == ncclInvalidUsage);
  }
  // Logged for every hello the root drops, whatever its family bytes hold.
  if (bytes >= sizeof(HelloBody)) {
    HelloBody raw;
    memcpy(&raw, body, sizeof(raw));
    (void)raw.listen.toString();
    (void)raw.listen.toString(false);
  }
  return 0;
}
