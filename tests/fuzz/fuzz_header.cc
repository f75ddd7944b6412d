// The message header check every bootstrap receiver runs (bootstrap::recvHeader):
// the input is streamed through a real socket pair, so recvAll's short-read
// handling and the WARN that names the sender are exercised too.
//
// Input: magic (8) | maxLength (8) | bytes sent on the wire (rest).
#include <sys/socket.h>
#include <unistd.h>

#include "common/bootstrap/wire.h"
#include "fuzz_input.h"

using namespace uniccl;
using namespace uniccl::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  uint64_t magic = in.take<uint64_t>();
  uint64_t maxLength = in.take<uint64_t>();
  size_t wireBytes = in.remaining() < 4096 ? in.remaining() : 4096;  // stays within the socket buffer

  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  if (wireBytes && write(fds[0], in.rest(), wireBytes) != (ssize_t)wireBytes) abort();
  close(fds[0]);  // the sender hangs up: a short header must fail, never block
  Socket sock = Socket::adopt(fds[1], emptySocketAddress());
  WireHeader h;
  ncclResult_t res = recvHeader(sock, magic, maxLength, &h, deadlineAfterMs(1000), nullptr, "fuzz");

  if (wireBytes < sizeof(WireHeader)) {
    CHECK_OR_ABORT(res != ncclSuccess);
    return 0;
  }
  WireHeader sent;
  memcpy(&sent, in.rest(), sizeof(sent));
  HeaderStatus status = checkHeader(sent, magic, maxLength);
  CHECK_OR_ABORT((res == ncclSuccess) == (status == HeaderStatus::kOk));
  if (status == HeaderStatus::kOk) {
    CHECK_OR_ABORT(memcmp(&h, &sent, sizeof(h)) == 0);
    CHECK_OR_ABORT(h.magic == magic && h.length <= maxLength);
  } else {
    CHECK_OR_ABORT(res == ncclRemoteError);
    CHECK_OR_ABORT(status == HeaderStatus::kWrongMagic ? sent.magic != magic : sent.length > maxLength);
  }
  CHECK_OR_ABORT(msgTypeName(sent.type) != nullptr);
  return 0;
}
