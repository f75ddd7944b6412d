// Device memory for the partial sums of PAT ReduceScatters
// (core/reducescatter_pat.h), which only the communicator's own kernels
// touch, between the rounds of one ReduceScatter.
//
//   - eager: scratch the communicator owns, grown on demand to a power of
//     two. A communicator's kernels run in issue order, even across
//     streams (core/launch.cc, collectStreams), so a later ReduceScatter
//     reuses it after the earlier one's rounds; the ReduceScatters of one
//     group share it the same way. Growing waits on the host for the
//     launches that used the old buffer (an event recorded behind them)
//     before it is freed; on a GPU shared by ranks the old one stays until
//     the communicator goes (freeing waits for every kernel of the GPU,
//     also a peer's that waits for this thread).
//   - graph capture: a buffer the graph owns (core/graph_buffers.h), since
//     replays run long after later eager launches reused the scratch.
#pragma once

#include <cstddef>

#include "common/gpu.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// At least `bytes` of scratch for the group being planned, whose launches
// go to a stream in capture state `cap`.
ncclResult_t patScratch(ncclComm* comm, size_t bytes, const gpu::CaptureInfo& cap, void** out);

// After the launches that read the eager scratch were queued on `s`.
ncclResult_t patScratchLaunched(ncclComm* comm, gpu::Stream s);

// Frees the eager scratch (destroy and abort: after the launches drained).
void releasePatScratch(ncclComm* comm);

// Scratch allocations made for PAT ReduceScatters in this process (tests).
uint64_t patScratchAllocations();

}  // namespace uniccl
