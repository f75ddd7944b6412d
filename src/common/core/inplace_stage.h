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

#include <cstdint>
#include <utility>
#include <vector>

#include "common/core/group.h"
#include "common/gpu.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// One thread's staging of the group being launched.
class InPlaceStaging {
 public:
  // Before the copy engines and the kernels: copies every staged range of
  // the group's communicators aside and points the staged sends at the copy.
  ncclResult_t start(std::vector<ncclComm*>& comms, const UseDevice& useDevice);
  // After the group's kernels and copies are queued (also after a failure):
  // marks where the eager scratch is free again.
  ncclResult_t finish(const UseDevice& useDevice);

 private:
  ncclResult_t stage(ncclComm* c, const UseDevice& useDevice);
  std::vector<std::pair<ncclComm*, gpu::Stream>> eager_;   // comms that used their scratch, staging stream
  std::vector<size_t> offsets_;                              // scratch: offset of each staged range
};

// The calling thread's instance (its vectors keep their capacity).
InPlaceStaging& inPlaceStaging();

// Frees the communicator's scratch (destroy: after the last group that read
// it; abort: its kernels have been drained already).
void releaseStaging(ncclComm* comm, bool abort);

// Bytes this process copied aside for in-place AlltoAlls, and scratch
// allocations it made for them (tests, logs).
uint64_t stagedBytes();
uint64_t stagingAllocations();

}  // namespace uniccl
