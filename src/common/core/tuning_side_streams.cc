// Tuning's side-stream choices (core/tuning.h, planSideStreams): which
// tasks of a group leave its kernels for a copy engine or a side kernel.
// The mechanisms say what can be matched and what a choice becomes
// (core/ce_sendrecv.h, ce_broadcast.h, allreduce_ce_split.h,
// self_copy_kernel.h); this file says which to take, from the knobs and
// what was measured (docs/performance-history.md), and in which order.
#include <algorithm>
#include <cstdint>

#include "common/core/tuning.h"
#include "common/check.h"
#include "common/core/allreduce_ce_split.h"
#include "common/core/ce_broadcast.h"
#include "common/core/ce_sendrecv.h"
#include "common/core/comm_plan.h"
#include "common/core/comm_transport.h"
#include "common/core/redop.h"
#include "common/core/self_copy_kernel.h"
#include "common/core/side_stream.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {

size_t taskBytes(const Task& t) { return t.count * dataTypeSize(t.dtype); }

// The one stream of all the plan's tasks; false when several.
bool singleStream(const CommPlan& p, gpu::Stream* out) {
  bool have = false;
  for (const std::vector<Task>* list : {&p.tasks.colls, &p.tasks.p2p}) {
    for (const Task& t : *list) {
      if (have && t.stream != *out) return false;
      *out = t.stream;
      have = true;
    }
  }
  return have;
}

// Capture state of the plan's one stream: the plan's when the group end
// asked already (checkTaskStreams: the first task's stream), else the runtime's.
[[nodiscard]] ncclResult_t captureStatus(const CommPlan& p, gpu::Stream stream, gpu::CaptureStatus* status) {
  gpu::CaptureInfo cap = p.launch.capture;
  if (!p.launch.captureKnown) UCHECK(gpu::streamGetCaptureInfo(stream, &cap));
  *status = cap.status;
  return ncclSuccess;
}

bool hasLargeTask(const CommPlan& p, const SideStreamKnobs& k) {
  auto large = [&](const Task& t) { return taskBytes(t) >= k.copyEngineMinBytes; };
  return std::any_of(p.tasks.p2p.begin(), p.tasks.p2p.end(), large) ||
         std::any_of(p.tasks.colls.begin(), p.tasks.colls.end(), [&](const Task& t) {
           return (t.kind == TaskKind::Broadcast && large(t)) ||
                  (t.kind == TaskKind::AllReduce && taskBytes(t) >= k.allReduceMinBytes);
         });
}

// A communicator that may take part in copy-engine copies: path on, no
// profiler (its events follow the kernels), no GPU shared by several of its
// ranks (one stream per rank, gpu_sharing.h), a task large enough, one
// stream, not capturing (copies cannot join two graphs).
bool mayUseCopyEngines(const CommPlan& p, const SideStreamKnobs& k, gpu::Stream* stream) {
  if (p.sides->copyEngineOff || p.gpuShared || p.observer != nullptr || !hasLargeTask(p, k)) return false;
  if (!singleStream(p, stream)) return false;
  gpu::CaptureStatus status;
  if (captureStatus(p, *stream, &status) != ncclSuccess) return false;
  return status == gpu::CaptureStatus::None;
}

// Whether all of the plan's messages of `kind` that involve another rank
// involve the same one. A rank that fans out to (or in from) several peers
// keeps the kernels: they move every peer's part at once over the
// channels, where one side stream would copy them one after the other
// (AlltoAll on 4 H200s: 196 GB/s busbw by copy engine, 322 by the kernels).
bool oneRemotePeer(const CommPlan& p, TaskKind kind) {
  int peer = -1;
  for (const Task& t : p.tasks.p2p) {
    if (t.kind != kind || t.peer() == p.rank) continue;
    if (peer >= 0 && t.peer() != peer) return false;
    peer = t.peer();
  }
  return true;
}

// Peer copies only between GPUs that address each other (P2P).
bool directPeers(const CommPlan& a, const CommPlan& b) {
  return transportBetween(a.comm, a.rank, b.rank) == TransportKind::P2p;
}

// The plan in the group of rank `rank` of the communicator `of` belongs to.
CommPlan* rankOf(GroupPlan& group, const CommPlan& of, int rank) {
  for (CommPlan& p : group)
    if (p.side.ceMatched && p.commHash == of.commHash && p.nRanks == of.nRanks && p.rank == rank)
      return &p;
  return nullptr;
}

// Large sends whose recv is in the group, from ranks that send to one peer
// to ranks that receive from one peer (a rank's message to itself too stays
// off: measured faster by the kernels).
void chooseSendRecvCopies(GroupPlan& group, const SideStreamKnobs& k) {
  for (CommPlan& A : group) {
    if (!A.side.ceMatched || !oneRemotePeer(A, TaskKind::Send)) continue;
    const std::vector<Task>& ts = A.tasks.p2p;
    for (size_t i = 0; i < ts.size(); i++) {
      const Task& s = ts[i];
      if (s.kind != TaskKind::Send || s.peer() == A.rank || taskBytes(s) < k.copyEngineMinBytes) continue;
      CommPlan* B = rankOf(group, A, s.peer());
      if (B == nullptr) continue;   // the receiver is not in this group
      if (!oneRemotePeer(*B, TaskKind::Recv) || !directPeers(A, *B)) continue;
      const long r = matchingRecv(A, i, *B);
      if (r >= 0) planSendRecvCopy(A, i, *B, (size_t)r);
    }
  }
}

// Calls fn(A, B, k) for the k-th collective of each 2-rank communicator with
// both ranks in the group (A: rank 0, B: rank 1), when both ranks posted the
// same number of collectives before the group (the k-th of this group on A
// is then the k-th on B) and reach each other by P2P.
template <typename PairFn>
void forEachPairedCollective(GroupPlan& group, PairFn&& fn) {
  for (CommPlan& A : group) {
    if (!A.side.ceMatched || A.nRanks != 2 || A.rank != 0) continue;   // each pair once, from rank 0
    CommPlan* B = rankOf(group, A, 1);
    if (B == nullptr) continue;
    if (A.sides->collsPosted != B->sides->collsPosted || !directPeers(A, *B)) continue;
    const size_t n = std::min(A.tasks.colls.size(), B->tasks.colls.size());
    for (size_t i = 0; i < n; i++) fn(A, *B, i);
  }
}

// Messages to itself: the k-th send to itself meets the k-th recv from
// itself (the planner's pairing); pairs of equal, large sizes go to a side
// kernel when some other task of the comm keeps its kernels busy meanwhile.
// Eager, the side kernel costs a launch and two event calls on the host
// (2-3 us: slower below about 1 MiB); in a graph only a node.
[[nodiscard]] ncclResult_t chooseSelfCopies(CommPlan& p, const SideStreamKnobs& k) {
  gpu::Stream stream = nullptr;
  if (!singleStream(p, &stream)) return ncclSuccess;
  const std::vector<Task>& ts = p.tasks.p2p;
  std::vector<size_t>& sends = p.side.selfSends;
  std::vector<size_t>& recvs = p.side.selfRecvs;
  sends.clear();
  recvs.clear();
  for (size_t i = 0; i < ts.size(); i++) {
    if (ts[i].peer() != p.rank) continue;
    (ts[i].kind == TaskKind::Send ? sends : recvs).push_back(i);
  }
  const size_t pairs = std::min(sends.size(), recvs.size());
  if (pairs == 0) return ncclSuccess;
  gpu::CaptureStatus status;
  UCHECK(captureStatus(p, stream, &status));
  const size_t minBytes = status == gpu::CaptureStatus::Active ? k.selfCopyGraphMinBytes : k.selfCopyMinBytes;
  size_t taken = 0;
  for (size_t i = 0; i < pairs; i++) {
    const size_t bytes = taskBytes(ts[sends[i]]);
    // (A size mismatch stays on the kernels: the planner reports it.)
    const bool take = bytes >= minBytes && bytes == taskBytes(ts[recvs[i]]);
    if (!take) sends[i] = SIZE_MAX;
    taken += take;
  }
  const bool otherWork = !p.tasks.colls.empty() || ts.size() > sends.size() + recvs.size();
  if (taken == 0 || !otherWork) return ncclSuccess;   // nothing large, or nothing else for the kernels
  p.side.stream = stream;
  for (size_t i = 0; i < pairs; i++)
    if (sends[i] != SIZE_MAX) planSelfCopy(p, sends[i], recvs[i], k.selfCopyBlocks);
  return ncclSuccess;
}

}  // namespace

SideStreamKnobs readSideStreamKnobs() {
  SideStreamKnobs k;
  k.copyEngine = knobInt(Knob::UNICCL_COPY_ENGINE) != 0;
  k.copyEngineMinBytes = (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_COPY_ENGINE_MIN_BYTES));
  k.allReduceMinBytes = (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_COPY_ENGINE_ALLREDUCE_MIN_BYTES));
  k.selfCopyBlocks = (unsigned)std::clamp<int64_t>(knobInt(Knob::UNICCL_SELF_COPY_BLOCKS), 0, dev::kMaxChannels);
  k.selfCopyMinBytes = (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_SELF_COPY_MIN_BYTES));
  k.selfCopyGraphMinBytes = (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_SELF_COPY_GRAPH_MIN_BYTES));
  return k;
}

const SideStreamKnobs& sideStreamKnobs() {
  static const SideStreamKnobs k = readSideStreamKnobs();
  return k;
}

ncclResult_t planSideStreams(GroupPlan& group, const SideStreamKnobs& k) {
  for (CommPlan& p : group) p.side.clear();
  // Copy engines: both ends of a transfer are in the group, so it takes two
  // communicators at least.
  size_t candidates = 0;
  if (k.copyEngine && group.size() > 1) {
    for (CommPlan& p : group) {
      gpu::Stream stream = nullptr;
      if (!mayUseCopyEngines(p, k, &stream)) continue;
      ensurePostedCounters(p.sides, p.nRanks);
      p.side.stream = stream;
      p.side.ceMatched = true;
      candidates++;
    }
  }
  if (candidates > 1) {
    chooseSendRecvCopies(group, k);
    forEachPairedCollective(group, [&](CommPlan& A, CommPlan& B, size_t i) {
      const Task& ta = A.tasks.colls[i];
      if (broadcastPairFits(ta, B.tasks.colls[i]) && taskBytes(ta) >= k.copyEngineMinBytes)
        planBroadcastCopies(A, B, i);
    });
    forEachPairedCollective(group, [&](CommPlan& A, CommPlan& B, size_t i) {
      const Task& ta = A.tasks.colls[i];
      if (allReduceSplitFits(ta, B.tasks.colls[i]) && taskBytes(ta) >= k.allReduceMinBytes)
        planAllReduceSplit(A, B, i);
    });
  }
  // The candidates stay matched (a failed copy takes them all off the
  // path) only when some copy was chosen.
  bool anyCopy = false;
  for (const CommPlan& p : group) anyCopy = anyCopy || (p.side.ceMatched && !p.side.empty());
  for (CommPlan& p : group) {
    if (!p.side.ceMatched) continue;
    if (p.side.empty()) p.side.stream = nullptr;
    p.side.ceMatched = anyCopy;
  }

  if (k.selfCopyBlocks == 0) return ncclSuccess;
  for (CommPlan& p : group) {
    // Groups of collectives only (the small-message hot path) stop here.
    if (p.tasks.p2p.empty()) continue;
    // One rank: its messages to itself are copies on its stream (one_rank.h).
    if (p.nRanks == 1) continue;
    // A comm with copies to or from peers this group keeps its self
    // messages with the group's kernel (the AlltoAll of one thread for
    // both GPUs: the kernel copies the own block while the copy engines
    // move the peer's). Profiled comms too: their events follow the
    // group's kernel. Ranks sharing a GPU keep one stream each
    // (gpu_sharing.h).
    if (p.observer != nullptr || p.gpuShared || !p.side.empty()) continue;
    UCHECK(chooseSelfCopies(p, k));
  }
  return ncclSuccess;
}

}  // namespace uniccl
