// What a communicator keeps from group to group for the steps its group
// ends take beside the planner and the kernels' connections: the side
// stream with its events and posted-task counts (copy engines and side
// kernels, core/side_stream.h), the eager scratch of in-place AlltoAll
// sends (core/inplace_stage.h) and the eager scratch of PAT ReduceScatter
// partial sums (core/pat_scratch.h). A CommPlan points each step at its own
// part (CommPlan::sides, ::stageScratch, ::patScratch); none of the steps
// reads the communicator for it.
//
// The communicator owns one (ncclComm::sideState) from construction to
// destruction: its parts outlive every group end, and a group end may run
// without the storage of its plan (core/comm_plan.h), so the plan storage
// could not own them. Destroy and abort hand its device memory, streams and
// events back with releaseSideState once the launches have drained.
#pragma once

#include "common/core/inplace_stage.h"
#include "common/core/pat_scratch.h"
#include "common/core/side_stream.h"

namespace uniccl {

struct SideState {
  SideStreams streams;
  InPlaceScratch inPlace;
  PatScratch pat;
};

// Destroy and abort (after the communicator's launches drained): waits for
// the side stream, then frees the stream, its events and both scratches.
// The state stays valid and empty.
void releaseSideState(SideState* s, bool abort);

}  // namespace uniccl
