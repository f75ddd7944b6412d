// A send on rank a to b whose matching recv on b is in the same group of
// this thread (a single process driving several GPUs holds both ends),
// moved by one peer copy on a's side stream (core/side_stream.h) straight
// from the send buffer into the receive buffer: no staging slot, no SM
// (about 392 GB/s each way on H200 NV18, where SM stores reach about 365;
// docs/performance-history.md).
//
// Which send meets which recv is NCCL's rule: the k-th send from a to b
// meets the k-th recv at b from a, counted over everything the two ranks
// ever posted. Each communicator counts the messages it posted to and from
// each peer (core/side_stream.h); a pair is matched inside one group only
// while a's count of sends to b equals b's count of recvs from a before the
// group (a lone send from an earlier group keeps the later ones on the
// kernels, which match them in order).
//
// Whether a matched pair goes by copy engine is tuning's choice
// (planSideStreams, core/tuning.h: size, fan-out, transport, knobs); the
// plan records the copy and both tasks' path (TaskPath::CopyEngine).
#pragma once

#include <cstddef>

namespace uniccl {

struct CommPlan;

// Index in B.tasks.p2p of the recv from A that meets A's send
// A.tasks.p2p[sendIndex] (to B's rank), or -1: the counts posted before
// the group disagree (SideStreams of both), B has no such recv in the
// group, or its size differs.
long matchingRecv(const CommPlan& A, size_t sendIndex, const CommPlan& B);

// Records the pair as a peer copy on A's side stream in both plans.
void planSendRecvCopy(CommPlan& A, size_t sendIndex, CommPlan& B, size_t recvIndex);

}  // namespace uniccl
