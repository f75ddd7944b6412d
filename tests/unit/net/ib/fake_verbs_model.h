// The fake fabric's objects and shared state (fake_verbs.h describes the
// model), for the two files that implement it: fake_verbs.cc (the seam, and
// delivery between QPs of one process) and fake_verbs_remote.cc (delivery to
// and from QPs of other processes over a FabricWire).
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fake_fabric_wire.h"
#include "fake_verbs.h"

namespace uniccl {
namespace ib {
namespace fake {

struct FList {
  int count = 0;
};
struct FCtx {
  int dev = 0;
};
struct FPd {
  FCtx* ctx = nullptr;
};
struct FMr {
  FPd* pd = nullptr;
  uintptr_t addr = 0;
  size_t len = 0;
  int access = 0;
  uint32_t lkey = 0, rkey = 0;
};
struct FCq {
  FCtx* ctx = nullptr;
  int cqe = 0;
  std::deque<Wc> q;
};

struct FQp;

// An operation waiting at its target QP until the target's side polls. From
// a QP of this process (src), or from another process (src null; the bytes
// of a write or send travel in payload, the answer goes back on conn).
struct Inbound {
  FQp* src = nullptr;
  SendWr wr;  // from another process: localAddr means nothing here
  uint32_t srcQpn = 0;
  uint32_t srcPsn = 0;
  std::string srcAddress;
  int conn = -1;
  uint64_t opId = 0;
  std::vector<char> payload;
};

// A send WR whose target lives in another process, until that process
// acknowledges it (RC: the sender's completion waits for the target).
struct AwaitedWr {
  uint64_t opId = 0;
  SendWr wr;
};

struct FQp {
  FPd* pd = nullptr;
  FCq* scq = nullptr;
  FCq* rcq = nullptr;
  QpState state = QpState::kReset;
  uint32_t qpn = 0;
  int port = 0;
  int access = 0;
  uint32_t destQpn = 0;
  int pathMtu = 0;
  uint32_t rqPsn = 0, sqPsn = 0;
  uint32_t maxSendWr = 0, maxRecvWr = 0;
  int outstanding = 0;
  std::deque<RecvWr> rq;
  std::deque<Inbound> inbound;  // operations whose target is this QP
  // Connected to a QP of another process: its fabric address ("" when the
  // destination is in this process), ours as it sees us, the connection.
  std::string remote;
  std::string self;
  int conn = -1;
  // The peer's process is gone: what awaits an answer, and what is posted
  // later, ends in retry-exceeded once the retry timer (RTS's timeout and
  // retry count) runs out after that.
  bool peerGone = false;
  bool retriesOut = false;
  std::chrono::steady_clock::time_point goneAt;
  uint8_t timeout = 0, retryCnt = 0;  // from RTS
  uint64_t nextOpId = 1;
  std::deque<AwaitedWr> awaiting;
};

template <typename T, typename U>
T* as(U* p) {
  return reinterpret_cast<T*>(p);
}

// The opcode of the sender's completion for a WR.
inline WcOpcode senderOpcode(WrOpcode op) {
  return op == WrOpcode::kRdmaRead ? WcOpcode::kRdmaRead
         : op == WrOpcode::kSend   ? WcOpcode::kSend
                                   : WcOpcode::kRdmaWrite;
}

// "gid-<32 hex digits>" / "lid-<n>": a port's address on the fabric.
std::string fabricAddress(const Gid& gid);
std::string fabricAddress(uint16_t lid);

struct FakeVerbs::State {
  std::mutex mutex;
  std::vector<FakeDevice> devices;
  std::set<void*> ctxs, pds, mrs, cqs;
  std::map<uint32_t, FQp*> qps;
  uint32_t nextKey = 0x100;
  uint32_t nextQpn = 0x40;
  std::vector<std::string> violations;
  std::map<int, int> failModify;  // state -> errno
  int failNextStatus = 0;
  std::map<int, int> transitions;
  long long postedSends = 0;
  int createdQps = 0;
  std::function<void(int)> createQpHook;
  std::unique_ptr<FabricWire> wire;  // cross-process mode only
  std::set<std::string> ownAddresses;

  int violate(const std::string& what, int err = EINVAL) {
    violations.push_back(what);
    return err;
  }
  const FakePort* port(FQp* qp) {
    const FakeDevice& d = devices[qp->pd->ctx->dev];
    if (qp->port < 1 || qp->port > (int)d.ports.size()) return nullptr;
    return &d.ports[qp->port - 1];
  }
  FMr* findMr(FPd* pd, uint32_t key, bool remote, uintptr_t addr, size_t len, int access);
  void complete(FCq* cq, const Wc& wc) { cq->q.push_back(wc); }

  // The target's half of an operation from QP srcQpn (send PSN srcPsn):
  // checks and copies memory, consumes a receive WR, queues the target's
  // completion. `payload` holds a write's or send's bytes; a read's go to
  // `readOut`. Returns the status of the sender's completion.
  int apply(FQp* target, const SendWr& wr, uint32_t srcQpn, uint32_t srcPsn, const void* payload, void* readOut);
  // The sender's half once the target answered: the completion, and the
  // error state on failure.
  void finish(FQp* src, const SendWr& wr, int status);
  // Lands one operation queued at `target` (the caller holds the lock).
  void land(FQp* target, Inbound& in);
  // Completes every receive still posted on `qp`, and every send awaiting
  // another process's answer, with kWcWrFlushErr: a QP entering the error state.
  void flushQueues(FQp* qp);

  // Cross-process delivery (fake_verbs_remote.cc); without a wire, no-ops.
  // Reads the wire: operations for our QPs are queued at them, answers
  // complete our sends, a closed connection fails the QPs that used it.
  void pump();
  bool isOwnAddress(const std::string& address) const { return ownAddresses.count(address) > 0; }
  // RTR towards a QP of another process: remembers where and connects.
  void connectRemote(FQp* qp, const std::string& remote, const std::string& self);
  void postRemote(FQp* qp, const SendWr& wr);
  // The answer to an operation from another process.
  void answer(const Inbound& in, int status, const std::vector<char>& readData);
  // `qp` is being destroyed: operations waiting at it are answered as a
  // missing QP would be; the last QP closes the connections.
  void forgetRemote(FQp* qp);
  // `qp`'s peer process is gone (its connection closed, or nobody serves its address).
  void peerGone(FQp* qp);
  // Ends in retry-exceeded what waits on QPs whose retry timer ran out.
  void expireRetries();
};

}  // namespace fake
}  // namespace ib
}  // namespace uniccl
