// Who watches a communicator's launch sequence (launchTasks, core/planner.h):
// the one sequence plan -> launch -> end tells its observer what happened,
// so that a watcher never repeats the sequence to put itself around it.
// The profiler is the observer (core/launch_profiling.h): its Coll / P2p
// events are described from the plan before anything launches, KernelLaunch
// events go around each kernel launch, and every event ends with the
// sequence. A plan carries its observer (CommPlan::observer); a plan
// without one costs a predictable branch per step.
#pragma once

#include <cstddef>

#include "uniccl.h"

namespace uniccl {

struct CommPlan;

class LaunchObserver {
 public:
  // The plan is made (planResult ncclSuccess) or was refused: nothing is
  // launched yet. The observer may mark the plan's work items (KernelCh
  // stamps) but changes nothing else.
  virtual void planned(CommPlan& plan, ncclResult_t planResult) = 0;
  // Around the kernel launch of plan.launch.launches[k]; begin's result is
  // handed to end.
  virtual void* kernelLaunchBegin(CommPlan& plan, size_t k) = 0;
  virtual void kernelLaunchEnd(CommPlan& plan, size_t k, void* begun, ncclResult_t launchResult) = 0;
  // The sequence is over: everything launched (result ncclSuccess) or it
  // failed at `result`.
  virtual void ended(CommPlan& plan, ncclResult_t result) = 0;

 protected:
  ~LaunchObserver() = default;
};

}  // namespace uniccl
