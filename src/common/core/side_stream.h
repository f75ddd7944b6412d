// The side stream of a communicator, and the group-end steps that run a
// group's side work on it in order with the ranks' task streams.
//
// Some tasks of a group may run outside the group's kernels: copy-engine
// copies between ranks that one thread drives (core/ce_sendrecv.h,
// core/ce_broadcast.h, core/allreduce_ce_split.h) and a kernel of its own
// for a rank's large message to itself (core/self_copy_kernel.h). Tuning
// decides which (planSideStreams, core/tuning.h) and records them in each
// rank's plan (SidePlan, core/launch_plan.h); this file only carries the
// plan out, with no choice of its own:
//   fork  (start, before the connections and the kernels): each rank with a
//         copy that runs with the kernels records its entry event on its task
//         stream; each side stream waits for its own rank's entry and for
//         those of the ranks it writes to (their buffers are free), queues its
//         copies and records its exit event. The root's own out-of-place
//         Broadcast copy goes on its task stream instead, before its kernels.
//   after (join, once every kernel of the group is queued): the AllReduce
//         halves (core/allreduce_ce_split.h), behind both ranks' kernels.
//   join  every task stream waits for the exit events of the side streams that
//         read or write its buffers (its own included). Inside a graph capture
//         (messages to itself only) this is a fork and a join within one graph.
// Each communicator counts the messages and collectives it ever posted: the
// tuning matches a group's tasks across ranks only while the counts agree
// (the k-th task of the group on one rank is the k-th on the other).
#pragma once

#include <cstdint>
#include <vector>

#include "common/core/group.h"
#include "common/core/launch_plan.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// One thread's side work of the group being launched.
class SideStreamGroup {
 public:
  // Asks the tuning for the group's side work (each comm's plan.side),
  // counts every task of the group, and queues the copies that run with
  // the kernels. Once per group, before the connections and the kernels.
  ncclResult_t start(std::vector<ncclComm*>& comms, const UseDevice& useDevice);
  // After the group's kernels are queued (launched: all of them were), or
  // after a failure (then nothing follows the kernels): queues the copies
  // after the kernels, then the task streams wait for the side streams.
  // Clears the side plans.
  ncclResult_t join(const UseDevice& useDevice, bool launched);

 private:
  // The fork above, for the comms whose copies are (selfCopies) or are not
  // messages to themselves.
  ncclResult_t fork(const UseDevice& useDevice, bool selfCopies);
  bool exited(const ncclComm* c) const;

  std::vector<ncclComm*> comms_;     // the group's comms with side work
  std::vector<ncclComm*> ceComms_;   // matched for copy engines: leave the path together when a copy fails
  std::vector<ncclComm*> exited_;    // side streams that recorded their exit in this group
  std::vector<ncclComm*> waits_;     // scratch: side streams one task stream waits for
};

// The calling thread's instance (its vectors keep their capacity).
SideStreamGroup& sideStreamGroup();

// The comm's side stream and its entry, exit and kernels-done events
// (created once, freed with the communicator).
ncclResult_t ensureSideStream(ncclComm* c);

// Whether any of the comm's tasks in this group is left to its kernels
// (plan.side.*Path).
bool hasKernelTasks(const ncclComm* c);

// Sizes the comm's posted-message counters to its rank count.
void ensurePostedCounters(ncclComm* c);

// Counts the tasks of a communicator launched without a group (a group of
// one), so later groups still match tasks by their order.
void countPostedTasks(ncclComm* comm);

// After a failed group the counts may no longer agree between ranks: the
// communicator leaves the copy-engine path for good.
void disableCopyEngine(ncclComm* comm);

// Records a task's path in a plan's per-task list (sized to nTasks, all on
// the kernels, on first use).
void setTaskPath(std::vector<TaskPath>* paths, size_t nTasks, size_t i, TaskPath path);
// Records a copy in the plan of the rank that queues it and, when another,
// of the rank it writes to.
void addSideCopy(const SideCopy& copy);

// Transfers this process moved by copy engine so far (tests, logs).
uint64_t copyEngineTransfers();
void countCopyEngineTransfer();

}  // namespace uniccl
