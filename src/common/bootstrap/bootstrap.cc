#include "common/bootstrap/bootstrap.h"

#include <algorithm>
#include <cstdarg>
#include <cstring>
#include <string>

#include "common/bootstrap/handshake.h"
#include "common/bootstrap/root.h"
#include "common/bootstrap/unique_id.h"
#include "common/bootstrap/wire.h"
#include "common/check.h"
#include "common/util/debug.h"

namespace uniccl {

using bootstrap::HelloBody;
using bootstrap::WireHeader;

namespace {
// Ranks wait for the root's answer a little longer than the root waits for
// the last rank, so they hear its "timed out" message instead of guessing.
constexpr int64_t kRootReplySlackMs = 5000;
}  // namespace

ncclResult_t Bootstrap::fail(ncclResult_t res, const char* fmt, ...) {
  if (res == ncclSuccess || res == ncclInProgress) return res;
  if (aborted()) return res;  // asked for: not an error worth a WARN
  std::string cause = lastErrorMessage();
  char what[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(what, sizeof(what), fmt, args);
  va_end(args);
  WARN("Bootstrap: rank %d of %d: %s: %s", rank_, nranks_, what, cause.c_str());
  return res;
}

ncclResult_t Bootstrap::init(const ncclUniqueId& id, int rank, int nranks, const void* peerInfo,
                             size_t peerInfoBytes, std::unique_ptr<Bootstrap>* out,
                             const std::atomic<uint32_t>* abortFlag) {
  return init(&id, 1, rank, nranks, peerInfo, peerInfoBytes, out, abortFlag);
}

ncclResult_t Bootstrap::init(const ncclUniqueId* ids, int nIds, int rank, int nranks, const void* peerInfo,
                             size_t peerInfoBytes, std::unique_ptr<Bootstrap>* out,
                             const std::atomic<uint32_t>* abortFlag) {
  if (ids == nullptr || nIds < 1) {
    WARN("Bootstrap::init: need at least one unique id (got %d at %p)", nIds, (const void*)ids);
    return ncclInvalidArgument;
  }
  if (!out) {
    WARN("Bootstrap::init: out is a null pointer");
    return ncclInvalidArgument;
  }
  if (nranks < 1 || nranks > bootstrap::kMaxRanks || rank < 0 || rank >= nranks) {
    WARN("Bootstrap::init: rank %d is not in [0, nranks=%d), or nranks is not in [1, %d]", rank, nranks,
         bootstrap::kMaxRanks);
    return ncclInvalidArgument;
  }
  if (peerInfoBytes > bootstrap::kMaxInitMessageBytes - sizeof(HelloBody) || (peerInfoBytes && !peerInfo)) {
    WARN("Bootstrap::init: peer info of %zu bytes at %p: must be at most %zu bytes and non-null", peerInfoBytes,
         peerInfo, (size_t)(bootstrap::kMaxInitMessageBytes - sizeof(HelloBody)));
    return ncclInvalidArgument;
  }
  // Ids beyond nranks would serve nobody: nranks roots at most (NCCL's rule).
  const int nRoots = std::min(nIds, nranks);
  std::vector<UniqueIdContents> roots(nRoots);
  for (int i = 0; i < nRoots; i++) UCHECK(decodeUniqueId(ids[i], &roots[i]));
  for (int i = 1; i < nRoots; i++) {
    if (roots[i].magic == roots[0].magic) {
      WARN("Bootstrap::init: unique ids %d and 0 are the same id: each of the %d ids must come from its own "
           "ncclGetUniqueId call", i, nIds);
      return ncclInvalidArgument;
    }
  }
  const int rootIndex = bootstrap::rootOfRank(rank, nranks, nRoots);
  const UniqueIdContents& c = roots[rootIndex];
  // Torchrun-style launches: nobody called ncclGetUniqueId, every rank built
  // the id from NCCL_COMM_ID, and rank 0 serves as the root.
  if ((c.flags & kUniqueIdFromEnv) && rank == 0) UCHECK(startRootIfAbsent(c.root, c.secret));

  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->magic_ = roots[0].magic;
  b->secret_ = roots[0].secret;
  b->timeoutMs_ = bootstrap::timeoutMs();
  b->abortFlag_ = abortFlag;
  b->outLinks_.resize(nranks);
  b->inLinks_.resize(nranks);

  std::vector<std::pair<std::string, SocketAddress>> ifs;
  UCHECK(findInterfaces(&ifs, 1));
  Socket listener;
  UCHECK(listener.listen(ifs[0].second));
  UCHECK(b->links_.start(std::move(listener), b->secret_, b->magic_, rank, nranks));

  if (nRoots > 1 && rank == bootstrap::rootBlock(rootIndex, nranks, nRoots).first) {
    const UniqueIdContents& prev = roots[(rootIndex + nRoots - 1) % nRoots];
    UCHECK(b->reportToPreviousRoot(prev.root, prev.secret, prev.magic));
  }
  SocketAddress successor;
  UCHECK(b->rendezvous(c.root, c.secret, c.magic, rootIndex, nRoots, peerInfo, peerInfoBytes, &successor));
  if (nranks > 1) UCHECK(b->connectRing(successor));

  // Everyone learns everyone's listener (for p2p links) and peer info.
  size_t slot = sizeof(SocketAddress) + peerInfoBytes;
  std::vector<char> all(slot * nranks);
  memcpy(&all[slot * rank], &b->links_.address(), sizeof(SocketAddress));
  if (peerInfoBytes) memcpy(&all[slot * rank + sizeof(SocketAddress)], peerInfo, peerInfoBytes);
  UCHECK(b->allGather(all.data(), slot));
  b->addrs_.resize(nranks);
  b->peerInfoBytes_ = peerInfoBytes;
  b->peerInfo_.resize(peerInfoBytes * nranks);
  for (int r = 0; r < nranks; r++) {
    memcpy(&b->addrs_[r], &all[slot * r], sizeof(SocketAddress));
    if (peerInfoBytes) memcpy(&b->peerInfo_[peerInfoBytes * r], &all[slot * r + sizeof(SocketAddress)], peerInfoBytes);
  }
  INFO(kSubsysBootstrap | kSubsysInit, "Bootstrap: rank %d of %d ready (listening on %s)", rank, nranks,
       b->links_.address().toString().c_str());
  *out = std::move(b);
  return ncclSuccess;
}

Bootstrap::~Bootstrap() = default;  // sockets close themselves; links_ joins its thread

ncclResult_t Bootstrap::reportToPreviousRoot(const SocketAddress& rootAddr, const AuthSecret& rootSecret,
                                             uint64_t rootMagic) {
  Socket root;
  ncclResult_t res = bootstrap::connectAuthenticated(&root, rootAddr, rootSecret, bootstrap::kRootAuthContext,
                                                     deadline(), abortFlag_, "Bootstrap: previous block's root");
  if (res != ncclSuccess)
    return fail(res, "cannot reach the previous block's bootstrap root at %s within %ld s (did every process that "
                     "made one of the ids start?)",
                rootAddr.toString().c_str(), (long)(timeoutMs_ / 1000));
  bootstrap::NextFirstBody body;
  memset(&body, 0, sizeof(body));
  body.rank = rank_;
  body.nranks = nranks_;
  body.listen = links_.address();
  res = bootstrap::sendMessage(root, rootMagic, bootstrap::kMsgNextFirst, 0, &body, sizeof(body), deadline(),
                               abortFlag_);
  if (res != ncclSuccess) return fail(res, "telling the bootstrap root %s where rank %d listens", rootAddr.toString().c_str(), rank_);
  return ncclSuccess;
}

ncclResult_t Bootstrap::rendezvous(const SocketAddress& rootAddr, const AuthSecret& rootSecret, uint64_t rootMagic,
                                   int rootIndex, int nRoots, const void* peerInfo, size_t peerInfoBytes,
                                   SocketAddress* successor) {
  Socket root;
  ncclResult_t res = bootstrap::connectAuthenticated(&root, rootAddr, rootSecret, bootstrap::kRootAuthContext,
                                                     deadline(), abortFlag_, "Bootstrap: root");
  if (res == ncclInvalidUsage) return fail(res, "joining the bootstrap root at %s", rootAddr.toString().c_str());
  if (res != ncclSuccess)
    return fail(res, "cannot reach the bootstrap root at %s within %ld s (did the process that called "
                     "ncclGetUniqueId start, and is the address reachable?)",
                rootAddr.toString().c_str(), (long)(timeoutMs_ / 1000));

  std::vector<char> hello(sizeof(HelloBody) + peerInfoBytes);
  HelloBody h;
  memset(&h, 0, sizeof(h));
  h.rank = rank_;
  h.nranks = nranks_;
  h.listen = links_.address();
  h.blobBytes = (uint32_t)peerInfoBytes;
  h.rootIndex = rootIndex;
  h.nRoots = nRoots;
  memcpy(hello.data(), &h, sizeof(h));
  if (peerInfoBytes) memcpy(hello.data() + sizeof(h), peerInfo, peerInfoBytes);
  res = bootstrap::sendMessage(root, rootMagic, bootstrap::kMsgHello, 0, hello.data(), hello.size(), deadline(),
                               abortFlag_);
  if (res != ncclSuccess) return fail(res, "sending hello to the bootstrap root %s", rootAddr.toString().c_str());

  WireHeader reply;
  Deadline replyBy = deadlineAfterMs(timeoutMs_ + kRootReplySlackMs);
  res = bootstrap::recvHeader(root, rootMagic, bootstrap::kMaxInitMessageBytes, &reply, replyBy, abortFlag_,
                              "the bootstrap root");
  if (res != ncclSuccess)
    return fail(res, "waiting for the bootstrap root %s to answer (all %d ranks must call init with this id)",
                rootAddr.toString().c_str(), nranks_);
  bootstrap::RootAnswer answer = bootstrap::classifyRootAnswer(reply);
  if (answer == bootstrap::RootAnswer::kError) {
    std::vector<char> body(reply.length);
    res = root.recvAll(body.data(), reply.length, replyBy, abortFlag_);
    if (res != ncclSuccess) return fail(res, "reading the bootstrap root's error message");
    std::string text;
    ncclResult_t code = bootstrap::decodeRootError(body.data(), body.size(), &text);
    WARN("Bootstrap: rank %d of %d: the root refused the rendezvous: %s", rank_, nranks_, text.c_str());
    return code;
  }
  if (answer != bootstrap::RootAnswer::kSuccessor) {
    WARN("Bootstrap: rank %d of %d: malformed answer from the root %s (type %s, %lu bytes)", rank_, nranks_,
         rootAddr.toString().c_str(), bootstrap::msgTypeName(reply.type), (unsigned long)reply.length);
    return ncclRemoteError;
  }
  SocketAddress raw;
  res = root.recvAll(&raw, sizeof(raw), replyBy, abortFlag_);
  if (res != ncclSuccess) return fail(res, "reading the ring successor from the bootstrap root");
  if (!bootstrap::decodeSuccessor(&raw, sizeof(raw), successor)) {
    WARN("Bootstrap: rank %d of %d: the root sent an invalid successor address", rank_, nranks_);
    return ncclRemoteError;
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::connectRing(const SocketAddress& successor) {
  int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  Deadline d = deadline();
  ncclResult_t res = bootstrap::connectAuthenticated(&ringNext_, successor, secret_, bootstrap::kLinkAuthContext, d,
                                                     abortFlag_, "Bootstrap: ring successor");
  if (res == ncclSuccess)
    res = bootstrap::sendMessage(ringNext_, magic_, bootstrap::kMsgRingHello, (uint32_t)rank_, nullptr, 0, d,
                                 abortFlag_);
  if (res != ncclSuccess)
    return fail(res, "connecting to ring successor rank %d at %s", next, successor.toString().c_str());
  res = links_.take(bootstrap::LinkHello::kRing, prev, &ringPrev_, d, abortFlag_);
  if (res != ncclSuccess) return fail(res, "waiting for ring predecessor rank %d to connect", prev);
  return ncclSuccess;
}

const void* Bootstrap::peerInfo(int rank) const {
  if (rank < 0 || rank >= nranks_) return nullptr;
  return peerInfo_.data() + peerInfoBytes_ * rank;
}

ncclResult_t Bootstrap::allGather(void* data, size_t bytesPerRank) {
  if (!data && bytesPerRank) {
    WARN("Bootstrap::allGather: data is a null pointer");
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lock(ringMutex_);
  if (nranks_ == 1) return ncclSuccess;
  uint32_t seq = ringSeq_++;
  int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  char* buf = static_cast<char*>(data);
  Deadline d = deadline();
  for (int step = 0; step < nranks_ - 1; step++) {
    int sendSlot = (rank_ - step + nranks_) % nranks_;
    int recvSlot = (rank_ - step - 1 + nranks_) % nranks_;
    WireHeader mine = {magic_, bootstrap::kMsgRing, seq, bytesPerRank}, theirs;
    ncclResult_t res = sendRecvAll(ringNext_, &mine, sizeof(mine), ringPrev_, &theirs, sizeof(theirs), d, abortFlag_);
    if (res != ncclSuccess)
      return fail(res, "allGather step %d: exchange with successor rank %d / predecessor rank %d failed (a peer "
                       "died or is stuck)",
                  step, next, prev);
    bootstrap::RingStatus status = bootstrap::checkRingHeader(theirs, magic_, seq, bytesPerRank);
    if (status == bootstrap::RingStatus::kMalformed) {
      WARN("Bootstrap: rank %d of %d: allGather got a malformed message from predecessor rank %d (type %s)", rank_,
           nranks_, prev, bootstrap::msgTypeName(theirs.type));
      return ncclRemoteError;
    }
    if (status == bootstrap::RingStatus::kWrongSequence) {
      WARN("Bootstrap: rank %d of %d: this rank is at ring operation %u but predecessor rank %d sent operation %u: "
           "ranks called allGather/barrier a different number of times",
           rank_, nranks_, seq, prev, theirs.tag);
      return ncclInternalError;
    }
    if (status == bootstrap::RingStatus::kWrongLength) {
      WARN("Bootstrap: rank %d of %d: allGather size mismatch: this rank passes %zu bytes per rank, predecessor rank "
           "%d passes %lu",
           rank_, nranks_, bytesPerRank, prev, (unsigned long)theirs.length);
      return ncclInternalError;
    }
    res = sendRecvAll(ringNext_, buf + bytesPerRank * sendSlot, bytesPerRank, ringPrev_, buf + bytesPerRank * recvSlot,
                      bytesPerRank, d, abortFlag_);
    if (res != ncclSuccess)
      return fail(res, "allGather step %d: data exchange with successor rank %d / predecessor rank %d failed", step,
                  next, prev);
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::barrier() {
  std::vector<uint8_t> tokens(nranks_, 0);
  tokens[rank_] = 1;
  UCHECK(allGather(tokens.data(), 1));
  for (int r = 0; r < nranks_; r++) {
    if (tokens[r] != 1) {
      WARN("Bootstrap: rank %d of %d: barrier token of rank %d is corrupt", rank_, nranks_, r);
      return ncclInternalError;
    }
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::send(int peer, uint32_t tag, const void* data, size_t bytes) {
  if (peer < 0 || peer >= nranks_ || (bytes && !data) || bytes > bootstrap::kMaxP2pMessageBytes) {
    WARN("Bootstrap::send: invalid arguments (peer %d of %d, %zu bytes at %p)", peer, nranks_, bytes, data);
    return ncclInvalidArgument;
  }
  return sendTyped(peer, bootstrap::kMsgP2p, tag, data, bytes);
}

ncclResult_t Bootstrap::recv(int peer, uint32_t tag, void* data, size_t bytes) {
  if (peer < 0 || peer >= nranks_ || (bytes && !data)) {
    WARN("Bootstrap::recv: invalid arguments (peer %d of %d, %zu bytes at %p)", peer, nranks_, bytes, data);
    return ncclInvalidArgument;
  }
  return recvTyped(peer, bootstrap::kMsgP2p, tag, data, bytes);
}

ncclResult_t Bootstrap::broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= nranks_ || (bytes && !data) || bytes > bootstrap::kMaxP2pMessageBytes) {
    WARN("Bootstrap::broadcast: invalid arguments (root %d of %d, %zu bytes at %p)", root, nranks_, bytes, data);
    return ncclInvalidArgument;
  }
  uint32_t seq = bcastSeq_++;
  if (rank_ == root) {
    for (int p = 0; p < nranks_; p++)
      if (p != root) UCHECK(sendTyped(p, bootstrap::kMsgBcast, seq, data, bytes));
    return ncclSuccess;
  }
  return recvTyped(root, bootstrap::kMsgBcast, seq, data, bytes);
}

ncclResult_t Bootstrap::sendTyped(int peer, uint32_t type, uint32_t tag, const void* data, size_t bytes) {
  if (peer == rank_) {
    const char* p = static_cast<const char*>(data);
    std::lock_guard<std::mutex> lock(recvMutex_);
    unexpected_[Key(peer, type, tag)].emplace_back(p, p + bytes);
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(sendMutex_);
  Deadline d = deadline();
  Socket& link = outLinks_[peer];
  ncclResult_t res = ncclSuccess;
  if (!link.isOpen()) {
    res = bootstrap::connectAuthenticated(&link, addrs_[peer], secret_, bootstrap::kLinkAuthContext, d, abortFlag_,
                                          "Bootstrap: p2p link");
    if (res == ncclSuccess)
      res = bootstrap::sendMessage(link, magic_, bootstrap::kMsgP2pHello, (uint32_t)rank_, nullptr, 0, d, abortFlag_);
    if (res != ncclSuccess) {
      link.close();
      return fail(res, "connecting to rank %d at %s", peer, addrs_[peer].toString().c_str());
    }
  }
  res = bootstrap::sendMessage(link, magic_, type, tag, data, bytes, d, abortFlag_);
  if (res != ncclSuccess) {
    link.close();  // a partly sent message leaves the stream unusable
    return fail(res, "sending %zu bytes (%s, tag %u) to rank %d", bytes, bootstrap::msgTypeName(type), tag, peer);
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::recvTyped(int peer, uint32_t type, uint32_t tag, void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(recvMutex_);
  Key key(peer, type, tag);
  auto it = unexpected_.find(key);
  if (it != unexpected_.end() && !it->second.empty()) {
    std::vector<char> msg = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) unexpected_.erase(it);
    if (msg.size() != bytes) {
      WARN("Bootstrap: rank %d of %d: size mismatch: expected %zu bytes from rank %d (%s, tag %u) but it sent %zu",
           rank_, nranks_, bytes, peer, bootstrap::msgTypeName(type), tag, msg.size());
      return ncclInternalError;
    }
    if (bytes) memcpy(data, msg.data(), bytes);
    return ncclSuccess;
  }
  if (peer == rank_) {
    WARN("Bootstrap: rank %d: recv from itself (tag %u) without an earlier send to itself", rank_, tag);
    return ncclInvalidUsage;
  }
  Deadline d = deadline();
  Socket& link = inLinks_[peer];
  if (!link.isOpen()) {
    ncclResult_t res = links_.take(bootstrap::LinkHello::kP2p, peer, &link, d, abortFlag_);
    if (res != ncclSuccess) return fail(res, "waiting for rank %d to connect (%s, tag %u)", peer,
                                        bootstrap::msgTypeName(type), tag);
  }
  char from[32];
  snprintf(from, sizeof(from), "rank %d", peer);
  for (;;) {
    WireHeader h;
    ncclResult_t res = bootstrap::recvHeader(link, magic_, bootstrap::kMaxP2pMessageBytes, &h, d, abortFlag_, from);
    if (res != ncclSuccess) {
      link.close();
      return fail(res, "receiving from rank %d (%s, tag %u)", peer, bootstrap::msgTypeName(type), tag);
    }
    if (h.type != bootstrap::kMsgP2p && h.type != bootstrap::kMsgBcast) {
      link.close();
      WARN("Bootstrap: rank %d of %d: rank %d sent an unexpected %s message", rank_, nranks_, peer,
           bootstrap::msgTypeName(h.type));
      return ncclRemoteError;
    }
    bool match = h.type == type && h.tag == tag;
    if (match && h.length == bytes) {
      res = link.recvAll(data, bytes, d, abortFlag_);
      if (res != ncclSuccess) {
        link.close();
        return fail(res, "receiving %zu bytes from rank %d (%s, tag %u)", bytes, peer, bootstrap::msgTypeName(type),
                    tag);
      }
      return ncclSuccess;
    }
    std::vector<char> body;
    try {
      body.resize(h.length);
    } catch (const std::bad_alloc&) {
      link.close();
      WARN("Bootstrap: rank %d: cannot hold a %lu-byte message from rank %d", rank_, (unsigned long)h.length, peer);
      return ncclSystemError;
    }
    res = link.recvAll(body.data(), body.size(), d, abortFlag_);
    if (res != ncclSuccess) {
      link.close();
      return fail(res, "receiving from rank %d (%s, tag %u)", peer, bootstrap::msgTypeName(h.type), h.tag);
    }
    if (match) {
      WARN("Bootstrap: rank %d of %d: size mismatch: expected %zu bytes from rank %d (%s, tag %u) but it sent %lu",
           rank_, nranks_, bytes, peer, bootstrap::msgTypeName(type), tag, (unsigned long)h.length);
      return ncclInternalError;
    }
    unexpected_[Key(peer, h.type, h.tag)].push_back(std::move(body));
  }
}

}  // namespace uniccl
