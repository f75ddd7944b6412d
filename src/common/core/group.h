// Group semantics (ncclGroupStart/End) per thread: calls inside a group only
// record tasks (and deferred communicator inits); ncclGroupEnd connects what
// the group's point-to-point operations need and launches every
// communicator's tasks. A call outside any group is a group of one.
#pragma once

#include <functional>
#include <vector>

#include "common/core/tasks.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// Switches the calling thread to a device (the group end's device guard):
// the group-end steps that queue work on several GPUs take it.
using UseDevice = std::function<ncclResult_t(int dev)>;

bool inGroup();
// A communicator being destroyed or aborted inside the calling thread's open
// group: its tasks are dropped and the group end no longer sees it.
void leaveGroup(ncclComm* comm);
// NCCL's group error rule: the first error of a call made inside a group is
// remembered; ncclGroupEnd then discards the group's operations and returns
// it. Returns `result` (call it on every API entry's result).
[[nodiscard]] ncclResult_t groupErrCheck(ncclResult_t result);
// Records a task (in a group) or plans and launches it at once.
[[nodiscard]] ncclResult_t enqueueTask(ncclComm* comm, const Task& task);
// Defers a communicator initialization (or another collective setup call,
// such as a window registration) to the end of the open group, where the
// deferred jobs run concurrently (one thread drives several GPUs). Jobs with
// the same non-null serialKey (their communicator) run one after the other,
// in call order, on one thread: they share the comm's bootstrap.
void deferToGroupEnd(std::function<ncclResult_t()> job, const void* serialKey = nullptr);
// Runs the jobs at once, each on a thread of its own (a single job on this
// thread), and returns the first failure by index with its ncclGetLastError
// text copied to the calling thread (the text is per thread).
[[nodiscard]] ncclResult_t runConcurrently(std::vector<std::function<ncclResult_t()>>& jobs);

}  // namespace uniccl
