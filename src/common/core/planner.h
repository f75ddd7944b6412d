// The planner turns the tasks a communicator collected in a group into
// work items and kernel launches (docs/architecture.md, "The life of one collective").
#pragma once

#include <cstddef>
#include <vector>

#include "common/core/tasks.h"
#include "common/gpu.h"
#include "common/transport/peer_need.h"
#include "device/dev_types.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

struct CommPlan;
struct LaunchPlan;

// Bytes the tuning looks at for a collective task: the whole buffer a rank
// ends up with (AllGather / ReduceScatter: nRanks times the per-rank count).
size_t tuningBytes(const ncclComm* comm, const Task& t);

// A p2p work item with no send and no receive yet, over every p2p channel,
// Simple protocol, messages cut in sliceBytes (grouped send/recv, PAT rounds).
dev::Work emptyP2pWork(const ncclComm* comm, uint32_t sliceBytes);

// Peers that the plan's tasks need (its p2p tasks left to the kernels, PAT
// rounds) and that are not connected yet.
void peersToConnect(const CommPlan& p, std::vector<PeerNeed>* needs);

// Checks the streams of the plan's tasks: all captured by one graph or none
// (the capture state goes into p.launch).
[[nodiscard]] ncclResult_t checkTaskStreams(CommPlan& p);
// ncclInvalidUsage (WARN) when `cap` is an active capture the runtime cannot
// record uniccl's work into (gpu::graphCaptureSupported: ROCm < 5.3).
[[nodiscard]] ncclResult_t checkCaptureSupported(const ncclComm* comm, const gpu::CaptureInfo& cap, gpu::Stream s);

// Fills p.launch (core/launch_plan.h) from p.tasks: the work items
// (collectives in task order, then p2p rounds), each one's task sequence
// number and index, and the kernel launches that carry them. Launches
// nothing; ncclInvalidUsage when the build lacks a datatype's kernels.
[[nodiscard]] ncclResult_t planWorks(CommPlan& p);

// planWorks' last step, apart for tests: plan->launches from plan->works
// (the first plan->nColl of them collectives): consecutive collectives of
// one datatype and kind share a launch; p2p items ride with the last ring
// or tree launch, or go to the p2p kernel.
[[nodiscard]] ncclResult_t planLaunches(LaunchPlan* plan);

// The one launch sequence of a communicator's part of a group:
//   planTasks   p.launch from p.tasks (one-rank copies, or planWorks);
//   launchPlan  queues the plan's copies or kernel launches on the streams.
// launchTasks runs both, and tells the plan's observer (the profiler,
// core/launch_observer.h) when the plan is made, around each kernel launch
// and when the sequence ended, also after a failure. The plan is cleared
// when its GroupPlan goes.
[[nodiscard]] ncclResult_t planTasks(CommPlan& p);
[[nodiscard]] ncclResult_t launchPlan(CommPlan& p);
[[nodiscard]] ncclResult_t launchTasks(CommPlan& p);

}  // namespace uniccl
