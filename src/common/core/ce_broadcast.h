// A Broadcast of a 2-rank communicator whose two ranks are both in one
// group of this thread, moved by one peer copy on the root's side stream
// (core/side_stream.h) straight from the root's send buffer into the other
// rank's receive buffer: no staging slot, no SM (1 GiB 358 -> 394 GB/s on
// 2 H200; docs/performance-history.md). An out-of-place root also copies its own
// send buffer into its receive buffer, on its task stream. With more ranks
// the root's links would carry every copy: the ring stays better.
//
// Whether a Broadcast goes so is tuning's choice (planSideStreams,
// core/tuning.h: UNICCL_COPY_ENGINE, UNICCL_COPY_ENGINE_MIN_BYTES); the
// plan records the copies and the tasks' path (TaskPath::CopyEngine).
#pragma once

#include <cstddef>

#include "common/core/tasks.h"

namespace uniccl {

struct CommPlan;

// Whether the two ranks' k-th collectives are one Broadcast a peer copy can
// carry: both Broadcast, the same root, the same size.
bool broadcastPairFits(const Task& rank0, const Task& rank1);

// Records the k-th collective of a 2-rank communicator as copies in both
// ranks' plans: root to the other rank on the root's side stream, and the
// root's own copy when out of place.
void planBroadcastCopies(CommPlan& rank0, CommPlan& rank1, size_t k);

}  // namespace uniccl
