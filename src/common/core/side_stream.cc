#include "common/core/side_stream.h"

#include <algorithm>
#include <atomic>

#include "common/check.h"
#include "common/core/allreduce_ce_split.h"
#include "common/core/comm_plan.h"
#include "common/core/self_copy_kernel.h"
#include "common/core/tuning.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

std::atomic<uint64_t> gTransfers{0};

bool isSelfCopy(const SideCopy& x) { return x.what == SideWhat::SelfCopy; }

// A copy of the fork (with the kernels) of the kind this pass handles.
bool inFork(const SideCopy& x, bool selfCopies) { return x.when == SideWhen::WithKernels && isSelfCopy(x) == selfCopies; }

// p queues or receives a copy of this pass: its task stream records an entry.
bool takesPart(const CommPlan& p, bool selfCopies) {
  const std::vector<SideCopy>& xs = p.side.copies;
  return std::any_of(xs.begin(), xs.end(), [&](const SideCopy& x) { return inFork(x, selfCopies); });
}

// p queues a copy of this pass on its side stream.
bool queuesOnSide(const CommPlan& p, bool selfCopies) {
  const std::vector<SideCopy>& xs = p.side.copies;
  return std::any_of(xs.begin(), xs.end(), [&](const SideCopy& x) {
    return x.from == &p && x.on == SideOn::SideStream && inFork(x, selfCopies);
  });
}

[[nodiscard]] ncclResult_t queueCopy(const SideCopy& x) {
  CommPlan& p = *x.from;
  switch (x.what) {
    case SideWhat::SelfCopy: return launchSelfCopyKernel(p, x, p.sides->stream);
    case SideWhat::BroadcastLocal: return gpu::memcpyAsync(x.dst, x.src, x.bytes, p.side.stream);
    default:   // SendRecv, Broadcast: a peer copy on the side stream
      UCHECK(gpu::memcpyAsync(x.dst, x.src, x.bytes, p.sides->stream));
      countCopyEngineTransfer();
      TRACE(kSubsysP2p, "rank %d -> %d: %zu bytes by copy engine", x.from->rank, x.to->rank, x.bytes);
      return ncclSuccess;
  }
}

// The fork: entry events on the task streams; each side stream waits for
// its own rank's entry and its receivers' (their buffers are free), copies,
// and marks its exit. Opposite directions run at once on two side streams.
[[nodiscard]] ncclResult_t fork(GroupPlan& group, const UseDevice& useDevice, bool selfCopies) {
  for (CommPlan& p : group) {
    if (!takesPart(p, selfCopies)) continue;
    UCHECK(useDevice(p.gpuDev));
    UCHECK(ensureSideStream(p.sides));
    UCHECK(gpu::eventRecord(p.sides->entry, p.side.stream));
  }
  for (CommPlan& p : group) {
    if (!queuesOnSide(p, selfCopies)) continue;
    UCHECK(useDevice(p.gpuDev));
    UCHECK(gpu::streamWaitEvent(p.sides->stream, p.sides->entry));
    const std::vector<SideCopy>& xs = p.side.copies;
    auto waits = [&](const SideCopy& x) { return x.from == &p && x.to != &p && inFork(x, selfCopies); };
    for (size_t i = 0; i < xs.size(); i++) {
      if (!waits(xs[i])) continue;
      bool seen = false;   // each receiver's entry once
      for (size_t j = 0; j < i && !seen; j++) seen = waits(xs[j]) && xs[j].to == xs[i].to;
      if (!seen) UCHECK(gpu::streamWaitEvent(p.sides->stream, xs[i].to->sides->entry));
    }
  }
  for (CommPlan& p : group) {
    for (const SideCopy& x : p.side.copies) {
      if (x.from != &p || !inFork(x, selfCopies)) continue;
      UCHECK(useDevice(p.gpuDev));
      UCHECK(queueCopy(x));
    }
  }
  for (CommPlan& p : group) {
    if (!queuesOnSide(p, selfCopies)) continue;
    UCHECK(useDevice(p.gpuDev));
    UCHECK(gpu::eventRecord(p.sides->exit, p.sides->stream));
    p.side.exited = true;
  }
  return ncclSuccess;
}

// Queued copies cannot go to the kernels as well; after a failure the
// counts no longer describe what the peers will see.
void disableMatchedCopyEngines(GroupPlan& group) {
  for (CommPlan& p : group)
    if (p.side.ceMatched) disableCopyEngine(p.sides);
}

}  // namespace

ncclResult_t ensureSideStream(SideStreams* s) {
  if (s->stream == nullptr) UCHECK(gpu::streamCreate(&s->stream));
  if (s->entry == nullptr) UCHECK(gpu::eventCreate(&s->entry));
  if (s->exit == nullptr) UCHECK(gpu::eventCreate(&s->exit));
  if (s->kernelsDone == nullptr) UCHECK(gpu::eventCreate(&s->kernelsDone));
  return ncclSuccess;
}

void releaseSideStreams(SideStreams* s) {
  // Copy-engine transfers touch only user buffers, but destroy promises the
  // communicator's operations are over: its side stream drains first.
  // Teardown goes on past a failure, which the backend logged.
  if (s->stream != nullptr) {
    (void)gpu::streamSynchronize(s->stream);
    (void)gpu::streamDestroy(s->stream);
  }
  for (gpu::Event e : {s->exit, s->kernelsDone, s->entry})
    if (e != nullptr) (void)gpu::eventDestroy(e);
  s->stream = nullptr;
  s->exit = s->kernelsDone = s->entry = nullptr;
}

ncclResult_t startSideStreams(GroupPlan& group, const UseDevice& useDevice) {
  // The decisions read the counts of tasks posted before this group.
  ncclResult_t res = planSideStreams(group, sideStreamKnobs());
  bool any = false;
  for (CommPlan& p : group) {
    countPostedTasks(p.sides, p.nRanks, p.tasks);
    any = any || !p.side.empty();
  }
  if (res != ncclSuccess || !any) return res;
  res = fork(group, useDevice, /*selfCopies=*/false);
  if (res != ncclSuccess) {
    disableMatchedCopyEngines(group);
    return res;
  }
  // Messages to themselves come from comms with no copy between ranks
  // (tuning): they fork on their own.
  return fork(group, useDevice, /*selfCopies=*/true);
}

ncclResult_t joinSideStreams(GroupPlan& group, const UseDevice& useDevice, bool launched) {
  ncclResult_t res = ncclSuccess;
  // After a failed launch the halves were never reduced: nothing to copy.
  if (launched) {
    res = queueAllReduceHalves(group, useDevice);
    if (res != ncclSuccess) disableMatchedCopyEngines(group);
  }
  // Each task stream waits for the side streams whose copies read or write
  // its buffers: receivers for their senders, senders for their own (their
  // source buffers are read until then), messages to itself for its own.
  for (CommPlan& r : group) {
    const std::vector<SideCopy>& xs = r.side.copies;
    auto joins = [&](const SideCopy& x) {
      return x.on == SideOn::SideStream && (launched || x.when != SideWhen::AfterKernels) && x.from->side.exited;
    };
    for (size_t i = 0; i < xs.size(); i++) {
      if (!joins(xs[i])) continue;
      bool seen = false;   // each side stream once
      for (size_t j = 0; j < i && !seen; j++) seen = joins(xs[j]) && xs[j].from == xs[i].from;
      if (seen) continue;
      ncclResult_t r2 = useDevice(r.gpuDev);
      if (r2 == ncclSuccess) r2 = gpu::streamWaitEvent(r.side.stream, xs[i].from->sides->exit);
      if (r2 != ncclSuccess && res == ncclSuccess) res = r2;
    }
  }
  return res;
}

bool hasKernelTasks(const CommPlan& p) {
  for (size_t i = 0; i < p.tasks.colls.size(); i++) {
    const TaskPath path = p.side.collPathOf(i);
    if (path == TaskPath::Kernels || path == TaskPath::ReduceScatterThenCopy) return true;
  }
  for (size_t i = 0; i < p.tasks.p2p.size(); i++)
    if (p.side.p2pPathOf(i) == TaskPath::Kernels) return true;
  return false;
}

void ensurePostedCounters(SideStreams* s, int nRanks) {
  if (s->sentTo.size() != (size_t)nRanks) {
    s->sentTo.assign(nRanks, 0);
    s->recvdFrom.assign(nRanks, 0);
  }
}

void countPostedMessages(SideStreams* s, int nRanks, const std::vector<Task>& p2p) {
  ensurePostedCounters(s, nRanks);
  for (const Task& t : p2p) {
    if (t.peer() < 0 || t.peer() >= nRanks) continue;
    if (t.kind == TaskKind::Send) s->sentTo[t.peer()]++;
    else s->recvdFrom[t.peer()]++;
  }
}

void setTaskPath(std::vector<TaskPath>* paths, size_t nTasks, size_t i, TaskPath path) {
  if (paths->empty()) paths->assign(nTasks, TaskPath::Kernels);
  (*paths)[i] = path;
}

void addSideCopy(const SideCopy& copy) {
  copy.from->side.copies.push_back(copy);
  if (copy.to != copy.from) copy.to->side.copies.push_back(copy);
}

uint64_t copyEngineTransfers() { return gTransfers.load(std::memory_order_relaxed); }

void countCopyEngineTransfer() { gTransfers.fetch_add(1, std::memory_order_relaxed); }

}  // namespace uniccl
