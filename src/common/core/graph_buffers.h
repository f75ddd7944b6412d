// Buffers a captured graph owns (replays run long after the work FIFO and
// the communicator's scratch moved on): a launch's work items when they do
// not fit the kernel arguments (core/launch.cc), an in-place AlltoAll's
// staged copy (core/inplace_stage.cc).
//
// One rule releases them all. The graph holds each through a user object
// whose destructor runs when the graph (and its executables) are destroyed,
// possibly on the runtime's own thread: there the GPU API is off limits, and
// so is any lock a thread inside the GPU API may hold (as for the
// watchdog's graph slots, watchdog/graph_tracker.h). The destructor only
// pushes the buffer's record on a lock-free list; reclaimGraphBuffers, called
// by the next group end and communicator init, frees what was pushed.
#pragma once

#include "common/gpu.h"
#include "uniccl.h"

namespace uniccl {

enum class GraphBufferKind { kHostMapped, kDevice };   // gpu::hostAllocMapped / gpu::deviceAlloc

// Hands `ptr` to graph `g`: freed after the graph is destroyed. On failure
// the buffer is queued for freeing already (the caller must not free it).
[[nodiscard]] ncclResult_t graphOwnBuffer(gpu::Graph g, void* ptr, GraphBufferKind kind);

// Frees the buffers of destroyed graphs (never from a user-object destructor).
void reclaimGraphBuffers();

}  // namespace uniccl
