#include "common/core/allreduce_ce_split.h"

#include <algorithm>

#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/redop.h"
#include "common/core/side_stream.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

bool isHalf(const SideCopy& x) { return x.what == SideWhat::AllReduceHalf; }

bool hasHalfFrom(const ncclComm* c) {
  const std::vector<SideCopy>& xs = c->plan.side.copies;
  return std::any_of(xs.begin(), xs.end(), [c](const SideCopy& x) { return isHalf(x) && x.from == c; });
}

}  // namespace

bool allReduceSplitFits(const Task& a, const Task& b) {
  return a.kind == TaskKind::AllReduce && b.kind == TaskKind::AllReduce && a.count == b.count && a.dtype == b.dtype &&
         a.count % 2 == 0;
}

void planAllReduceSplit(ncclComm* A, ncclComm* B, size_t k) {
  const Task& ta = A->tasks.colls[k];
  const Task& tb = B->tasks.colls[k];
  const size_t halfBytes = ta.count / 2 * dataTypeSize(ta.dtype);
  setTaskPath(&A->plan.side.collPath, A->tasks.colls.size(), k, TaskPath::ReduceScatterThenCopy);
  setTaskPath(&B->plan.side.collPath, B->tasks.colls.size(), k, TaskPath::ReduceScatterThenCopy);
  // Rank r's half starts at r * halfBytes in both receive buffers.
  char* recvA = static_cast<char*>(ta.recvbuff);
  char* recvB = static_cast<char*>(tb.recvbuff);
  addSideCopy(SideCopy{SideWhat::AllReduceHalf, SideWhen::AfterKernels, SideOn::SideStream, A, B, recvA, recvB,
                       halfBytes});
  addSideCopy(SideCopy{SideWhat::AllReduceHalf, SideWhen::AfterKernels, SideOn::SideStream, B, A, recvB + halfBytes,
                       recvA + halfBytes, halfBytes});
}

Task reduceScatterHalf(const ncclComm* comm, const Task& t) {
  Task rs = t;
  rs.kind = TaskKind::ReduceScatter;
  rs.count = t.count / 2;
  rs.recvbuff = static_cast<char*>(t.recvbuff) + (size_t)comm->rank * rs.count * dataTypeSize(t.dtype);
  return rs;
}

// Each rank's side stream waits until both ranks' kernels of the group
// ended (its half is reduced, the peer's receive buffer is no longer
// read), then copies its half across.
ncclResult_t queueAllReduceHalves(const std::vector<ncclComm*>& comms, const UseDevice& useDevice,
                                  std::vector<ncclComm*>* exited) {
  for (ncclComm* c : comms) {
    const std::vector<SideCopy>& xs = c->plan.side.copies;
    if (!std::any_of(xs.begin(), xs.end(), isHalf)) continue;
    UCHECK(useDevice(c->gpuDev));
    UCHECK(ensureSideStream(c));
    UCHECK(gpu::eventRecord(c->ceKernelsDone, c->plan.side.stream));
  }
  for (ncclComm* c : comms) {
    if (!hasHalfFrom(c)) continue;
    UCHECK(useDevice(c->gpuDev));
    UCHECK(gpu::streamWaitEvent(c->ceStream, c->ceKernelsDone));
    for (const SideCopy& x : c->plan.side.copies) {
      if (!isHalf(x) || x.from != c) continue;
      UCHECK(gpu::streamWaitEvent(c->ceStream, x.to->ceKernelsDone));
      UCHECK(gpu::memcpyAsync(x.dst, x.src, x.bytes, c->ceStream));
      countCopyEngineTransfer();
      TRACE(kSubsysColl, "rank %d -> %d: AllReduce half of %zu bytes by copy engine", x.from->rank, x.to->rank,
            x.bytes);
    }
    // (Behind any copy the fork queued on this side stream: one exit for all.)
    UCHECK(gpu::eventRecord(c->ceExit, c->ceStream));
    if (std::find(exited->begin(), exited->end(), c) == exited->end()) exited->push_back(c);
  }
  return ncclSuccess;
}

}  // namespace uniccl
