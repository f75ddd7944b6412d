#include "common/core/allreduce_ce_split.h"

#include <algorithm>

#include "common/check.h"
#include "common/core/comm_plan.h"
#include "common/core/redop.h"
#include "common/core/side_stream.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

bool isHalf(const SideCopy& x) { return x.what == SideWhat::AllReduceHalf; }

bool hasHalfFrom(const CommPlan& p) {
  const std::vector<SideCopy>& xs = p.side.copies;
  return std::any_of(xs.begin(), xs.end(), [&p](const SideCopy& x) { return isHalf(x) && x.from == &p; });
}

}  // namespace

bool allReduceSplitFits(const Task& a, const Task& b) {
  return a.kind == TaskKind::AllReduce && b.kind == TaskKind::AllReduce && a.count == b.count && a.dtype == b.dtype &&
         a.count % 2 == 0;
}

void planAllReduceSplit(CommPlan& A, CommPlan& B, size_t k) {
  const Task& ta = A.tasks.colls[k];
  const Task& tb = B.tasks.colls[k];
  const size_t halfBytes = ta.count / 2 * dataTypeSize(ta.dtype);
  setTaskPath(&A.side.collPath, A.tasks.colls.size(), k, TaskPath::ReduceScatterThenCopy);
  setTaskPath(&B.side.collPath, B.tasks.colls.size(), k, TaskPath::ReduceScatterThenCopy);
  // Rank r's half starts at r * halfBytes in both receive buffers.
  char* recvA = static_cast<char*>(ta.recvbuff);
  char* recvB = static_cast<char*>(tb.recvbuff);
  addSideCopy(SideCopy{SideWhat::AllReduceHalf, SideWhen::AfterKernels, SideOn::SideStream, &A, &B, recvA, recvB,
                       halfBytes});
  addSideCopy(SideCopy{SideWhat::AllReduceHalf, SideWhen::AfterKernels, SideOn::SideStream, &B, &A, recvB + halfBytes,
                       recvA + halfBytes, halfBytes});
}

Task reduceScatterHalf(int rank, const Task& t) {
  Task rs = t;
  rs.kind = TaskKind::ReduceScatter;
  rs.count = t.count / 2;
  rs.recvbuff = static_cast<char*>(t.recvbuff) + (size_t)rank * rs.count * dataTypeSize(t.dtype);
  return rs;
}

// Each rank's side stream waits until both ranks' kernels of the group
// ended (its half is reduced, the peer's receive buffer is no longer
// read), then copies its half across.
ncclResult_t queueAllReduceHalves(GroupPlan& group, const UseDevice& useDevice) {
  for (CommPlan& p : group) {
    const std::vector<SideCopy>& xs = p.side.copies;
    if (!std::any_of(xs.begin(), xs.end(), isHalf)) continue;
    UCHECK(useDevice(p.gpuDev));
    UCHECK(ensureSideStream(p.sides));
    UCHECK(gpu::eventRecord(p.sides->kernelsDone, p.side.stream));
  }
  for (CommPlan& p : group) {
    if (!hasHalfFrom(p)) continue;
    SideStreams* s = p.sides;
    UCHECK(useDevice(p.gpuDev));
    UCHECK(gpu::streamWaitEvent(s->stream, s->kernelsDone));
    for (const SideCopy& x : p.side.copies) {
      if (!isHalf(x) || x.from != &p) continue;
      UCHECK(gpu::streamWaitEvent(s->stream, x.to->sides->kernelsDone));
      UCHECK(gpu::memcpyAsync(x.dst, x.src, x.bytes, s->stream));
      countCopyEngineTransfer();
      TRACE(kSubsysColl, "rank %d -> %d: AllReduce half of %zu bytes by copy engine", x.from->rank, x.to->rank,
            x.bytes);
    }
    // (Behind any copy the fork queued on this side stream: one exit for all.)
    UCHECK(gpu::eventRecord(s->exit, s->stream));
    p.side.exited = true;
  }
  return ncclSuccess;
}

}  // namespace uniccl
