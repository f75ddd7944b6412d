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
#include "common/core/tasks.h"
#include "common/gpu.h"
#include "uniccl.h"

namespace uniccl {

class GroupPlan;
struct CommPlan;

// What one communicator keeps for its side work, from group to group
// (SideState::streams, core/side_state.h): the messages it ever posted to and from each peer and
// the collectives it ever posted (how groups match the ranks' tasks for
// copy engines), the side stream of the copies and side kernels, and the
// events that order it between the ranks' streams (created once, released
// with the communicator).
struct SideStreams {
  std::vector<uint64_t> sentTo, recvdFrom;   // [peer]: messages posted (sized by ensurePostedCounters)
  uint64_t collsPosted = 0;
  bool copyEngineOff = false;   // counts may disagree with the peers' (a group failed)
  gpu::Stream stream = nullptr;
  gpu::Event entry = nullptr;
  gpu::Event exit = nullptr;
  gpu::Event kernelsDone = nullptr;   // the group's kernels ended (AllReduce halves follow)
};

// Asks the tuning for the group's side work (each plan's side), counts
// every task of the group, and queues the copies that run with the
// kernels. Once per group, before the connections and the kernels.
[[nodiscard]] ncclResult_t startSideStreams(GroupPlan& group, const UseDevice& useDevice);
// After the group's kernels are queued (launched: all of them were), or
// after a failure (then nothing follows the kernels): queues the copies
// after the kernels, then the task streams wait for the side streams.
[[nodiscard]] ncclResult_t joinSideStreams(GroupPlan& group, const UseDevice& useDevice, bool launched);

// The side stream and its entry, exit and kernels-done events (created
// once, freed with the communicator by releaseSideStreams).
[[nodiscard]] ncclResult_t ensureSideStream(SideStreams* s);
// Destroy and abort: waits for the side stream (destroy promises the
// communicator's operations are over), then frees it and its events.
void releaseSideStreams(SideStreams* s);

// Whether any task of the plan is left to its kernels (side.*Path).
bool hasKernelTasks(const CommPlan& p);

// Sizes the posted-message counters to the rank count.
void ensurePostedCounters(SideStreams* s, int nRanks);

// Counts the tasks of a group as posted, so later groups still match
// tasks by their order.
void countPostedMessages(SideStreams* s, int nRanks, const std::vector<Task>& p2p);
inline void countPostedTasks(SideStreams* s, int nRanks, const TaskList& tasks) {
  s->collsPosted += tasks.colls.size();
  if (!tasks.p2p.empty()) countPostedMessages(s, nRanks, tasks.p2p);
}

// After a failed group the counts may no longer agree between ranks: the
// communicator leaves the copy-engine path for good.
inline void disableCopyEngine(SideStreams* s) { s->copyEngineOff = true; }

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
