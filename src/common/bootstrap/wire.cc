#include "common/bootstrap/wire.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/check.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

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
  HeaderStatus status = checkHeader(*out, magic, maxLength);
  if (status == HeaderStatus::kWrongMagic) {
    WARN("Bootstrap: message from %s (%s) has the wrong magic 0x%lx (expected 0x%lx): it belongs to another "
         "communicator or is not from uniccl",
         from, sock.address().toString().c_str(), (unsigned long)out->magic, (unsigned long)magic);
    return ncclRemoteError;
  }
  if (status == HeaderStatus::kTooLong) {
    WARN("Bootstrap: message from %s (%s) announces %lu bytes, more than the %lu allowed for a %s message", from,
         sock.address().toString().c_str(), (unsigned long)out->length, (unsigned long)maxLength,
         msgTypeName(out->type));
    return ncclRemoteError;
  }
  return ncclSuccess;
}

int64_t timeoutMs() {
  int64_t s = knobInt(Knob::UNICCL_BOOTSTRAP_TIMEOUT);
  if (s <= 0) {
    const int64_t dflt = knobSpec(Knob::UNICCL_BOOTSTRAP_TIMEOUT).intDefault;
    WARN("UNICCL_BOOTSTRAP_TIMEOUT=%ld must be a positive number of seconds; using %ld", (long)s, (long)dflt);
    s = dflt;
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
    case kMsgNextFirst: return "next-first";
    default: return "unknown";
  }
}

HeaderStatus checkHeader(const WireHeader& h, uint64_t magic, uint64_t maxLength) {
  if (h.magic != magic) return HeaderStatus::kWrongMagic;
  if (h.length > maxLength) return HeaderStatus::kTooLong;
  return HeaderStatus::kOk;
}

HelloHeaderStatus checkHelloHeader(const WireHeader& h, uint64_t magic) {
  if (h.magic != magic) return HelloHeaderStatus::kWrongMagic;
  if (h.type == kMsgNextFirst) return h.length == sizeof(NextFirstBody) ? HelloHeaderStatus::kOk : HelloHeaderStatus::kMalformed;
  if (h.type != kMsgHello || h.length < sizeof(HelloBody) || h.length > kMaxInitMessageBytes)
    return HelloHeaderStatus::kMalformed;
  return HelloHeaderStatus::kOk;
}

// In 64 bits: nranks may be INT_MAX in a hostile hello (base + 1 overflows int).
RootBlock rootBlock(int root, int nranks, int nRoots) {
  const int64_t base = nranks / nRoots, extra = nranks % nRoots;
  const int64_t first = root * base + std::min<int64_t>(root, extra);
  return {(int)first, (int)(first + base + (root < extra ? 1 : 0))};
}

int rootOfRank(int rank, int nranks, int nRoots) {
  const int64_t base = nranks / nRoots, extra = nranks % nRoots;
  const int64_t bigRanks = extra * (base + 1);   // ranks in the blocks with one more
  return (int)(rank < bigRanks ? rank / (base + 1) : extra + (rank - bigRanks) / base);
}

ncclResult_t parseHello(const void* body, size_t bytes, HelloBody* out, char* why, size_t whySize) {
  if (bytes < sizeof(HelloBody)) {
    snprintf(why, whySize, "hello of %zu bytes is shorter than its %zu-byte fixed part", bytes, sizeof(HelloBody));
    return ncclRemoteError;
  }
  HelloBody h;
  memcpy(&h, body, sizeof(h));
  if (h.blobBytes != bytes - sizeof(h)) {
    snprintf(why, whySize, "hello announces %u peer-info bytes but carries %zu", h.blobBytes, bytes - sizeof(h));
    return ncclRemoteError;
  }
  if (h.nranks <= 0 || h.nranks > kMaxRanks) {
    snprintf(why, whySize, "nranks %d is not in [1, %d]", h.nranks, kMaxRanks);
    return ncclInvalidUsage;
  }
  if (h.rank < 0 || h.rank >= h.nranks) {
    snprintf(why, whySize, "rank %d of nranks %d is out of range", h.rank, h.nranks);
    return ncclInvalidUsage;
  }
  if (!h.listen.valid() || h.listen.port() == 0) {
    snprintf(why, whySize, "rank %d sent an invalid listen address", h.rank);
    return ncclRemoteError;
  }
  if (h.nRoots < 1 || h.nRoots > h.nranks || h.rootIndex < 0 || h.rootIndex >= h.nRoots) {
    snprintf(why, whySize, "rank %d names root %d of %d roots for %d ranks (need 0 <= root < roots <= nranks)", h.rank,
             h.rootIndex, h.nRoots, h.nranks);
    return ncclInvalidUsage;
  }
  if (rootOfRank(h.rank, h.nranks, h.nRoots) != h.rootIndex) {
    snprintf(why, whySize, "rank %d belongs to root %d of %d, not to root %d: every rank must pass the same ids in "
             "the same order", h.rank, rootOfRank(h.rank, h.nranks, h.nRoots), h.nRoots, h.rootIndex);
    return ncclInvalidUsage;
  }
  *out = h;
  return ncclSuccess;
}

ncclResult_t parseNextFirst(const void* body, size_t bytes, int rootIndex, int nRoots, NextFirstBody* out, char* why,
                            size_t whySize) {
  if (bytes != sizeof(NextFirstBody)) {
    snprintf(why, whySize, "next-first message of %zu bytes (expected %zu)", bytes, sizeof(NextFirstBody));
    return ncclRemoteError;
  }
  NextFirstBody b;
  memcpy(&b, body, sizeof(b));
  if (nRoots < 2 || rootIndex < 0 || rootIndex >= nRoots || b.nranks < nRoots || b.nranks > kMaxRanks ||
      b.rank != rootBlock((rootIndex + 1) % nRoots, b.nranks, nRoots).first) {
    snprintf(why, whySize, "rank %d of %d is not the first rank of the block after root %d of %d", b.rank, b.nranks,
             rootIndex, nRoots);
    return ncclInvalidUsage;
  }
  if (!b.listen.valid() || b.listen.port() == 0) {
    snprintf(why, whySize, "rank %d sent an invalid listen address", b.rank);
    return ncclRemoteError;
  }
  *out = b;
  return ncclSuccess;
}

RootAnswer classifyRootAnswer(const WireHeader& h) {
  if (h.type == kMsgRootError && h.length > sizeof(int32_t) && h.length <= kMaxRootErrorBytes)
    return RootAnswer::kError;
  if (h.type == kMsgRootReply && h.length == sizeof(SocketAddress)) return RootAnswer::kSuccessor;
  return RootAnswer::kMalformed;
}

ncclResult_t decodeRootError(const void* body, size_t bytes, std::string* text) {
  text->clear();
  if (bytes < sizeof(int32_t)) return ncclRemoteError;
  const char* p = static_cast<const char*>(body);
  int32_t code;
  memcpy(&code, p, sizeof(code));
  if (code <= ncclSuccess || code >= ncclInProgress) code = ncclRemoteError;
  p += sizeof(code);
  text->assign(p, strnlen(p, bytes - sizeof(code)));
  return (ncclResult_t)code;
}

bool decodeSuccessor(const void* body, size_t bytes, SocketAddress* out) {
  if (bytes != sizeof(SocketAddress)) return false;
  SocketAddress a;
  memcpy(&a, body, sizeof(a));
  if (!a.valid()) return false;
  *out = a;
  return true;
}

LinkHello classifyLinkHello(const WireHeader& h, uint64_t magic, int nranks, int* peer) {
  if (h.magic != magic || h.length != 0 || nranks <= 0 || h.tag >= (uint32_t)nranks) return LinkHello::kInvalid;
  if (h.type != kMsgRingHello && h.type != kMsgP2pHello) return LinkHello::kInvalid;
  *peer = (int)h.tag;
  return h.type == kMsgRingHello ? LinkHello::kRing : LinkHello::kP2p;
}

RingStatus checkRingHeader(const WireHeader& h, uint64_t magic, uint32_t seq, uint64_t bytesPerRank) {
  if (h.magic != magic || h.type != kMsgRing) return RingStatus::kMalformed;
  if (h.tag != seq) return RingStatus::kWrongSequence;
  if (h.length != bytesPerRank) return RingStatus::kWrongLength;
  return RingStatus::kOk;
}

}  // namespace bootstrap
}  // namespace uniccl
