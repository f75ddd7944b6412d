// What one group end (ncclGroupEnd, or a call outside any group) does, as a
// value: per communicator of the group its tasks, launch plan, side copies
// and in-place staging (CommPlan), in the group's order (GroupPlan). The
// group end makes it from the communicators the calling thread put in its
// open group and passes it through every step (plan -> connect -> launch
// -> join, core/group.cc); the steps after planning read the plan, and the
// watchdog, the profiler and the copy engines get the plan (or the piece
// they need) and their own state, not the communicator.
//
// A CommPlan reads the tasks its communicator recorded for the group
// (ncclComm::tasks; API calls on a communicator cannot come during its group
// end, NCCL's rule of one thread at a time) and clears them when it goes. No
// allocation in steady state: each communicator keeps the storage of its
// last plan (ncclComm::planStorage, nothing reads it), the next GroupPlan
// takes it and gives it back cleared, with the capacity of its vectors; a
// plan's storage serves one communicator for its whole life.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/core/inplace_stage.h"
#include "common/core/launch_plan.h"
#include "common/core/tasks.h"
#include "common/profiler/profiler.h"
#include "common/transport/peer_need.h"

struct ncclComm;

namespace uniccl {

class LaunchObserver;   // core/launch_observer.h
struct SideStreams;     // core/side_stream.h
struct InPlaceScratch;  // core/inplace_stage.h
struct PatScratch;      // core/pat_scratch.h

// One communicator's part of a group.
struct CommPlan {
  explicit CommPlan(ncclComm* c);
  CommPlan(const CommPlan&) = delete;
  CommPlan& operator=(const CommPlan&) = delete;

  ncclComm* const comm;       // whose plan it is (the planner and the tuning read it)
  // What the steps that do not read the communicator need of it: its rank,
  // rank count, GPU, GPU sharing, and its hash (the same on every rank: the
  // copy engines pair a group's ranks by it).
  int rank = -1;
  int nRanks = 0;
  int gpuDev = -1;
  bool gpuShared = false;
  uint64_t commHash = 0;
  TaskList& tasks;            // the group's tasks (ncclComm::tasks)
  LaunchPlan launch;          // works, kernel launches, streams (core/launch_plan.h)
  SidePlan side;              // copy engines and side kernels (core/launch_plan.h)
  StagePlan stage;            // in-place AlltoAll sends copied aside (core/inplace_stage.h)
  std::vector<PeerNeed> newPeers;  // connections the kernels need that are not wired yet (written by peersToConnect)
  // The communicator's state of the modules the group end drives, each
  // module's part of ncclComm::sideState (core/side_state.h).
  SideStreams* const sides;
  InPlaceScratch* const stageScratch;
  PatScratch* const patScratch;
  // Who watches the launch sequence (the profiler, core/launch_observer.h),
  // and the events it opened for this launch; nullptr: nobody.
  LaunchObserver* observer = nullptr;
  ProfilerLaunchEvents events;
  // The launch helpers' job of this plan (core/group.cc): plans of one GPU share one.
  int launchJob = -1;
  bool launched = false;      // launchTasks queued all of it

  // Forgets what one group decided (and the communicator's recorded
  // tasks); the vectors keep their capacity.
  void clear();

 private:
  friend class GroupPlan;
  CommPlan* next_ = nullptr;
};

// The communicators of one group end, in the order the thread first used
// them, each with its plan. Not copyable; gives the storage back when it goes.
class GroupPlan {
 public:
  GroupPlan() = default;
  // A call outside any group: a group of one.
  explicit GroupPlan(ncclComm* comm) { add(comm); }
  ~GroupPlan();
  GroupPlan(const GroupPlan&) = delete;
  GroupPlan& operator=(const GroupPlan&) = delete;

  // comm's plan in this group, over the tasks comm recorded (the storage of
  // comm's last plan when it has one).
  CommPlan& add(ncclComm* comm);

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  CommPlan& front() { return *first_; }
  // comm's plan in this group; nullptr when comm is not in it.
  CommPlan* find(const ncclComm* comm);

  template <typename T>
  class Iter {
   public:
    explicit Iter(T* p) : p_(p) {}
    T& operator*() const { return *p_; }
    T* operator->() const { return p_; }
    Iter& operator++() {
      p_ = p_->next_;
      return *this;
    }
    bool operator!=(const Iter& o) const { return p_ != o.p_; }

   private:
    T* p_;
  };
  Iter<CommPlan> begin() { return Iter<CommPlan>(first_); }
  Iter<CommPlan> end() { return Iter<CommPlan>(nullptr); }
  Iter<const CommPlan> begin() const { return Iter<const CommPlan>(first_); }
  Iter<const CommPlan> end() const { return Iter<const CommPlan>(nullptr); }

 private:
  CommPlan* first_ = nullptr;
  CommPlan* last_ = nullptr;
  size_t n_ = 0;
};

}  // namespace uniccl
