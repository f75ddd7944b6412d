#include "common/core/comm_plan.h"

#include <utility>

#include "common/core/comm.h"
#include "common/core/launch_profiling.h"
#include "common/core/side_state.h"

namespace uniccl {

CommPlan::CommPlan(ncclComm* c)
    : comm(c),
      tasks(c->tasks),
      sides(&c->sideState->streams),
      stageScratch(&c->sideState->inPlace),
      patScratch(&c->sideState->pat) {}

void CommPlan::clear() {
  tasks.clear();
  launch.clear();
  side.clear();
  // The rest is written before it is read: newPeers by peersToConnect, the
  // staging offsets by their stage step; only a plan that staged or was
  // observed has more to forget.
  if (stage.eagerStream != nullptr) stage.clear();
  if (observer != nullptr) events.clear();
  launchJob = -1;
  launched = false;
}

CommPlan& GroupPlan::add(ncclComm* comm) {
  // The storage of comm's last plan: its vectors have the capacity steady
  // state needs. A communicator whose plan is out (a second group end on it
  // before the first gave it back, which NCCL's rules exclude) gets new storage.
  std::unique_ptr<CommPlan> storage = std::move(comm->planStorage);
  if (!storage) storage = std::make_unique<CommPlan>(comm);
  CommPlan* p = storage.release();
  // What init fixed, read again for hand-built communicators that change it.
  p->rank = comm->rank;
  p->nRanks = comm->nRanks;
  p->gpuDev = comm->gpuDev;
  p->gpuShared = comm->gpuShared;
  p->commHash = comm->commHash;
  p->observer = launchObserverOf(comm);
  p->next_ = nullptr;
  if (last_ != nullptr) last_->next_ = p;
  else first_ = p;
  last_ = p;
  n_++;
  return *p;
}

CommPlan* GroupPlan::find(const ncclComm* comm) {
  for (CommPlan& p : *this)
    if (p.comm == comm) return &p;
  return nullptr;
}

GroupPlan::~GroupPlan() {
  for (CommPlan* p = first_; p != nullptr;) {
    CommPlan* next = p->next_;
    p->clear();
    ncclComm* comm = p->comm;
    if (!comm->planStorage) comm->planStorage.reset(p);
    else delete p;
    p = next;
  }
}

}  // namespace uniccl
