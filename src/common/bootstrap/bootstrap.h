// The rendezvous of the ranks of one communicator, and the small host-side
// collectives the core needs during init (NCCL's bootstrap, uniccl's design).
//
// init() meets the root named by the id, links the ranks in a ring, and
// allgathers each rank's peer-info blob (host hash, pid, device, bus id, ...).
// Point-to-point links are opened lazily, one TCP connection per direction.
// Every wait ends within UNICCL_BOOTSTRAP_TIMEOUT seconds or when the abort
// flag is raised; a dead peer fails the call with a WARN naming its rank.
// Every connection (to the root, ring and p2p links) proves the
// communicator's secret first (handshake.h); a rank's listener is a thread
// that serves all its incoming connections at once (link_listener.h).
//
// Thread safety: send and recv may run concurrently from different threads;
// collectives (allGather, barrier, broadcast) are called by one thread at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "common/bootstrap/link_listener.h"
#include "common/util/auth.h"
#include "common/util/socket.h"
#include "uniccl.h"

namespace uniccl {

class Bootstrap {
 public:
  [[nodiscard]] static ncclResult_t init(const ncclUniqueId& id, int rank, int nranks, const void* peerInfo, size_t peerInfoBytes,
                           std::unique_ptr<Bootstrap>* out, const std::atomic<uint32_t>* abortFlag = nullptr);
  // ncclCommInitRankScalable: nIds ids, each made by ncclGetUniqueId in a
  // different process, the same array on every rank. Each id's root serves
  // a contiguous block of ranks (wire.h: rootBlock); the first rank of each
  // block also tells the previous block's root where it listens, so that
  // root links its last rank to it and the blocks form one ring. Ring and
  // point-to-point messages carry the first id's magic.
  [[nodiscard]] static ncclResult_t init(const ncclUniqueId* ids, int nIds, int rank, int nranks, const void* peerInfo,
                           size_t peerInfoBytes, std::unique_ptr<Bootstrap>* out,
                           const std::atomic<uint32_t>* abortFlag = nullptr);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // Rank r's peer-info blob as passed to its init (nullptr when r is out of range).
  const void* peerInfo(int rank) const;
  size_t peerInfoBytes() const { return peerInfoBytes_; }
  // The communicator's secret (from the first unique id): what ring, p2p,
  // NET and import-service peers prove to each other, and the key of names
  // other processes must not guess (deriveFromSecret).
  const AuthSecret& secret() const { return secret_; }
  // Where this rank accepts ring and p2p links.
  const SocketAddress& listenAddress() const { return links_.address(); }

  // `data` holds nranks slots of bytesPerRank; this rank's slot is filled in.
  // On return every slot is (ring allgather).
  [[nodiscard]] ncclResult_t allGather(void* data, size_t bytesPerRank);
  [[nodiscard]] ncclResult_t barrier();
  // Messages are matched by (peer, tag); others that arrive first are queued.
  [[nodiscard]] ncclResult_t send(int peer, uint32_t tag, const void* data, size_t bytes);
  [[nodiscard]] ncclResult_t recv(int peer, uint32_t tag, void* data, size_t bytes);
  [[nodiscard]] ncclResult_t broadcast(void* data, size_t bytes, int root);

 private:
  using Key = std::tuple<int, uint32_t, uint32_t>;  // peer, message type, tag

  Bootstrap() = default;
  // Hello to the root of this rank's block (its secret and magic), which
  // answers with the ring successor's listen address.
  [[nodiscard]] ncclResult_t rendezvous(const SocketAddress& root, const AuthSecret& rootSecret, uint64_t rootMagic,
                          int rootIndex, int nRoots, const void* peerInfo, size_t peerInfoBytes,
                          SocketAddress* successor);
  // Tells the previous block's root (several roots) where this rank listens.
  [[nodiscard]] ncclResult_t reportToPreviousRoot(const SocketAddress& root, const AuthSecret& rootSecret, uint64_t rootMagic);
  [[nodiscard]] ncclResult_t connectRing(const SocketAddress& successor);
  [[nodiscard]] ncclResult_t sendTyped(int peer, uint32_t type, uint32_t tag, const void* data, size_t bytes);
  [[nodiscard]] ncclResult_t recvTyped(int peer, uint32_t type, uint32_t tag, void* data, size_t bytes);
  // Adds this rank and what failed to the socket-level error, WARNs, returns res.
  [[nodiscard]] ncclResult_t fail(ncclResult_t res, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  bool aborted() const { return abortFlag_ && abortFlag_->load(std::memory_order_acquire) != 0; }
  Deadline deadline() const { return deadlineAfterMs(timeoutMs_); }

  int rank_ = -1;
  int nranks_ = 0;
  uint64_t magic_ = 0;
  AuthSecret secret_{};
  int64_t timeoutMs_ = 0;
  const std::atomic<uint32_t>* abortFlag_ = nullptr;

  bootstrap::LinkListener links_;
  Socket ringNext_, ringPrev_;
  std::vector<SocketAddress> addrs_;  // every rank's listener
  std::vector<char> peerInfo_;
  size_t peerInfoBytes_ = 0;
  uint32_t ringSeq_ = 0;
  uint32_t bcastSeq_ = 0;
  std::mutex ringMutex_;

  std::mutex sendMutex_;
  std::vector<Socket> outLinks_;  // this rank -> peer

  std::mutex recvMutex_;
  std::vector<Socket> inLinks_;  // peer -> this rank
  std::map<Key, std::deque<std::vector<char>>> unexpected_;
};

}  // namespace uniccl
