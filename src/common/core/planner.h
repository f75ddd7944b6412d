// The planner turns the tasks a communicator collected in a group into
// work items and kernel launches (see DESIGN.md, "the life of one collective").
#pragma once

#include <cstddef>
#include <vector>

#include "common/core/tasks.h"
#include "common/gpu.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// Bytes the tuning looks at for a collective task: the whole buffer a rank
// ends up with (AllGather / ReduceScatter: nRanks times the per-rank count).
size_t tuningBytes(const ncclComm* comm, const Task& t);

// Peers that comm's p2p tasks need and that are not connected yet.
void peersToConnect(ncclComm* comm, std::vector<int>* peers);

// Checks the streams of comm's tasks: all captured by one graph or none.
ncclResult_t checkTaskStreams(ncclComm* comm);
// ncclInvalidUsage (WARN) when `cap` is an active capture the runtime cannot
// record uniccl's work into (gpu::graphCaptureSupported: ROCm < 5.3).
ncclResult_t checkCaptureSupported(const ncclComm* comm, const gpu::CaptureInfo& cap, gpu::Stream s);

// Plans comm->tasks into work items, launches them on the tasks' stream(s)
// and clears the task list (also on error).
ncclResult_t launchTasks(ncclComm* comm);

}  // namespace uniccl
