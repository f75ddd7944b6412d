#include "common/core/one_rank.h"

#include <atomic>

#include "common/check.h"
#include "common/core/comm_plan.h"
#include "common/core/launch.h"
#include "common/core/redop.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

std::atomic<uint64_t> gCopies{0};

size_t taskBytes(const Task& t) { return t.count * dataTypeSize(t.dtype); }

// Calls fn(send, recv) for the k-th send to itself and the k-th recv from
// itself (the planner's pairing); false when they do not pair up in equal
// sizes (the planner then reports it).
template <typename Fn>
bool forEachSelfPair(const std::vector<Task>& ts, Fn&& fn) {
  size_t si = 0, ri = 0;
  for (;;) {
    while (si < ts.size() && ts[si].kind != TaskKind::Send) si++;
    while (ri < ts.size() && ts[ri].kind != TaskKind::Recv) ri++;
    const bool haveSend = si < ts.size(), haveRecv = ri < ts.size();
    if (!haveSend && !haveRecv) return true;
    if (haveSend != haveRecv || taskBytes(ts[si]) != taskBytes(ts[ri])) return false;
    fn(ts[si++], ts[ri++]);
  }
}

}  // namespace

bool oneRankNeedsNoKernel(const CommPlan& p) {
  if (p.nRanks != 1) return false;
  const TaskList& tasks = p.tasks;
  // With one rank every collective's result is its input (count elements:
  // AllGather's count is per rank, ReduceScatter's too), whatever the
  // built-in op; Avg over one rank divides by 1.
  for (const Task& t : tasks.colls)
    if (t.userRedOp) return false;
  return forEachSelfPair(tasks.p2p, [](const Task&, const Task&) {});
}

ncclResult_t launchOneRank(CommPlan& p) {
  const TaskList& tasks = p.tasks;
  size_t copies = 0;
  for (const Task& t : tasks.colls) copies += t.sendbuff != t.recvbuff;
  forEachSelfPair(tasks.p2p, [&](const Task& s, const Task& r) { copies += s.sendbuff != r.recvbuff && taskBytes(s) > 0; });
  if (copies == 0) return ncclSuccess;   // all in place: nothing to order either

  // Same stream order as a kernel launch of the group: the copies go on its
  // launch stream after the group's other streams, which then wait for them.
  UCHECK(collectStreams(p));
  const LaunchStreams& streams = p.launch.streams;
  ncclResult_t res = ncclSuccess;
  auto copy = [&](void* dst, const void* src, size_t bytes) {
    if (res != ncclSuccess || dst == src || bytes == 0) return;
    res = gpu::memcpyAsync(dst, src, bytes, streams.launch);
    if (res == ncclSuccess) gCopies.fetch_add(1, std::memory_order_relaxed);
  };
  for (const Task& t : tasks.colls) copy(t.recvbuff, t.sendbuff, taskBytes(t));
  forEachSelfPair(tasks.p2p, [&](const Task& s, const Task& r) { copy(r.recvbuff, s.sendbuff, taskBytes(s)); });
  UCHECK(res);
  TRACE(kSubsysColl, "rank 0/1: %zu collectives, %zu messages as %zu copies on stream %p", tasks.colls.size(),
        tasks.p2p.size() / 2, copies, streams.launch);
  return finishStreams(p);
}

uint64_t oneRankCopies() { return gCopies.load(std::memory_order_relaxed); }

}  // namespace uniccl
