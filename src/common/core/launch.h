// Kernel launches of a planned group: where the work items travel (kernel
// arguments, work FIFO, or a graph-owned persistent buffer), the done event
// and its callback, and ordering across the streams of a group.
#pragma once

#include <cstddef>

#include "common/gpu.h"
#include "device/dev_types.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

constexpr size_t kMaxWorksPerLaunch = 512;   // 32 KiB of FIFO per launch

struct LaunchStreams {
  gpu::Stream launch = nullptr;     // kernels go here (the group's first stream)
  gpu::CaptureInfo capture{};       // of `launch`; the planner checked the others agree
  bool captured = false;
};

// Finds the group's streams and orders the launch stream after the other
// streams of the group and after the communicator's previous launch.
ncclResult_t collectStreams(ncclComm* comm, LaunchStreams* streams);
ncclResult_t launchWorks(ncclComm* comm, const dev::Work* works, int n, const void* kernel,
                         const LaunchStreams& streams);
// Whether a launch of `grid` blocks lets the next programmatic launch of its
// stream start once it passed its own wait (KernelArgs::releaseEarly).
bool releaseEarly(const ncclComm* comm, unsigned grid);
// Orders the group's other streams after its launches.
ncclResult_t finishStreams(ncclComm* comm, const LaunchStreams& streams);

// Waits until every launch of the communicator ended and ran its callbacks:
// those with a done event through the callback queue, the others through
// the watchdog's progress words (ncclCommFinalize, destroy, abort).
ncclResult_t drainLaunches(ncclComm* comm);

}  // namespace uniccl
