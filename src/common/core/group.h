// Group semantics (ncclGroupStart/End) per thread: calls inside a group only
// record tasks (and deferred communicator inits); ncclGroupEnd connects what
// the group's point-to-point operations need and launches every
// communicator's tasks. A call outside any group is a group of one.
#pragma once

#include <functional>

#include "common/core/tasks.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

bool inGroup();
// Records a task (in a group) or plans and launches it at once.
ncclResult_t enqueueTask(ncclComm* comm, const Task& task);
// Defers a communicator initialization to the end of the open group, where
// all deferred inits run concurrently (one thread drives several GPUs).
void deferToGroupEnd(std::function<ncclResult_t()> job);

}  // namespace uniccl
