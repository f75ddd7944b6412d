#include "common/bootstrap/wire.h"

#include <cstring>
#include <vector>

#include "common/check.h"
#include "common/util/debug.h"
#include "common/util/param.h"

namespace uniccl {
namespace bootstrap {

ncclResult_t sendMessage(Socket& sock, uint64_t magic, uint32_t type, uint32_t tag, const void* body,
                         size_t bytes, Deadline deadline, const std::atomic<uint32_t>* abortFlag) {
  WireHeader h = {magic, type, tag, bytes};
  if (bytes <= 4096) {
    char buf[sizeof(WireHeader) + 4096];
    memcpy(buf, &h, sizeof(h));
    if (bytes) memcpy(buf + sizeof(h), body, bytes);
    return sock.sendAll(buf, sizeof(h) + bytes, deadline, abortFlag);
  }
  UCHECK(sock.sendAll(&h, sizeof(h), deadline, abortFlag));
  return sock.sendAll(body, bytes, deadline, abortFlag);
}

ncclResult_t recvHeader(Socket& sock, uint64_t magic, uint64_t maxLength, WireHeader* out, Deadline deadline,
                        const std::atomic<uint32_t>* abortFlag, const char* from) {
  UCHECK(sock.recvAll(out, sizeof(*out), deadline, abortFlag));
  if (out->magic != magic) {
    WARN("Bootstrap: message from %s (%s) has the wrong magic 0x%lx (expected 0x%lx): it belongs to another "
         "communicator or is not from uniccl",
         from, sock.address().toString().c_str(), (unsigned long)out->magic, (unsigned long)magic);
    return ncclRemoteError;
  }
  if (out->length > maxLength) {
    WARN("Bootstrap: message from %s (%s) announces %lu bytes, more than the %lu allowed for a %s message", from,
         sock.address().toString().c_str(), (unsigned long)out->length, (unsigned long)maxLength,
         msgTypeName(out->type));
    return ncclRemoteError;
  }
  return ncclSuccess;
}

int64_t timeoutMs() {
  int64_t s = paramInt("UNICCL_BOOTSTRAP_TIMEOUT", 120);
  if (s <= 0) {
    WARN("UNICCL_BOOTSTRAP_TIMEOUT=%ld must be a positive number of seconds; using 120", (long)s);
    s = 120;
  }
  return s * 1000;
}

const char* msgTypeName(uint32_t type) {
  switch (type) {
    case kMsgHello: return "hello";
    case kMsgRootReply: return "root-reply";
    case kMsgRootError: return "root-error";
    case kMsgRingHello: return "ring-hello";
    case kMsgP2pHello: return "p2p-hello";
    case kMsgRing: return "ring";
    case kMsgP2p: return "p2p";
    case kMsgBcast: return "broadcast";
    default: return "unknown";
  }
}

}  // namespace bootstrap
}  // namespace uniccl
