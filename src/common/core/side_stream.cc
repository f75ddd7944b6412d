#include "common/core/side_stream.h"

#include <algorithm>
#include <atomic>

#include "common/check.h"
#include "common/core/allreduce_ce_split.h"
#include "common/core/comm.h"
#include "common/core/self_copy_kernel.h"
#include "common/core/tuning.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

std::atomic<uint64_t> gTransfers{0};

bool isSelfCopy(const SideCopy& x) { return x.what == SideWhat::SelfCopy; }

// A copy of the fork (with the kernels) of the kind this pass handles.
bool inFork(const SideCopy& x, bool selfCopies) { return x.when == SideWhen::WithKernels && isSelfCopy(x) == selfCopies; }

// c queues or receives a copy of this pass: its task stream records an entry.
bool takesPart(const ncclComm* c, bool selfCopies) {
  const std::vector<SideCopy>& xs = c->plan.side.copies;
  return std::any_of(xs.begin(), xs.end(), [&](const SideCopy& x) { return inFork(x, selfCopies); });
}

// c queues a copy of this pass on its side stream.
bool queuesOnSide(const ncclComm* c, bool selfCopies) {
  const std::vector<SideCopy>& xs = c->plan.side.copies;
  return std::any_of(xs.begin(), xs.end(), [&](const SideCopy& x) {
    return x.from == c && x.on == SideOn::SideStream && inFork(x, selfCopies);
  });
}

ncclResult_t queueCopy(const SideCopy& x) {
  ncclComm* c = x.from;
  switch (x.what) {
    case SideWhat::SelfCopy: return launchSelfCopyKernel(c, x, c->ceStream);
    case SideWhat::BroadcastLocal: return gpu::memcpyAsync(x.dst, x.src, x.bytes, c->plan.side.stream);
    default:   // SendRecv, Broadcast: a peer copy on the side stream
      UCHECK(gpu::memcpyAsync(x.dst, x.src, x.bytes, c->ceStream));
      countCopyEngineTransfer();
      TRACE(kSubsysP2p, "rank %d -> %d: %zu bytes by copy engine", x.from->rank, x.to->rank, x.bytes);
      return ncclSuccess;
  }
}

}  // namespace

SideStreamGroup& sideStreamGroup() {
  thread_local SideStreamGroup g;
  return g;
}

ncclResult_t ensureSideStream(ncclComm* c) {
  if (c->ceStream == nullptr) UCHECK(gpu::streamCreate(&c->ceStream));
  if (c->ceEntry == nullptr) UCHECK(gpu::eventCreate(&c->ceEntry));
  if (c->ceExit == nullptr) UCHECK(gpu::eventCreate(&c->ceExit));
  if (c->ceKernelsDone == nullptr) UCHECK(gpu::eventCreate(&c->ceKernelsDone));
  return ncclSuccess;
}

bool SideStreamGroup::exited(const ncclComm* c) const {
  return std::find(exited_.begin(), exited_.end(), c) != exited_.end();
}

ncclResult_t SideStreamGroup::start(std::vector<ncclComm*>& comms, const UseDevice& useDevice) {
  comms_.clear();
  exited_.clear();
  // The decisions read the counts of tasks posted before this group.
  ncclResult_t res = planSideStreams(comms, sideStreamKnobs(), &ceComms_);
  for (ncclComm* c : comms) countPostedTasks(c);
  for (ncclComm* c : comms)
    if (!c->plan.side.empty()) comms_.push_back(c);
  if (res != ncclSuccess || comms_.empty()) return res;   // (the join clears the plans)
  res = fork(useDevice, /*selfCopies=*/false);
  if (res != ncclSuccess) {
    // Queued copies cannot go to the kernels as well; after a failure the
    // counts no longer describe what the peers will see.
    for (ncclComm* c : ceComms_) disableCopyEngine(c);
    return res;
  }
  // Messages to themselves come from comms with no copy between ranks
  // (tuning): they fork on their own.
  return fork(useDevice, /*selfCopies=*/true);
}

// Entry events on the task streams; each side stream waits for its own
// rank's entry and its receivers' (their buffers are free), copies, and
// marks its exit. Opposite directions run at once on two side streams.
ncclResult_t SideStreamGroup::fork(const UseDevice& useDevice, bool selfCopies) {
  for (ncclComm* c : comms_) {
    if (!takesPart(c, selfCopies)) continue;
    UCHECK(useDevice(c->gpuDev));
    UCHECK(ensureSideStream(c));
    UCHECK(gpu::eventRecord(c->ceEntry, c->plan.side.stream));
  }
  for (ncclComm* c : comms_) {
    if (!queuesOnSide(c, selfCopies)) continue;
    UCHECK(useDevice(c->gpuDev));
    UCHECK(gpu::streamWaitEvent(c->ceStream, c->ceEntry));
    waits_.clear();
    for (const SideCopy& x : c->plan.side.copies) {
      if (x.from != c || x.to == c || !inFork(x, selfCopies)) continue;
      if (std::find(waits_.begin(), waits_.end(), x.to) != waits_.end()) continue;
      waits_.push_back(x.to);
      UCHECK(gpu::streamWaitEvent(c->ceStream, x.to->ceEntry));
    }
  }
  for (ncclComm* c : comms_) {
    for (const SideCopy& x : c->plan.side.copies) {
      if (x.from != c || !inFork(x, selfCopies)) continue;
      UCHECK(useDevice(c->gpuDev));
      UCHECK(queueCopy(x));
    }
  }
  for (ncclComm* c : comms_) {
    if (!queuesOnSide(c, selfCopies)) continue;
    UCHECK(useDevice(c->gpuDev));
    UCHECK(gpu::eventRecord(c->ceExit, c->ceStream));
    exited_.push_back(c);
  }
  return ncclSuccess;
}

ncclResult_t SideStreamGroup::join(const UseDevice& useDevice, bool launched) {
  ncclResult_t res = ncclSuccess;
  // After a failed launch the halves were never reduced: nothing to copy.
  if (launched) {
    res = queueAllReduceHalves(comms_, useDevice, &exited_);
    if (res != ncclSuccess)
      for (ncclComm* c : ceComms_) disableCopyEngine(c);
  }
  // Each task stream waits for the side streams whose copies read or write
  // its buffers: receivers for their senders, senders for their own (their
  // source buffers are read until then), messages to itself for its own.
  for (ncclComm* r : comms_) {
    waits_.clear();
    for (const SideCopy& x : r->plan.side.copies) {
      if (x.on != SideOn::SideStream || (!launched && x.when == SideWhen::AfterKernels) || !exited(x.from)) continue;
      if (std::find(waits_.begin(), waits_.end(), x.from) == waits_.end()) waits_.push_back(x.from);
    }
    for (ncclComm* s : waits_) {
      ncclResult_t r2 = useDevice(r->gpuDev);
      if (r2 == ncclSuccess) r2 = gpu::streamWaitEvent(r->plan.side.stream, s->ceExit);
      if (r2 != ncclSuccess && res == ncclSuccess) res = r2;
    }
  }
  for (ncclComm* c : comms_) c->plan.side.clear();
  comms_.clear();
  ceComms_.clear();
  exited_.clear();
  return res;
}

bool hasKernelTasks(const ncclComm* c) {
  const SidePlan& side = c->plan.side;
  for (size_t i = 0; i < c->tasks.colls.size(); i++) {
    const TaskPath p = side.collPathOf(i);
    if (p == TaskPath::Kernels || p == TaskPath::ReduceScatterThenCopy) return true;
  }
  for (size_t i = 0; i < c->tasks.p2p.size(); i++)
    if (side.p2pPathOf(i) == TaskPath::Kernels) return true;
  return false;
}

void ensurePostedCounters(ncclComm* c) {
  if (c->p2pSentTo.size() != (size_t)c->nRanks) {
    c->p2pSentTo.assign(c->nRanks, 0);
    c->p2pRecvdFrom.assign(c->nRanks, 0);
  }
}

void countPostedTasks(ncclComm* c) {
  c->collsPosted += c->tasks.colls.size();
  if (c->tasks.p2p.empty()) return;
  ensurePostedCounters(c);
  for (const Task& t : c->tasks.p2p) {
    if (t.peer() < 0 || t.peer() >= c->nRanks) continue;
    if (t.kind == TaskKind::Send) c->p2pSentTo[t.peer()]++;
    else c->p2pRecvdFrom[t.peer()]++;
  }
}

void disableCopyEngine(ncclComm* comm) { comm->copyEngineOff = true; }

void setTaskPath(std::vector<TaskPath>* paths, size_t nTasks, size_t i, TaskPath path) {
  if (paths->empty()) paths->assign(nTasks, TaskPath::Kernels);
  (*paths)[i] = path;
}

void addSideCopy(const SideCopy& copy) {
  copy.from->plan.side.copies.push_back(copy);
  if (copy.to != copy.from) copy.to->plan.side.copies.push_back(copy);
}

uint64_t copyEngineTransfers() { return gTransfers.load(std::memory_order_relaxed); }

void countCopyEngineTransfer() { gTransfers.fetch_add(1, std::memory_order_relaxed); }

}  // namespace uniccl
