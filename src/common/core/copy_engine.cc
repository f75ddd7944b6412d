#include "common/core/copy_engine.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/launch.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "device/dev_types.h"
#include "device/kernels.h"

namespace uniccl {

namespace {

std::atomic<uint64_t> gTransfers{0};
std::atomic<uint64_t> gSelfCopies{0};

struct Settings {
  bool enabled;
  size_t minBytes;
  size_t allReduceMinBytes;
  int selfBlocks;     // blocks of the side-stream kernel copying a rank's messages to itself (0: none)
  size_t selfMinBytes;  // the smallest message to itself it takes (eager)
  size_t selfGraphMinBytes;  // ... in graph capture (no launch or event cost on the host per replay)
};

const Settings& settings() {
  static const Settings s{
      knobInt(Knob::UNICCL_COPY_ENGINE) != 0,
      (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_COPY_ENGINE_MIN_BYTES)),
      (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_COPY_ENGINE_ALLREDUCE_MIN_BYTES)),
      (int)std::clamp<int64_t>(knobInt(Knob::UNICCL_SELF_COPY_BLOCKS), 0, dev::kMaxChannels),
      (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_SELF_COPY_MIN_BYTES)),
      (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_SELF_COPY_GRAPH_MIN_BYTES))};
  return s;
}

size_t taskBytes(const Task& t) { return t.count * dataTypeSize(t.dtype); }

void ensureCounters(ncclComm* c) {
  if (c->p2pSentTo.size() != (size_t)c->nRanks) {
    c->p2pSentTo.assign(c->nRanks, 0);
    c->p2pRecvdFrom.assign(c->nRanks, 0);
  }
}

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

bool hasLargeTask(const ncclComm* c, const Settings& set) {
  auto large = [&](const Task& t) { return taskBytes(t) >= set.minBytes; };
  return std::any_of(c->tasks.p2p.begin(), c->tasks.p2p.end(), large) ||
         std::any_of(c->tasks.colls.begin(), c->tasks.colls.end(), [&](const Task& t) {
           return (t.kind == TaskKind::Broadcast && large(t)) ||
                  (t.kind == TaskKind::AllReduce && taskBytes(t) >= set.allReduceMinBytes);
         });
}

// A communicator that may take part: path on, no profiler (its events follow
// the kernels), no GPU shared by several of its ranks (one stream per rank,
// gpu_sharing.h), a task large enough, one stream, not capturing.
bool eligible(ncclComm* c, gpu::Stream* stream) {
  if (c->copyEngineOff || c->gpuShared || c->profiler != nullptr || !hasLargeTask(c, settings())) return false;
  if (!singleStream(c, stream)) return false;
  gpu::CaptureInfo cap;
  if (gpu::streamGetCaptureInfo(*stream, &cap) != ncclSuccess) return false;
  return cap.status == gpu::CaptureStatus::None;
}

// Index in c->tasks.p2p of the k-th task of `kind` with peer `peer`, or -1.
long nthMessage(const ncclComm* c, TaskKind kind, int peer, size_t k) {
  const std::vector<Task>& ts = c->tasks.p2p;
  for (size_t i = 0; i < ts.size(); i++)
    if (ts[i].kind == kind && ts[i].peer() == peer && k-- == 0) return (long)i;
  return -1;
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

bool directPeers(const ncclComm* a, const ncclComm* b) {
  return a->transports.kindBetween(a, a->rank, b->rank) == TransportKind::P2p;
}

ncclResult_t ensureResources(ncclComm* c) {
  if (c->ceStream == nullptr) UCHECK(gpu::streamCreate(&c->ceStream));
  if (c->ceEntry == nullptr) UCHECK(gpu::eventCreate(&c->ceEntry));
  if (c->ceExit == nullptr) UCHECK(gpu::eventCreate(&c->ceExit));
  if (c->ceKernelsDone == nullptr) UCHECK(gpu::eventCreate(&c->ceKernelsDone));
  return ncclSuccess;
}

// A kernel of UNICCL_SELF_COPY_BLOCKS blocks copying `bytes` on `stream`:
// the p2p kernel with one local-copy item in its arguments. It has no
// connection and no peer and waits for nothing, so it always ends: the
// watchdog needs no progress words from it, and blocks of the group's
// kernel that find no free SM start when its blocks finish.
ncclResult_t launchLocalCopy(ncclComm* c, void* dst, const void* src, size_t bytes, gpu::Stream stream) {
  dev::KernelArgs args;
  memset(&args, 0, sizeof(args));
  args.comm = c->devComm;
  args.channels = c->channelsDev;
  args.nWorks = 1;
  dev::Work& w = args.inlineWorks[0];
  w.coll = dev::kCollP2p;
  w.proto = dev::kProtoSimple;
  w.channelLo = 0;
  w.channelHi = (uint8_t)(settings().selfBlocks - 1);
  w.p.sendPeer = c->rank;
  w.p.recvPeer = c->rank;
  w.p.sendBuff = src;
  w.p.recvBuff = dst;
  w.p.sendBytes = bytes;
  w.p.recvBytes = bytes;
  // A short copy: the group's next kernel may start once it passed its wait.
  args.releaseEarly = releaseEarly(c, (unsigned)settings().selfBlocks);
  gpu::LaunchConfig cfg;
  cfg.gridX = (unsigned)settings().selfBlocks;
  cfg.blockX = dev::kThreadsPerBlock;
  cfg.stream = stream;
  void* argv[] = {&args};
  return gpu::launchKernel(dev::p2pKernel(), cfg, argv, nullptr);
}

}  // namespace

CopyEngineGroup& copyEngineGroup() {
  thread_local CopyEngineGroup g;
  return g;
}

const CopyEngineGroup::Side* CopyEngineGroup::sideOf(const ncclComm* c) const {
  for (const Side& s : sides_)
    if (s.comm == c) return &s;
  return nullptr;
}

void CopyEngineGroup::findMessages() {
  const size_t minBytes = settings().minBytes;
  for (size_t ia = 0; ia < sides_.size(); ia++) {
    ncclComm* A = sides_[ia].comm;
    if (!oneRemotePeer(A, TaskKind::Send)) continue;
    const std::vector<Task>& ts = A->tasks.p2p;
    for (size_t i = 0; i < ts.size(); i++) {
      const Task& s = ts[i];
      if (s.kind != TaskKind::Send || s.peer() == A->rank || taskBytes(s) < minBytes) continue;
      size_t ib = 0;
      while (ib < sides_.size() && !(sides_[ib].comm->commHash == A->commHash &&
                                     sides_[ib].comm->nRanks == A->nRanks && sides_[ib].comm->rank == s.peer()))
        ib++;
      if (ib == sides_.size()) continue;   // the receiver is not in this group
      ncclComm* B = sides_[ib].comm;
      if (!oneRemotePeer(B, TaskKind::Recv) || !directPeers(A, B) ||
          A->p2pSentTo[B->rank] != B->p2pRecvdFrom[A->rank])
        continue;
      size_t k = 0;
      for (size_t j = 0; j < i; j++) k += ts[j].kind == TaskKind::Send && ts[j].peer() == s.peer();
      const long r = nthMessage(B, TaskKind::Recv, A->rank, k);
      if (r < 0 || taskBytes(B->tasks.p2p[(size_t)r]) != taskBytes(s)) continue;
      copies_.push_back(Copy{A, B, s.sendbuff, B->tasks.p2p[(size_t)r].recvbuff, taskBytes(s)});
      takenP2p_[ia][i] = true;
      takenP2p_[ib][(size_t)r] = true;
    }
  }
}

template <typename PairFn>
void CopyEngineGroup::forEachPairedCollective(PairFn&& fn) {
  for (size_t ia = 0; ia < sides_.size(); ia++) {
    ncclComm* A = sides_[ia].comm;
    if (A->nRanks != 2 || A->rank != 0) continue;   // each pair once, from rank 0
    size_t ib = 0;
    while (ib < sides_.size() && !(sides_[ib].comm->commHash == A->commHash && sides_[ib].comm->nRanks == 2 &&
                                   sides_[ib].comm->rank == 1))
      ib++;
    if (ib == sides_.size()) continue;
    ncclComm* B = sides_[ib].comm;
    // Same count of collectives posted so far: the k-th of this group on A
    // is the k-th on B.
    if (A->collsPosted != B->collsPosted || !directPeers(A, B)) continue;
    const size_t n = std::min(A->tasks.colls.size(), B->tasks.colls.size());
    for (size_t k = 0; k < n; k++) fn(ia, ib, k, A->tasks.colls[k], B->tasks.colls[k]);
  }
}

void CopyEngineGroup::findBroadcasts() {
  const size_t minBytes = settings().minBytes;
  forEachPairedCollective([&](size_t ia, size_t ib, size_t k, const Task& ta, const Task& tb) {
    if (ta.kind != TaskKind::Broadcast || tb.kind != TaskKind::Broadcast || ta.root != tb.root ||
        taskBytes(ta) != taskBytes(tb) || taskBytes(ta) < minBytes)
      return;   // (validation keeps the root in 0..1)
    ncclComm* A = sides_[ia].comm;
    ncclComm* B = sides_[ib].comm;
    const Task& root = ta.root == 0 ? ta : tb;
    const Task& other = ta.root == 0 ? tb : ta;
    ncclComm* rootComm = ta.root == 0 ? A : B;
    ncclComm* otherComm = ta.root == 0 ? B : A;
    copies_.push_back(Copy{rootComm, otherComm, root.sendbuff, other.recvbuff, taskBytes(root)});
    if (root.sendbuff != root.recvbuff)
      localCopies_.push_back(Copy{rootComm, rootComm, root.sendbuff, root.recvbuff, taskBytes(root)});
    takenColls_[ia][k] = true;
    takenColls_[ib][k] = true;
  });
}

// A 2-rank AllReduce becomes a ReduceScatter on the kernels (each rank
// reduces its half: the SMs do the arithmetic) and a copy of each rank's
// reduced half into the other's receive buffer after it (the all-gather half
// moves at the copy engines' rate). The ReduceScatter keeps NCCL's in-place
// form: recvbuff = sendbuff + rank * half when the AllReduce was in place.
// The copies wait for both ranks' kernels (issueAfterKernels), so an
// in-place peer has read the half of its send buffer they overwrite.
void CopyEngineGroup::findAllReduces() {
  const size_t minBytes = settings().allReduceMinBytes;
  forEachPairedCollective([&](size_t ia, size_t ib, size_t, Task& ta, Task& tb) {
    if (ta.kind != TaskKind::AllReduce || tb.kind != TaskKind::AllReduce || ta.count != tb.count ||
        ta.dtype != tb.dtype || ta.count % 2 != 0 || taskBytes(ta) < minBytes)
      return;   // (an odd count has no equal halves)
    ncclComm* A = sides_[ia].comm;
    ncclComm* B = sides_[ib].comm;
    const size_t half = ta.count / 2;
    const size_t halfBytes = half * dataTypeSize(ta.dtype);
    for (Task* t : {&ta, &tb}) {
      t->kind = TaskKind::ReduceScatter;
      t->count = half;
    }
    // Rank r's half starts at r * halfBytes in both receive buffers.
    char* recvA = static_cast<char*>(ta.recvbuff);
    char* recvB = static_cast<char*>(tb.recvbuff);
    tb.recvbuff = recvB + halfBytes;   // rank 0's half starts at its buffer
    afterCopies_.push_back(Copy{A, B, recvA, recvB, halfBytes});
    afterCopies_.push_back(Copy{B, A, recvB + halfBytes, recvA + halfBytes, halfBytes});
  });
}

template <typename Involved>
ncclResult_t CopyEngineGroup::markStreams(const UseDevice& useDevice, Involved&& involved,
                                          gpu::Event ncclComm::*event) {
  for (const Side& s : sides_) {
    if (!involved(s.comm)) continue;
    UCHECK(useDevice(s.comm->gpuDev));
    UCHECK(ensureResources(s.comm));
    UCHECK(gpu::eventRecord(s.comm->*event, s.stream));
  }
  return ncclSuccess;
}

bool CopyEngineGroup::touches(const std::vector<Copy>& copies, const ncclComm* c) {
  return std::any_of(copies.begin(), copies.end(), [c](const Copy& x) { return x.from == c || x.to == c; });
}

bool CopyEngineGroup::hasCopy(const ncclComm* from, const ncclComm* to) const {
  auto match = [&](const Copy& x) { return x.from == from && (to == nullptr || x.to == to); };
  return std::any_of(copies_.begin(), copies_.end(), match) ||
         std::any_of(afterCopies_.begin(), afterCopies_.end(), match);
}

// Entry events on the ranks' streams; each sender's side stream waits for
// its own entry and its receivers' (their buffers are free), copies, and
// marks its exit. Opposite directions run at once on two side streams.
ncclResult_t CopyEngineGroup::issue(const UseDevice& useDevice) {
  auto involved = [&](const ncclComm* c) { return touches(copies_, c) || touches(localCopies_, c); };
  UCHECK(markStreams(useDevice, involved, &ncclComm::ceEntry));
  for (const Side& s : sides_) {
    if (!hasCopy(s.comm, nullptr)) continue;
    UCHECK(useDevice(s.comm->gpuDev));
    UCHECK(gpu::streamWaitEvent(s.comm->ceStream, s.comm->ceEntry));
    for (const Side& r : sides_)
      if (r.comm != s.comm && hasCopy(s.comm, r.comm)) UCHECK(gpu::streamWaitEvent(s.comm->ceStream, r.comm->ceEntry));
  }
  for (const Copy& x : copies_) {
    UCHECK(useDevice(x.from->gpuDev));
    UCHECK(gpu::memcpyAsync(x.dst, x.src, x.bytes, x.from->ceStream));
    gTransfers.fetch_add(1, std::memory_order_relaxed);
    TRACE(kSubsysP2p, "rank %d -> %d: %zu bytes by copy engine", x.from->rank, x.to->rank, x.bytes);
  }
  for (const Copy& x : localCopies_) {
    UCHECK(useDevice(x.from->gpuDev));
    UCHECK(gpu::memcpyAsync(x.dst, x.src, x.bytes, sideOf(x.from)->stream));
  }
  for (const Side& s : sides_) {
    if (!hasCopy(s.comm, nullptr)) continue;
    UCHECK(useDevice(s.comm->gpuDev));
    UCHECK(gpu::eventRecord(s.comm->ceExit, s.comm->ceStream));
  }
  return ncclSuccess;
}

void CopyEngineGroup::removeTaken() {
  auto compact = [](std::vector<Task>& ts, const std::vector<bool>& taken) {
    size_t w = 0;
    for (size_t i = 0; i < ts.size(); i++)
      if (!taken[i]) ts[w++] = ts[i];
    ts.resize(w);
  };
  for (size_t i = 0; i < sides_.size(); i++) {
    compact(sides_[i].comm->tasks.colls, takenColls_[i]);
    compact(sides_[i].comm->tasks.p2p, takenP2p_[i]);
  }
}

ncclResult_t CopyEngineGroup::start(std::vector<ncclComm*>& comms, const UseDevice& useDevice) {
  sides_.clear();
  copies_.clear();
  localCopies_.clear();
  selfSides_.clear();
  if (settings().enabled && comms.size() > 1) {
    for (ncclComm* c : comms) {
      gpu::Stream st = nullptr;
      if (!eligible(c, &st)) continue;
      ensureCounters(c);
      sides_.push_back(Side{c, st});
    }
  }
  if (sides_.size() > 1) {
    takenColls_.resize(sides_.size());
    takenP2p_.resize(sides_.size());
    for (size_t i = 0; i < sides_.size(); i++) {
      takenColls_[i].assign(sides_[i].comm->tasks.colls.size(), false);
      takenP2p_[i].assign(sides_[i].comm->tasks.p2p.size(), false);
    }
    findMessages();
    findBroadcasts();
    findAllReduces();
  }
  for (ncclComm* c : comms) countPostedTasks(c);
  if (copies_.empty() && afterCopies_.empty()) {
    sides_.clear();
    return startSelfCopies(comms, useDevice);
  }
  ncclResult_t res = copies_.empty() ? ncclSuccess : issue(useDevice);
  // Queued copies cannot go to the kernels as well; after a failure the
  // counts no longer describe what the peers will see.
  if (res != ncclSuccess)
    for (const Side& s : sides_) disableCopyEngine(s.comm);
  removeTaken();
  if (res != ncclSuccess) return res;
  return startSelfCopies(comms, useDevice);
}

ncclResult_t CopyEngineGroup::startSelfCopies(std::vector<ncclComm*>& comms, const UseDevice& useDevice) {
  if (settings().selfBlocks == 0) return ncclSuccess;
  for (ncclComm* c : comms) {
    // Groups of collectives only (the small-message hot path) stop here.
    if (c->tasks.p2p.empty()) continue;
    // One rank: its messages to itself are copies on its stream (one_rank.h).
    if (c->nRanks == 1) continue;
    // A comm with transfers to or from peers on its side stream this group
    // keeps its self messages with the group's kernel (the AlltoAll of one
    // thread for both GPUs: the kernel copies the own block while the copy
    // engines move the peer's). Profiled comms too: their events follow the
    // group's kernel.
    // Ranks sharing a GPU keep one stream each (gpu_sharing.h).
    if (c->profiler != nullptr || c->gpuShared || touches(copies_, c) || touches(localCopies_, c) ||
        touches(afterCopies_, c))
      continue;
    gpu::Stream st = nullptr;
    if (!singleStream(c, &st)) continue;
    UCHECK(takeSelfCopies(c, st, useDevice));
  }
  return ncclSuccess;
}

// The k-th send to itself meets the k-th recv from itself (the planner's
// pairing); pairs of equal, large sizes are copied when some other task of
// the comm keeps its kernels busy meanwhile. Captured streams too: the side
// stream joins the capture through the entry event and leaves it through
// the exit event the launch stream waits for (join()).
ncclResult_t CopyEngineGroup::takeSelfCopies(ncclComm* c, gpu::Stream stream, const UseDevice& useDevice) {
  std::vector<Task>& ts = c->tasks.p2p;
  selfSends_.clear();
  selfRecvs_.clear();
  for (size_t i = 0; i < ts.size(); i++) {
    if (ts[i].peer() != c->rank) continue;
    (ts[i].kind == TaskKind::Send ? selfSends_ : selfRecvs_).push_back(i);
  }
  const size_t pairs = std::min(selfSends_.size(), selfRecvs_.size());
  if (pairs == 0) return ncclSuccess;
  // Eager, the side kernel costs a launch and two event calls on the host
  // (2-3 us: slower below about 1 MiB); in a graph only a node.
  gpu::CaptureInfo cap = c->plan.capture;
  if (!c->plan.captureKnown) UCHECK(gpu::streamGetCaptureInfo(stream, &cap));
  const size_t minBytes =
      cap.status == gpu::CaptureStatus::Active ? settings().selfGraphMinBytes : settings().selfMinBytes;
  size_t taken = 0;
  for (size_t k = 0; k < pairs; k++) {
    const size_t bytes = taskBytes(ts[selfSends_[k]]);
    const bool take = bytes >= minBytes && bytes == taskBytes(ts[selfRecvs_[k]]);
    if (!take) selfSends_[k] = selfRecvs_[k] = SIZE_MAX;   // (a size mismatch: the planner reports it)
    taken += take;
  }
  const bool otherWork = !c->tasks.colls.empty() || ts.size() > selfSends_.size() + selfRecvs_.size();
  if (taken == 0 || !otherWork) return ncclSuccess;   // nothing large, or nothing else for the kernels
  UCHECK(useDevice(c->gpuDev));
  UCHECK(ensureResources(c));
  UCHECK(gpu::eventRecord(c->ceEntry, stream));
  UCHECK(gpu::streamWaitEvent(c->ceStream, c->ceEntry));
  std::vector<bool>& drop = selfTaken_;
  drop.assign(ts.size(), false);
  for (size_t k = 0; k < pairs; k++) {
    if (selfSends_[k] == SIZE_MAX) continue;
    const Task& s = ts[selfSends_[k]];
    UCHECK(launchLocalCopy(c, ts[selfRecvs_[k]].recvbuff, s.sendbuff, taskBytes(s), c->ceStream));
    // Launched programmatically, the group's kernel would start as soon as
    // the previous one's blocks ended, before this copy (an ordinary
    // dependency) could, and take the SMs first: graph AlltoAll 1 GiB on
    // 2x H200 330 GB/s instead of 355 (the copy then ran mostly after it).
    c->plan.sideKernelForked = true;
    gSelfCopies.fetch_add(1, std::memory_order_relaxed);
    TRACE(kSubsysP2p, "rank %d: %zu bytes to itself by a side-stream kernel", c->rank, taskBytes(s));
    drop[selfSends_[k]] = drop[selfRecvs_[k]] = true;
  }
  UCHECK(gpu::eventRecord(c->ceExit, c->ceStream));
  selfSides_.push_back(Side{c, stream});
  size_t w = 0;
  for (size_t i = 0; i < ts.size(); i++)
    if (!drop[i]) ts[w++] = ts[i];
  ts.resize(w);
  return ncclSuccess;
}

// The all-gather halves of AllReduces: each rank's side stream waits until
// both ranks' kernels of the group ended (its half is reduced, the peer's
// receive buffer is no longer read), then copies its half across.
ncclResult_t CopyEngineGroup::issueAfterKernels(const UseDevice& useDevice) {
  UCHECK(markStreams(useDevice, [&](const ncclComm* c) { return touches(afterCopies_, c); },
                     &ncclComm::ceKernelsDone));
  for (const Side& s : sides_) {
    if (!std::any_of(afterCopies_.begin(), afterCopies_.end(), [&](const Copy& x) { return x.from == s.comm; }))
      continue;
    UCHECK(useDevice(s.comm->gpuDev));
    UCHECK(gpu::streamWaitEvent(s.comm->ceStream, s.comm->ceKernelsDone));
    for (const Copy& x : afterCopies_) {
      if (x.from != s.comm) continue;
      UCHECK(gpu::streamWaitEvent(s.comm->ceStream, x.to->ceKernelsDone));
      UCHECK(gpu::memcpyAsync(x.dst, x.src, x.bytes, s.comm->ceStream));
      gTransfers.fetch_add(1, std::memory_order_relaxed);
      TRACE(kSubsysColl, "rank %d -> %d: AllReduce half of %zu bytes by copy engine", x.from->rank, x.to->rank,
            x.bytes);
    }
    // (Behind any copy issue() queued on this side stream: one exit for all.)
    UCHECK(gpu::eventRecord(s.comm->ceExit, s.comm->ceStream));
  }
  return ncclSuccess;
}

ncclResult_t CopyEngineGroup::join(const UseDevice& useDevice, bool launched) {
  ncclResult_t res = ncclSuccess;
  // After a failed launch the halves were never reduced: nothing to copy.
  if (!launched) afterCopies_.clear();
  if (!afterCopies_.empty()) {
    res = issueAfterKernels(useDevice);
    if (res != ncclSuccess)
      for (const Side& s : sides_) disableCopyEngine(s.comm);
  }
  // Receivers wait for their senders' copies; senders for their own (their
  // source buffers are read until then).
  for (const Side& r : sides_) {
    for (const Side& s : sides_) {
      const bool linked = r.comm == s.comm ? hasCopy(s.comm, nullptr) : hasCopy(s.comm, r.comm);
      if (!linked || s.comm->ceExit == nullptr) continue;
      ncclResult_t r2 = useDevice(r.comm->gpuDev);
      if (r2 == ncclSuccess) r2 = gpu::streamWaitEvent(r.stream, s.comm->ceExit);
      if (r2 != ncclSuccess && res == ncclSuccess) res = r2;
    }
  }
  // Launch streams wait for the copies of their messages to themselves.
  for (const Side& s : selfSides_) {
    ncclResult_t r2 = useDevice(s.comm->gpuDev);
    if (r2 == ncclSuccess) r2 = gpu::streamWaitEvent(s.stream, s.comm->ceExit);
    if (r2 != ncclSuccess && res == ncclSuccess) res = r2;
  }
  sides_.clear();
  copies_.clear();
  localCopies_.clear();
  afterCopies_.clear();
  selfSides_.clear();
  return res;
}

void countPostedTasks(ncclComm* c) {
  c->collsPosted += c->tasks.colls.size();
  if (c->tasks.p2p.empty()) return;
  ensureCounters(c);
  for (const Task& t : c->tasks.p2p) {
    if (t.peer() < 0 || t.peer() >= c->nRanks) continue;
    if (t.kind == TaskKind::Send) c->p2pSentTo[t.peer()]++;
    else c->p2pRecvdFrom[t.peer()]++;
  }
}

void disableCopyEngine(ncclComm* comm) { comm->copyEngineOff = true; }

uint64_t copyEngineTransfers() { return gTransfers.load(std::memory_order_relaxed); }

uint64_t selfCopyLaunches() { return gSelfCopies.load(std::memory_order_relaxed); }

}  // namespace uniccl
