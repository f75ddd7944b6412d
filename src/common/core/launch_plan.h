// What the end of a group launches for one communicator, decided once (as
// NCCL's kernel plan): the planner fills it, and the launch, the watchdog
// and the copy engine read it instead of passing facts through other
// fields of the communicator. One per communicator (ncclComm::plan); its
// vectors keep their capacity across groups so steady-state launches do
// not allocate.
//
// Life of a plan, per group end:
//   checkTaskStreams        capture state of the group's streams (captureKnown, capture)
//   copy engine (start)     side-stream forks it made (sideKernelForked)
//   planTasks               one-rank copies, or planWorks: works, their tasks'
//                           sequence numbers and indices, kernel launches
//   (profiler)              Coll/P2p events described from the plan
//   launchPlan              collectStreams (the launch stream, the others
//                           ordered before it), then launchWorks(k) for each
//                           launch: arguments or FIFO, watchdog descriptor, done event
//   endGroup()              after the group (launched or dropped)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/gpu.h"
#include "device/dev_types.h"

namespace uniccl {

struct LaunchStreams {
  gpu::Stream launch = nullptr;     // kernels go here (the group's first stream)
  gpu::CaptureInfo capture{};       // of `launch`; the planner checked the others agree
  bool captured = false;
};

// One kernel launch: a range of the plan's works and the kernel that runs them.
struct KernelLaunch {
  uint32_t firstWork = 0;
  uint32_t nWorks = 0;
  const void* kernel = nullptr;
  unsigned grid = 0;                // blocks: the highest channel of its works + 1
};

struct LaunchPlan {
  // A communicator of one rank whose tasks are all copies (core/one_rank.h):
  // no works, no kernel; the copies go on the launch stream.
  bool oneRankCopies = false;
  // Work items: the collectives in task order, then the p2p rounds.
  std::vector<dev::Work> works;
  // Per work item: the communicator-wide sequence number of its task (the
  // watchdog's descriptor names it) and the task's index in the group,
  // collectives first, then p2p tasks (the profiler's events).
  std::vector<uint64_t> workSeq;
  std::vector<int> workTask;
  size_t nColl = 0;                 // works[0, nColl) are collectives
  std::vector<KernelLaunch> launches;
  std::vector<int> p2pRounds;       // the planner's scratch: rounds that carry messages

  // Capture state of the group's first stream, once the group end asked
  // (checkTaskStreams): later steps do not ask the runtime again.
  bool captureKnown = false;
  gpu::CaptureInfo capture{};
  LaunchStreams streams;            // collectStreams()
  std::vector<gpu::Stream> otherStreams;   // the group's streams besides streams.launch

  // The copy engine forked a kernel onto the side stream (a message to
  // itself): the group's first kernel launches plainly (no programmatic
  // launch), so that both start together instead of the group's kernel
  // taking the SMs first.
  bool sideKernelForked = false;

  // Clears what one group decided; capacity stays.
  void endGroup() {
    oneRankCopies = false;
    works.clear();
    workSeq.clear();
    workTask.clear();
    nColl = 0;
    launches.clear();
    captureKnown = false;
    capture = gpu::CaptureInfo{};
    streams = LaunchStreams{};
    otherStreams.clear();
    sideKernelForked = false;
  }
};

}  // namespace uniccl
