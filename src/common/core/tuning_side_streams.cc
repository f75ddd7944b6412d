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
#include "common/core/comm.h"
#include "common/core/redop.h"
#include "common/core/self_copy_kernel.h"
#include "common/core/side_stream.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {

size_t taskBytes(const Task& t) { return t.count * dataTypeSize(t.dtype); }

// The one stream of all the comm's tasks in this group; false when several.
bool singleStream(const ncclComm* c, gpu::Stream* out) {
  bool have = false;
  for (const std::vector<Task>* list : {&c->tasks.colls, &c->tasks.p2p}) {
    for (const Task& t : *list) {
      if (have && t.stream != *out) return false;
      *out = t.stream;
      have = true;
    }
  }
  return have;
}

// Capture state of the comm's one stream: the plan's when the group end
// asked already (checkTaskStreams: the first task's stream), else the runtime's.
ncclResult_t captureStatus(const ncclComm* c, gpu::Stream stream, gpu::CaptureStatus* status) {
  gpu::CaptureInfo cap = c->plan.capture;
  if (!c->plan.captureKnown) UCHECK(gpu::streamGetCaptureInfo(stream, &cap));
  *status = cap.status;
  return ncclSuccess;
}

bool hasLargeTask(const ncclComm* c, const SideStreamKnobs& k) {
  auto large = [&](const Task& t) { return taskBytes(t) >= k.copyEngineMinBytes; };
  return std::any_of(c->tasks.p2p.begin(), c->tasks.p2p.end(), large) ||
         std::any_of(c->tasks.colls.begin(), c->tasks.colls.end(), [&](const Task& t) {
           return (t.kind == TaskKind::Broadcast && large(t)) ||
                  (t.kind == TaskKind::AllReduce && taskBytes(t) >= k.allReduceMinBytes);
         });
}

// A communicator that may take part in copy-engine copies: path on, no
// profiler (its events follow the kernels), no GPU shared by several of its
// ranks (one stream per rank, gpu_sharing.h), a task large enough, one
// stream, not capturing (copies cannot join two graphs).
bool mayUseCopyEngines(const ncclComm* c, const SideStreamKnobs& k, gpu::Stream* stream) {
  if (c->copyEngineOff || c->gpuShared || c->profiler != nullptr || !hasLargeTask(c, k)) return false;
  if (!singleStream(c, stream)) return false;
  gpu::CaptureStatus status;
  if (captureStatus(c, *stream, &status) != ncclSuccess) return false;
  return status == gpu::CaptureStatus::None;
}

// Whether all of the comm's messages of `kind` in this group that involve
// another rank involve the same one. A rank that fans out to (or in from)
// several peers keeps the kernels: they move every peer's part at once over
// the channels, where one side stream would copy them one after the other
// (AlltoAll on 4 H200s: 196 GB/s busbw by copy engine, 322 by the kernels).
bool oneRemotePeer(const ncclComm* c, TaskKind kind) {
  int peer = -1;
  for (const Task& t : c->tasks.p2p) {
    if (t.kind != kind || t.peer() == c->rank) continue;
    if (peer >= 0 && t.peer() != peer) return false;
    peer = t.peer();
  }
  return true;
}

// Peer copies only between GPUs that address each other (P2P).
bool directPeers(const ncclComm* a, const ncclComm* b) {
  return a->transports.kindBetween(a, a->rank, b->rank) == TransportKind::P2p;
}

// Large sends whose recv is in the group, from ranks that send to one peer
// to ranks that receive from one peer (a rank's message to itself too stays
// off: measured faster by the kernels).
void chooseSendRecvCopies(const std::vector<ncclComm*>& ce, const SideStreamKnobs& k) {
  for (ncclComm* A : ce) {
    if (!oneRemotePeer(A, TaskKind::Send)) continue;
    const std::vector<Task>& ts = A->tasks.p2p;
    for (size_t i = 0; i < ts.size(); i++) {
      const Task& s = ts[i];
      if (s.kind != TaskKind::Send || s.peer() == A->rank || taskBytes(s) < k.copyEngineMinBytes) continue;
      auto receiver = std::find_if(ce.begin(), ce.end(), [&](const ncclComm* c) {
        return c->commHash == A->commHash && c->nRanks == A->nRanks && c->rank == s.peer();
      });
      if (receiver == ce.end()) continue;   // the receiver is not in this group
      ncclComm* B = *receiver;
      if (!oneRemotePeer(B, TaskKind::Recv) || !directPeers(A, B)) continue;
      const long r = matchingRecv(A, i, B);
      if (r >= 0) planSendRecvCopy(A, i, B, (size_t)r);
    }
  }
}

// Calls fn(A, B, k) for the k-th collective of each 2-rank communicator with
// both ranks in the group (A: rank 0, B: rank 1), when both ranks posted the
// same number of collectives before the group (the k-th of this group on A
// is then the k-th on B) and reach each other by P2P.
template <typename PairFn>
void forEachPairedCollective(const std::vector<ncclComm*>& ce, PairFn&& fn) {
  for (ncclComm* A : ce) {
    if (A->nRanks != 2 || A->rank != 0) continue;   // each pair once, from rank 0
    auto peer = std::find_if(ce.begin(), ce.end(), [&](const ncclComm* c) {
      return c->commHash == A->commHash && c->nRanks == 2 && c->rank == 1;
    });
    if (peer == ce.end()) continue;
    ncclComm* B = *peer;
    if (A->collsPosted != B->collsPosted || !directPeers(A, B)) continue;
    const size_t n = std::min(A->tasks.colls.size(), B->tasks.colls.size());
    for (size_t i = 0; i < n; i++) fn(A, B, i);
  }
}

// Messages to itself: the k-th send to itself meets the k-th recv from
// itself (the planner's pairing); pairs of equal, large sizes go to a side
// kernel when some other task of the comm keeps its kernels busy meanwhile.
// Eager, the side kernel costs a launch and two event calls on the host
// (2-3 us: slower below about 1 MiB); in a graph only a node.
ncclResult_t chooseSelfCopies(ncclComm* c, const SideStreamKnobs& k, std::vector<size_t>* sends,
                              std::vector<size_t>* recvs) {
  gpu::Stream stream = nullptr;
  if (!singleStream(c, &stream)) return ncclSuccess;
  const std::vector<Task>& ts = c->tasks.p2p;
  sends->clear();
  recvs->clear();
  for (size_t i = 0; i < ts.size(); i++) {
    if (ts[i].peer() != c->rank) continue;
    (ts[i].kind == TaskKind::Send ? sends : recvs)->push_back(i);
  }
  const size_t pairs = std::min(sends->size(), recvs->size());
  if (pairs == 0) return ncclSuccess;
  gpu::CaptureStatus status;
  UCHECK(captureStatus(c, stream, &status));
  const size_t minBytes = status == gpu::CaptureStatus::Active ? k.selfCopyGraphMinBytes : k.selfCopyMinBytes;
  size_t taken = 0;
  for (size_t i = 0; i < pairs; i++) {
    const size_t bytes = taskBytes(ts[(*sends)[i]]);
    // (A size mismatch stays on the kernels: the planner reports it.)
    const bool take = bytes >= minBytes && bytes == taskBytes(ts[(*recvs)[i]]);
    if (!take) (*sends)[i] = SIZE_MAX;
    taken += take;
  }
  const bool otherWork = !c->tasks.colls.empty() || ts.size() > sends->size() + recvs->size();
  if (taken == 0 || !otherWork) return ncclSuccess;   // nothing large, or nothing else for the kernels
  c->plan.side.stream = stream;
  for (size_t i = 0; i < pairs; i++)
    if ((*sends)[i] != SIZE_MAX) planSelfCopy(c, (*sends)[i], (*recvs)[i], k.selfCopyBlocks);
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

ncclResult_t planSideStreams(const std::vector<ncclComm*>& comms, const SideStreamKnobs& k,
                             std::vector<ncclComm*>* ce) {
  ce->clear();
  for (ncclComm* c : comms) c->plan.side.clear();
  // Copy engines: both ends of a transfer are in the group, so it takes two
  // communicators at least.
  if (k.copyEngine && comms.size() > 1) {
    for (ncclComm* c : comms) {
      gpu::Stream stream = nullptr;
      if (!mayUseCopyEngines(c, k, &stream)) continue;
      ensurePostedCounters(c);
      c->plan.side.stream = stream;
      ce->push_back(c);
    }
  }
  if (ce->size() > 1) {
    chooseSendRecvCopies(*ce, k);
    forEachPairedCollective(*ce, [&](ncclComm* A, ncclComm* B, size_t i) {
      const Task& ta = A->tasks.colls[i];
      if (broadcastPairFits(ta, B->tasks.colls[i]) && taskBytes(ta) >= k.copyEngineMinBytes)
        planBroadcastCopies(A, B, i);
    });
    forEachPairedCollective(*ce, [&](ncclComm* A, ncclComm* B, size_t i) {
      const Task& ta = A->tasks.colls[i];
      if (allReduceSplitFits(ta, B->tasks.colls[i]) && taskBytes(ta) >= k.allReduceMinBytes)
        planAllReduceSplit(A, B, i);
    });
  }
  const bool anyCopy = std::any_of(ce->begin(), ce->end(), [](const ncclComm* c) { return !c->plan.side.empty(); });
  for (ncclComm* c : *ce)
    if (c->plan.side.empty()) c->plan.side.stream = nullptr;
  if (!anyCopy) ce->clear();

  if (k.selfCopyBlocks == 0) return ncclSuccess;
  thread_local std::vector<size_t> sends, recvs;   // scratch (capacity kept)
  for (ncclComm* c : comms) {
    // Groups of collectives only (the small-message hot path) stop here.
    if (c->tasks.p2p.empty()) continue;
    // One rank: its messages to itself are copies on its stream (one_rank.h).
    if (c->nRanks == 1) continue;
    // A comm with copies to or from peers this group keeps its self
    // messages with the group's kernel (the AlltoAll of one thread for
    // both GPUs: the kernel copies the own block while the copy engines
    // move the peer's). Profiled comms too: their events follow the
    // group's kernel. Ranks sharing a GPU keep one stream each
    // (gpu_sharing.h).
    if (c->profiler != nullptr || c->gpuShared || !c->plan.side.empty()) continue;
    UCHECK(chooseSelfCopies(c, k, &sends, &recvs));
  }
  return ncclSuccess;
}

}  // namespace uniccl
