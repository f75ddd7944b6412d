// The profiler as the communicator core drives it: plugin init and
// finalize per communicator, the API events of enqueueTask, and the
// observer of the launch sequence (core/launch_observer.h) that opens the
// Group, Coll / P2p and KernelLaunch events around it and marks the work
// items whose channels stamp KernelCh events. Each hook costs one
// predictable branch when the communicator has no profiler.
#pragma once

#include "common/core/comm.h"
#include "common/core/tasks.h"
#include "common/profiler/profiler.h"

namespace uniccl {

class LaunchObserver;

// After the bootstrap allgather filled comm->peers: loads the plugin and
// calls its init (nNodes = distinct host hashes). Never fails the comm.
void profilerCommInit(ncclComm* comm);
// At destroy/abort, before the comm's memory goes: plugin finalize, dlclose
// with the last communicator.
inline void profilerCommFinalize(ncclComm* comm) { profilerFinalize(comm->profiler); }

// An operation recorded by the API (enqueueTask): opens the group's
// GroupApi event for this communicator when it is the group's first and
// starts the CollApi / P2pApi event, remembered as the parent of the task's
// Coll / P2p event. Returns the API event for profilerTaskApiEnd.
void* profilerTaskApiBeginSlow(ncclComm* comm, const Task& task, GroupApiEvents* groupApi, int groupDepth);
inline void* profilerTaskApiBegin(ncclComm* comm, const Task& task, GroupApiEvents* groupApi, int groupDepth) {
  if (__builtin_expect(comm->profiler == nullptr, 1)) return nullptr;
  return profilerTaskApiBeginSlow(comm, task, groupApi, groupDepth);
}
inline void profilerTaskApiEnd(ncclComm* comm, void* apiEvent) { profilerStop(comm->profiler.get(), apiEvent); }

// Tasks dropped without launch (a failed group): forget their parents.
inline void profilerDropTasks(ncclComm* comm) {
  if (__builtin_expect(comm->profiler == nullptr, 1)) return;
  comm->profiler->collApiParents.clear();
  comm->profiler->p2pApiParents.clear();
}

// The observer of comm's launches: the profiler's when comm has one, else nullptr.
LaunchObserver* profilingObserver();
inline LaunchObserver* launchObserverOf(const ncclComm* comm) {
  return __builtin_expect(comm->profiler == nullptr, 1) ? nullptr : profilingObserver();
}

// Ends the group's GroupApi events when the scope closes (outermost
// ncclGroupEnd, or the implicit group of a call made outside any group).
struct ProfilerGroupApiScope {
  explicit ProfilerGroupApiScope(GroupApiEvents* g) : events(g) { profilerRecordGroupEndApi(events); }
  ~ProfilerGroupApiScope() { profilerStopGroupApi(events); }
  ProfilerGroupApiScope(const ProfilerGroupApiScope&) = delete;
  ProfilerGroupApiScope& operator=(const ProfilerGroupApiScope&) = delete;
  GroupApiEvents* const events;
};

}  // namespace uniccl
