#include "common/core/ce_broadcast.h"

#include "common/core/comm_plan.h"
#include "common/core/redop.h"
#include "common/core/side_stream.h"

namespace uniccl {

bool broadcastPairFits(const Task& a, const Task& b) {
  // (Validation keeps the root in 0..1.)
  return a.kind == TaskKind::Broadcast && b.kind == TaskKind::Broadcast && a.root == b.root &&
         a.count * dataTypeSize(a.dtype) == b.count * dataTypeSize(b.dtype);
}

void planBroadcastCopies(CommPlan& A, CommPlan& B, size_t k) {
  const Task& ta = A.tasks.colls[k];
  const Task& tb = B.tasks.colls[k];
  CommPlan* rootComm = ta.root == 0 ? &A : &B;
  CommPlan* otherComm = ta.root == 0 ? &B : &A;
  const Task& root = ta.root == 0 ? ta : tb;
  const Task& other = ta.root == 0 ? tb : ta;
  const size_t bytes = root.count * dataTypeSize(root.dtype);
  setTaskPath(&A.side.collPath, A.tasks.colls.size(), k, TaskPath::CopyEngine);
  setTaskPath(&B.side.collPath, B.tasks.colls.size(), k, TaskPath::CopyEngine);
  addSideCopy(SideCopy{SideWhat::Broadcast, SideWhen::WithKernels, SideOn::SideStream, rootComm, otherComm,
                       root.sendbuff, other.recvbuff, bytes});
  if (root.sendbuff != root.recvbuff)
    addSideCopy(SideCopy{SideWhat::BroadcastLocal, SideWhen::WithKernels, SideOn::TaskStream, rootComm, rootComm,
                         root.sendbuff, root.recvbuff, bytes});
}

}  // namespace uniccl
