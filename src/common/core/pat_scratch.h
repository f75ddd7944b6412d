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
#include <cstdint>
#include <vector>

#include "common/gpu.h"
#include "uniccl.h"

namespace uniccl {

// One communicator's eager scratch (SideState::pat, core/side_state.h), and
// the event recorded after the last launches that used it.
struct PatScratch {
  void* buf = nullptr;
  size_t bytes = 0;
  gpu::Event free = nullptr;
  bool freeRecorded = false;
  std::vector<void*> retired;   // outgrown buffers of a shared GPU, freed with the communicator
};

// At least `bytes` of scratch for the group being planned, whose launches
// go to a stream in capture state `cap` (rank, gpuShared: the communicator's).
[[nodiscard]] ncclResult_t patScratch(PatScratch* s, int rank, bool gpuShared, size_t bytes, const gpu::CaptureInfo& cap,
                        void** out);

// After the launches that read the eager scratch were queued on `stream`.
[[nodiscard]] ncclResult_t patScratchLaunched(PatScratch* s, gpu::Stream stream);

// Frees the eager scratch (destroy and abort: after the launches drained).
void releasePatScratch(PatScratch* s);

// Scratch allocations made for PAT ReduceScatters in this process (tests).
uint64_t patScratchAllocations();

}  // namespace uniccl
