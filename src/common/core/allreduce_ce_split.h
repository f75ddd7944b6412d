// A large AllReduce of a 2-rank communicator with both ranks in one group
// of this thread, split between the SMs and the copy engines: the kernels
// run a ReduceScatter (rank r reduces half r into its receive buffer at
// offset r * half: the SMs do the arithmetic and half of the traffic), then
// each rank's side stream copies its reduced half into the other rank's
// receive buffer (the other half of the traffic at the copy engines' higher
// rate: 2 GiB 362.5 GB/s on 2 H200 against 349.3 on the kernels alone).
// The copies wait for both ranks' kernels (an event recorded behind them),
// so an in-place peer has read the half of its send buffer they overwrite.
//
// Whether an AllReduce is split is tuning's choice (planSideStreams,
// core/tuning.h: UNICCL_COPY_ENGINE_ALLREDUCE_MIN_BYTES, 512 MiB; below,
// the wait between the two phases costs more than the faster copy saves).
// The task stays an AllReduce; the plan says TaskPath::ReduceScatterThenCopy,
// and the planner asks reduceScatterHalf() what the kernels run.
#pragma once

#include "common/core/group.h"
#include "common/core/tasks.h"
#include "uniccl.h"

namespace uniccl {

class GroupPlan;
struct CommPlan;

// Whether the two ranks' k-th collectives can be split so: both AllReduce,
// of the same datatype and an even count (an odd count has no equal halves).
bool allReduceSplitFits(const Task& rank0, const Task& rank1);

// Records the split of the k-th collective of a 2-rank communicator in
// both ranks' plans: the path, and each rank's half as a copy after the
// kernels into the other rank's receive buffer.
void planAllReduceSplit(CommPlan& rank0, CommPlan& rank1, size_t k);

// What the kernels of rank `rank` run for a split AllReduce: NCCL's
// ReduceScatter of the half counts, into the rank's half of its receive
// buffer (an in-place AllReduce so gives NCCL's in-place ReduceScatter).
Task reduceScatterHalf(int rank, const Task& allReduce);

// After every kernel of the group is queued: records the kernels-done
// event on every rank of a split AllReduce in the group; each rank's side
// stream waits for its own and its peer's, copies its half across and
// records its exit (SidePlan::exited).
[[nodiscard]] ncclResult_t queueAllReduceHalves(GroupPlan& group, const UseDevice& useDevice);

}  // namespace uniccl
