// The profiler as the communicator core calls it: thin adapters from ncclComm
// and Task to the comm-agnostic helpers of profiler.h. Each costs one
// predictable branch when the communicator has no profiler.
#pragma once

#include "common/core/comm.h"
#include "common/core/planner.h"
#include "common/profiler/profiler.h"

namespace uniccl {

// After the bootstrap allgather filled comm->peers: loads the plugin and
// calls its init (nNodes = distinct host hashes). Never fails the comm.
void profilerCommInit(ncclComm* comm);
// At destroy/abort, before the comm's memory goes: plugin finalize, dlclose
// with the last communicator.
inline void profilerCommFinalize(ncclComm* comm) { profilerFinalize(comm->profiler); }

// An operation recorded by the API (enqueueTask): opens the thread's GroupApi
// event when it is the group's first and starts the CollApi / P2pApi event,
// remembered as the parent of the task's Coll / P2p event. Returns the API
// event for profilerTaskApiEnd.
void* profilerTaskApiBeginSlow(ncclComm* comm, const Task& task, int groupDepth);
inline void* profilerTaskApiBegin(ncclComm* comm, const Task& task, int groupDepth) {
  if (__builtin_expect(comm->profiler == nullptr, 1)) return nullptr;
  return profilerTaskApiBeginSlow(comm, task, groupDepth);
}
inline void profilerTaskApiEnd(ncclComm* comm, void* apiEvent) { profilerStop(comm->profiler.get(), apiEvent); }

// Tasks dropped without launch (a failed group): forget their parents.
inline void profilerDropTasks(ncclComm* comm) {
  if (__builtin_expect(comm->profiler == nullptr, 1)) return;
  comm->profiler->collApiParents.clear();
  comm->profiler->p2pApiParents.clear();
}

// launchTasks with the Group event and the tasks' Coll / P2p events around
// it (started before planning, stopped once the launch is enqueued, as NCCL
// does). During launchTasks, comm->profiler->launchGroup and
// ->launchTaskEvents hold the handles (parents for KernelCh / ProxyOp).
ncclResult_t launchTasksWithEvents(ncclComm* comm);
inline ncclResult_t launchTasksProfiled(ncclComm* comm) {
  if (__builtin_expect(comm->profiler == nullptr, 1)) return launchTasks(comm);
  return launchTasksWithEvents(comm);
}

// Ends the thread's GroupApi event when the scope closes (outermost
// ncclGroupEnd, or the implicit group of a call made outside any group).
struct ProfilerGroupApiScope {
  ProfilerGroupApiScope() { profilerRecordGroupEndApi(); }
  ~ProfilerGroupApiScope() { profilerStopGroupApi(); }
  ProfilerGroupApiScope(const ProfilerGroupApiScope&) = delete;
  ProfilerGroupApiScope& operator=(const ProfilerGroupApiScope&) = delete;
};

}  // namespace uniccl
