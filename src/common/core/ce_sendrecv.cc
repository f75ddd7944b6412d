#include "common/core/ce_sendrecv.h"

#include "common/core/comm_plan.h"
#include "common/core/redop.h"
#include "common/core/side_stream.h"

namespace uniccl {

namespace {

size_t taskBytes(const Task& t) { return t.count * dataTypeSize(t.dtype); }

// Index in p.tasks.p2p of the k-th task of `kind` with peer `peer`, or -1.
long nthMessage(const CommPlan& p, TaskKind kind, int peer, size_t k) {
  const std::vector<Task>& ts = p.tasks.p2p;
  for (size_t i = 0; i < ts.size(); i++)
    if (ts[i].kind == kind && ts[i].peer() == peer && k-- == 0) return (long)i;
  return -1;
}

}  // namespace

long matchingRecv(const CommPlan& A, size_t sendIndex, const CommPlan& B) {
  const std::vector<Task>& ts = A.tasks.p2p;
  const Task& s = ts[sendIndex];
  if (A.sides->sentTo[B.rank] != B.sides->recvdFrom[A.rank]) return -1;
  size_t k = 0;   // s is A's k-th send to B in this group
  for (size_t j = 0; j < sendIndex; j++) k += ts[j].kind == TaskKind::Send && ts[j].peer() == s.peer();
  const long r = nthMessage(B, TaskKind::Recv, A.rank, k);
  if (r < 0 || taskBytes(B.tasks.p2p[(size_t)r]) != taskBytes(s)) return -1;
  return r;
}

void planSendRecvCopy(CommPlan& A, size_t sendIndex, CommPlan& B, size_t recvIndex) {
  const Task& s = A.tasks.p2p[sendIndex];
  const Task& r = B.tasks.p2p[recvIndex];
  setTaskPath(&A.side.p2pPath, A.tasks.p2p.size(), sendIndex, TaskPath::CopyEngine);
  setTaskPath(&B.side.p2pPath, B.tasks.p2p.size(), recvIndex, TaskPath::CopyEngine);
  addSideCopy(SideCopy{SideWhat::SendRecv, SideWhen::WithKernels, SideOn::SideStream, &A, &B, s.sendbuff, r.recvbuff,
                       taskBytes(s)});
}

}  // namespace uniccl
