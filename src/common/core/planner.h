// The planner turns the tasks a communicator collected in a group into
// work items and kernel launches (docs/architecture.md, "The life of one collective").
#pragma once

#include <cstddef>
#include <vector>

#include "common/core/tasks.h"
#include "common/gpu.h"
#include "device/dev_types.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// Bytes the tuning looks at for a collective task: the whole buffer a rank
// ends up with (AllGather / ReduceScatter: nRanks times the per-rank count).
size_t tuningBytes(const ncclComm* comm, const Task& t);

// A p2p work item with no send and no receive yet, over every p2p channel,
// Simple protocol, messages cut in sliceBytes (grouped send/recv, PAT rounds).
dev::Work emptyP2pWork(const ncclComm* comm, uint32_t sliceBytes);

// Peers that comm's p2p tasks need and that are not connected yet.
void peersToConnect(ncclComm* comm, std::vector<int>* peers);

// Checks the streams of comm's tasks: all captured by one graph or none.
ncclResult_t checkTaskStreams(ncclComm* comm);
// ncclInvalidUsage (WARN) when `cap` is an active capture the runtime cannot
// record uniccl's work into (gpu::graphCaptureSupported: ROCm < 5.3).
ncclResult_t checkCaptureSupported(const ncclComm* comm, const gpu::CaptureInfo& cap, gpu::Stream s);

// Fills comm->plan (core/launch_plan.h) from comm->tasks: the work items
// (collectives in task order, then p2p rounds), each one's task sequence
// number and index, and the kernel launches that carry them. Launches
// nothing; ncclInvalidUsage when the build lacks a datatype's kernels.
ncclResult_t planWorks(ncclComm* comm);

// planWorks' last step, apart for tests: plan->launches from plan->works
// (the first plan->nColl of them collectives): consecutive collectives of
// one datatype and kind share a launch; p2p items ride with the last ring
// or tree launch, or go to the p2p kernel.
struct LaunchPlan;
ncclResult_t planLaunches(LaunchPlan* plan);

// The steps of launchTasks, apart for the profiler (its Coll/P2p events are
// described from the plan and started before the launches):
// planTasks: comm->plan from comm->tasks (one-rank copies, or planWorks);
// launchPlan: queues the plan's copies or kernel launches on the streams;
// endGroupTasks: clears the task list and the plan.
ncclResult_t planTasks(ncclComm* comm);
ncclResult_t launchPlan(ncclComm* comm);
void endGroupTasks(ncclComm* comm);

// planTasks, launchPlan and endGroupTasks (also on error).
ncclResult_t launchTasks(ncclComm* comm);

}  // namespace uniccl
