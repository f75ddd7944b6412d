// In-place AlltoAll (sendbuff == recvbuff, which NCCL 2.28 accepts): every
// rank's receives overwrite blocks it has yet to send. ncclAlltoAll records
// the sends of the blocks for its peers as staged (Task::stage, with the
// ranges of the buffer they lie in: TaskList::staged); a rank's own block
// already sits where it belongs, so it sends itself nothing. The group end
// copies the staged ranges aside before any transfer of the group is queued
// (kernels, copy-engine copies: their entry events come later on the same
// stream), and the sends read the copy. Results equal the out-of-place ones.
//
// Where the copy lives:
//   - eager: device scratch the communicator owns, grown on demand to a
//     power of two. Earlier groups' kernels and copies may still read it:
//     after each group that used it an event is recorded on the staging
//     stream (behind everything that read it there: the group's other
//     streams and copy-engine copies join that stream), a later staging
//     copy on another stream waits for it, and growing waits for it on the
//     host before the old buffer is freed (rare: sizes double).
//   - graph capture: a buffer the graph owns (a graph user object hands it
//     back when the graph is destroyed; core/graph_buffers.h frees it),
//     allocated when captured, since replays run long after later eager
//     groups reused the scratch. The backends allocate in relaxed capture
//     mode, so the allocation does not break the capture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/core/group.h"
#include "common/gpu.h"
#include "uniccl.h"

namespace uniccl {

class GroupPlan;

// The eager scratch of one communicator (SideState::inPlace,
// core/side_state.h), from group to group, and the event recorded after the
// last group that read it (on freeStream).
struct InPlaceScratch {
  void* buf = nullptr;
  size_t bytes = 0;
  gpu::Event free = nullptr;
  gpu::Stream freeStream = nullptr;
  bool freeRecorded = false;
  // Outgrown buffers of a communicator on a shared GPU: freeing one would
  // wait for every kernel of the GPU, also a peer rank's that waits for this
  // thread, so they stay until the communicator goes (growth doubles: at
  // most 2x the largest).
  std::vector<void*> retired;
};

// One group's staging of one communicator (CommPlan::stage).
struct StagePlan {
  gpu::Stream eagerStream = nullptr;   // the staging stream, when the eager scratch was used
  std::vector<size_t> offsets;         // scratch: offset of each staged range
  void clear() {
    eagerStream = nullptr;
    offsets.clear();
  }
};

// Before the copy engines and the kernels: copies every staged range of the
// group's plans aside and points the staged sends at the copy.
[[nodiscard]] ncclResult_t stageInPlaceSends(GroupPlan& group, const UseDevice& useDevice);
// After the group's kernels and copies are queued (also after a failure):
// marks where the eager scratch is free again.
[[nodiscard]] ncclResult_t finishInPlaceStaging(GroupPlan& group, const UseDevice& useDevice);

// Frees the communicator's scratch (destroy: after the last group that read
// it; abort: its kernels have been drained already).
void releaseStaging(InPlaceScratch* scratch, bool abort);

// Bytes this process copied aside for in-place AlltoAlls, and scratch
// allocations it made for them (tests, logs).
uint64_t stagedBytes();
uint64_t stagingAllocations();

}  // namespace uniccl
